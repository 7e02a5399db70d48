"""A leader change of many partitions: partition.metadata written off the reactor in one batch
per LeaderAndIsr, fetch purgatory wake-ups per partition key, and summary log lines."""
from __future__ import annotations

import logging
import os

import pytest
from twisted.internet import defer

from odradek.broker.log import partition_metadata
from odradek.broker.log.partition_metadata import FILE_NAME, read_topic_id
from odradek.broker.metadata_cache import PartitionMetadata
from odradek.broker.replication.delayed import DelayedFetch, FetchParams, FetchPartition, Purgatory
from odradek.protocol.errors import ErrorCode
from odradek.zk.znodes import new_topic_id

from broker_fixtures import Broker


class Thread:
    """run_blocking stand-in: keeps the jobs until the test runs them."""

    def __init__(self):
        self.jobs: list[tuple[defer.Deferred, object, tuple]] = []

    def __call__(self, fn, *args):
        d: defer.Deferred = defer.Deferred()
        self.jobs.append((d, fn, args))
        return d

    def run_next(self) -> None:
        d, fn, args = self.jobs.pop(0)
        d.callback(fn(*args))


@pytest.fixture
def b(tmp_path):
    broker = Broker(tmp_path, broker_id=1)
    broker.thread = Thread()
    broker.rm.topic_ids.run_blocking = broker.thread
    yield broker
    broker.close()


def lead(b: Broker, topic: str, ids: dict, count: int, epoch: int = 0) -> dict:
    b.set_metadata({topic: {p: (1, [1], [1]) for p in range(count)}})
    states = [PartitionMetadata(topic, p, 1, 1, epoch, [1], 0, [1], topic_id=ids[topic]) for p in range(count)]
    return b.rm.become_leader_or_follower(1, states)[1]


def metadata_files(b: Broker) -> dict[str, object]:
    return {os.path.basename(lg.dir): read_topic_id(lg.dir) for lg in b.log_manager.all_logs()}


def test_one_batch_per_leader_and_isr_written_off_the_reactor(b):
    ids = {"t": new_topic_id(), "u": new_topic_id()}
    assert set(lead(b, "t", ids, 50).values()) == {ErrorCode.NONE}
    assert len(b.thread.jobs) == 1                       # one job for the 50 files
    assert set(metadata_files(b).values()) == {None}     # nothing written on the calling thread
    # the queued id is checked before its file exists: a second topic id for the log is refused
    assert lead(b, "t", {"t": new_topic_id()}, 1, epoch=1)[("t", 0)] == ErrorCode.INCONSISTENT_TOPIC_ID
    assert lead(b, "u", ids, 5).values()   # queued while the first batch runs: no second job yet
    assert len(b.thread.jobs) == 1
    b.thread.run_next()
    assert len(b.thread.jobs) == 1 and b.rm.topic_ids.pending() == 5   # the next batch: u's files
    b.thread.run_next()
    files = metadata_files(b)
    assert files == {**{f"t-{p}": ids["t"] for p in range(50)}, **{f"u-{p}": ids["u"] for p in range(5)}}
    assert b.rm.topic_ids.pending() == 0 and not b.thread.jobs
    lg = b.log_manager.get_log(("t", 0))
    assert sorted(os.listdir(lg.dir)).count(FILE_NAME + ".tmp") == 0   # renamed into place
    assert lead(b, "t", ids, 50, epoch=2)[("t", 0)] == ErrorCode.NONE and not b.thread.jobs


def test_a_log_marked_by_this_broker_reads_no_file_at_its_next_leader_and_isr(b, monkeypatch):
    reads: list[str] = []

    def counting_read(log_dir):
        reads.append(log_dir)
        return read_topic_id(log_dir)
    monkeypatch.setattr(partition_metadata, "read_topic_id", counting_read)
    ids = {"t": new_topic_id()}
    lead(b, "t", ids, 20)
    assert len(reads) == 20                      # a new log: its (missing) file looked for once
    b.thread.run_next()
    assert set(metadata_files(b).values()) == {ids["t"]}
    reads.clear()
    assert set(lead(b, "t", ids, 20, epoch=1).values()) == {ErrorCode.NONE}   # an ISR change
    assert reads == [] and not b.thread.jobs
    # another id is still refused, from the file on disk
    assert lead(b, "t", {"t": new_topic_id()}, 1, epoch=2)[("t", 0)] == ErrorCode.INCONSISTENT_TOPIC_ID
    assert len(reads) == 1


def test_a_deleted_log_gets_no_file_from_a_batch_still_queued(b):
    ids = {"t": new_topic_id()}
    lead(b, "t", ids, 2)
    lg = b.log_manager.get_log(("t", 1))
    _, errors = b.rm.stop_replicas(1, [(("t", 1), True, -2)])
    assert errors[("t", 1)] == ErrorCode.NONE
    b.thread.run_next()
    assert read_topic_id(b.log_manager.get_log(("t", 0)).dir) == ids["t"]
    assert not os.path.exists(os.path.join(lg.dir, FILE_NAME))
    assert b.rm.topic_ids.pending() == 0


