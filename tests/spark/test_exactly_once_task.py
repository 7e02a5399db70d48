"""One exactly-once write task against a real broker (no Spark): replay skip, zombie fencing, new query."""
from __future__ import annotations

import pyarrow as pa
import pytest

from odradek.client import AdminClient, KafkaError, Producer
from odradek.pipeline.exactly_once import default_prefix, transactional_id, write_task
from odradek.pipeline.options import parse_write_options
from test_exactly_once import TXN_OVERRIDES, read_topic
from odradek.testing import create_topic

OUT = "eos-task-out"


@pytest.fixture
def bootstrap(cluster_factory):
    bs = cluster_factory(brokers=1, overrides=TXN_OVERRIDES).bootstrap_servers
    create_topic(bs, OUT, 2)
    return bs


def _rows(*values: str) -> list[pa.RecordBatch]:
    return [pa.RecordBatch.from_pydict({"key": [v.encode() for v in values], "value": list(values)})]


def _opts(bootstrap: str, **extra: str):
    return parse_write_options({"kafka.bootstrap.servers": bootstrap, "topic": OUT, "exactlyOnce": "true",
                                **extra}, streaming=True)


def _values(bootstrap: str, isolation: str = "read_committed") -> list[bytes]:
    return sorted(r.value for r in read_topic(bootstrap, OUT, isolation))


def test_a_replayed_task_writes_nothing_twice(bootstrap):
    opts = _opts(bootstrap)
    first = write_task(opts, iter(_rows("a", "b", "c")), batch_id=0, task=0, query_id="q1")
    assert (first.records, first.skipped) == (3, False)
    assert first.transactional_id == transactional_id(default_prefix("q1"), 0)
    # the query died before Spark recorded batch 0: it replays batch 0, task 0 sees its marker
    again = write_task(opts, iter(_rows("a", "b", "c")), batch_id=0, task=0, query_id="q1")
    assert (again.records, again.skipped) == (3, True)
    # the other task of batch 0 had not committed: it writes; then batch 1 goes on as usual
    write_task(opts, iter(_rows("d")), batch_id=0, task=1, query_id="q1")
    write_task(opts, iter(_rows("e", "f")), batch_id=1, task=0, query_id="q1")
    write_task(opts, iter(_rows("e", "f")), batch_id=1, task=0, query_id="q1")
    assert _values(bootstrap) == [b"a", b"b", b"c", b"d", b"e", b"f"]
    # the marker: group <prefix>-0 committed batches 0 and 1, inside the transactions
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        marks = admin.list_consumer_group_offsets(transactional_id(default_prefix("q1"), 0))
    assert [om.offset for om in marks.values()] == [2]


def test_a_new_checkpoint_reusing_the_prefix_is_not_skipped(bootstrap):
    opts = _opts(bootstrap, transactionalIdPrefix="sales")
    write_task(opts, iter(_rows("old")), batch_id=0, task=0, query_id="query-before")
    # a new checkpoint (new query id) starts again at batch 0 with the same prefix: it must write
    msg = write_task(opts, iter(_rows("new")), batch_id=0, task=0, query_id="query-after")
    assert msg.transactional_id == "sales-0" and not msg.skipped
    assert _values(bootstrap) == [b"new", b"old"]


def test_a_zombie_task_is_fenced_and_its_rows_aborted(bootstrap):
    opts = _opts(bootstrap)
    txn_id = transactional_id(default_prefix("q1"), 0)
    # a first attempt of task 0 of batch 0: its rows are in the log, its transaction still open
    zombie = Producer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        for v in ("z1", "z2"):
            zombie.send(OUT, value=v.encode(), key=v.encode())
        zombie.flush()
        # the retried attempt takes over the transactional id and writes the batch
        msg = write_task(opts, iter(_rows("a", "b")), batch_id=0, task=0, query_id="q1")
        assert (msg.records, msg.skipped) == (2, False)
        with pytest.raises(KafkaError) as info:  # the zombie cannot commit any more
            zombie.commit_transaction()
        assert type(info.value).__name__ == "ProducerFencedError"
    finally:
        zombie.close()
    assert _values(bootstrap) == [b"a", b"b"]
    # the zombie's rows did reach the log: only read_committed hides them
    assert _values(bootstrap, "read_uncommitted") == [b"a", b"b", b"z1", b"z2"]