def test_a_failed_batch_is_queued_again_by_the_next_leader_and_isr(b):
    ids = {"t": new_topic_id()}
    lead(b, "t", ids, 3)
    d, _, _ = b.thread.jobs.pop(0)
    d.errback(OSError(5, "Input/output error"))
    assert b.rm.topic_ids.pending() == 0
    assert set(lead(b, "t", ids, 3, epoch=1).values()) == {ErrorCode.NONE}
    b.thread.run_next()
    assert set(metadata_files(b).values()) == {ids["t"]}


def test_a_leader_and_isr_logs_one_info_line(b, caplog):
    ids = {"t": new_topic_id()}
    with caplog.at_level(logging.INFO, logger="odradek.broker"):
        lead(b, "t", ids, 40)
        lead(b, "t", ids, 40)   # the same epoch again: ignored
    lines = [r.getMessage() for r in caplog.records
             if r.levelno >= logging.INFO and r.name.startswith("odradek.broker.replication")]
    assert lines == [
        "LeaderAndIsr (controller epoch 1) for 40 partitions: leader of 40 (t-0, t-1, t-2 and 37 more), "
        "follower of 0, 0 ignored (leader epoch not newer), 0 failed",
        "LeaderAndIsr (controller epoch 1) for 40 partitions: leader of 0, follower of 0, "
        "40 ignored (leader epoch not newer), 0 failed"]


class Readable:
    """A fetchable() stand-in: bytes readable per partition, and the calls made."""

    def __init__(self):
        self.bytes: dict[tuple[str, int], int | None] = {}
        self.calls: list[tuple[str, int]] = []

    def __call__(self, params, fp, needed):
        self.calls.append(fp.tp)
        return self.bytes.get(fp.tp, 0)


def parked_fetch(b, readable, partitions: int, min_bytes: int, responses: list):
    params = FetchParams(2, 500, min_bytes, 1 << 20, 0,
                         [FetchPartition("t", p, 0, 1 << 20) for p in range(partitions)])
    op = DelayedFetch(params, readable, lambda prm: "read", responses.append)
    purgatory = Purgatory("fetch", b.clock)
    assert not purgatory.try_complete_else_watch(op, [fp.tp for fp in params.partitions])
    return purgatory


def test_a_key_rechecks_only_its_partition_of_a_parked_fetch(b):
    readable, responses = Readable(), []
    purgatory = parked_fetch(b, readable, 1000, 1, responses)
    assert len(readable.calls) == 1000          # the first look walks them all
    readable.calls.clear()
    for p in range(100):                         # 100 ISR changes with nothing to read
        assert purgatory.check_and_complete(("t", p)) == 0
    assert len(readable.calls) == 100 and responses == []
    readable.bytes[("t", 700)] = 10
    assert purgatory.check_and_complete(("t", 700)) == 1
    assert responses == ["read"] and purgatory.watched() == 0


def test_min_bytes_add_up_over_keys_and_a_lost_partition_answers_at_once(b):
    readable, responses = Readable(), []
    purgatory = parked_fetch(b, readable, 10, 100, responses)
    readable.bytes[("t", 1)] = 60
    assert purgatory.check_and_complete(("t", 1)) == 0
    readable.bytes[("t", 2)] = 30
    assert purgatory.check_and_complete(("t", 2)) == 0
    readable.bytes[("t", 1)] = 0                 # truncated meanwhile: its figure is refreshed
    readable.bytes[("t", 3)] = 20
    assert purgatory.check_and_complete(("t", 1)) == 0
    assert purgatory.check_and_complete(("t", 3)) == 0   # 0 + 30 + 20
    readable.bytes[("t", 4)] = 50
    assert purgatory.check_and_complete(("t", 4)) == 1 and responses == ["read"]
    readable2, responses2 = Readable(), []
    purgatory2 = parked_fetch(b, readable2, 10, 100, responses2)
    readable2.bytes[("t", 9)] = None             # leadership lost: answer now
    assert purgatory2.check_and_complete(("t", 9)) == 1 and responses2 == ["read"]


def test_a_clean_shutdown_writes_what_is_still_queued(b):
    ids = {"t": new_topic_id(), "u": new_topic_id()}
    lead(b, "t", ids, 3)        # its batch is on the thread
    lead(b, "u", ids, 2)        # queued behind it
    b.rm.shutdown()
    assert set(metadata_files(b).values()) == {ids["t"], ids["u"]} and b.rm.topic_ids.pending() == 0
    b.thread.run_next()         # the batch that was in flight finds nothing left to write
    assert not b.thread.jobs
