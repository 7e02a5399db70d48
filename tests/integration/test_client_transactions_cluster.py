"""odradek.client transactions against a real ZooKeeper + broker: commit, abort, read_committed,
consume-transform-produce with send_offsets_to_transaction, and zombie fencing."""
from __future__ import annotations

import time

import pytest

from odradek.client import (
    Consumer,
    KafkaError,
    Producer,
    ProducerFencedError,
    TopicPartition,
)
from odradek.testing import create_topic, wait_until

# one broker: the internal topics must fit it
OVERRIDES = {
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "transaction.state.log.num.partitions": 4,
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from odradek.zk.cluster import LocalCluster
    c = LocalCluster(tmp_path_factory.mktemp("client-txn"), zookeepers=1, brokers=1, overrides=OVERRIDES)
    c.start()
    try:
        yield c
    finally:
        c.stop()


def producer(cluster, tid: str | None = None, **kw) -> Producer:
    kw.setdefault("max_block_ms", 30000)
    if tid is not None:
        kw["transactional_id"] = tid
    return Producer(bootstrap_servers=cluster.bootstrap_servers, **kw)


def read(cluster, tps: list[TopicPartition], isolation: str, timeout: float = 30.0) -> tuple[list[bytes], dict]:
    """Every record up to the partitions' current log ends, and the final positions. With read_committed
    the position passes a transaction only once its marker is written (EndTxn returns before that)."""
    with Consumer(bootstrap_servers=cluster.bootstrap_servers) as probe:
        ends = probe.end_offsets(tps)            # read_uncommitted: the high watermarks
    c = Consumer(bootstrap_servers=cluster.bootstrap_servers, isolation_level=isolation,
                 auto_offset_reset="earliest")
    try:
        c.assign(tps)
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(f"positions {[c.position(tp) for tp in tps]} never reached {ends}")
            for recs in c.poll(200).values():
                values.extend(r.value for r in recs)
        return sorted(values), {tp: c.position(tp) for tp in tps}
    finally:
        c.close()


def test_committed_transaction_is_visible_to_read_committed(cluster):
    tps = create_topic(cluster.bootstrap_servers, "txn-commit", 2)
    p = producer(cluster, "tid-commit")
    p.init_transactions()
    p.begin_transaction()
    futs = [p.send("txn-commit", f"c{i:03d}".encode(), partition=i % 2) for i in range(100)]
    p.commit_transaction()
    assert all(f.is_done() and f.get(0).offset >= 0 for f in futs)
    p.close()
    values, positions = read(cluster, tps, "read_committed")
    assert values == [f"c{i:03d}".encode() for i in range(100)]
    assert positions == {tps[0]: 51, tps[1]: 51}            # 50 records + the commit marker each


def test_aborted_transaction_is_invisible_to_read_committed_only(cluster):
    tps = create_topic(cluster.bootstrap_servers, "txn-abort", 2)
    p = producer(cluster, "tid-abort")
    p.init_transactions()
    p.begin_transaction()
    for i in range(40):
        p.send("txn-abort", f"a{i:02d}".encode(), partition=i % 2)
    p.flush()
    p.abort_transaction()
    p.begin_transaction()
    for i in range(10):
        p.send("txn-abort", f"k{i:02d}".encode(), partition=i % 2)
    p.commit_transaction()
    p.close()
    committed, positions = read(cluster, tps, "read_committed")
    assert committed == [f"k{i:02d}".encode() for i in range(10)]
    assert positions == {tps[0]: 27, tps[1]: 27}           # 20 aborted + marker + 5 + marker
    everything, _ = read(cluster, tps, "read_uncommitted")
    assert everything == sorted([f"a{i:02d}".encode() for i in range(40)] + committed)


def test_consume_transform_produce_commits_offsets_with_the_output(cluster):
    src = create_topic(cluster.bootstrap_servers, "ctp-in", 2)
    dst = create_topic(cluster.bootstrap_servers, "ctp-out", 2)
    plain = producer(cluster, acks="all")
    for i in range(30):
        plain.send("ctp-in", f"{i}".encode(), partition=i % 2)
    plain.flush()
    plain.close()
    consumer = Consumer(bootstrap_servers=cluster.bootstrap_servers, group_id="ctp-group",
                        isolation_level="read_committed", auto_offset_reset="earliest",
                        enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=500)
    consumer.subscribe(["ctp-in"])
    p = producer(cluster, "tid-ctp")
    p.init_transactions()
    processed = 0
    aborted_once = False
    deadline = time.monotonic() + 60
    try:
        while processed < 30:
            assert time.monotonic() < deadline, f"processed only {processed} of 30"
            batch = consumer.poll(500)
            if not batch:
                continue
            p.begin_transaction()
            for tp, recs in batch.items():
                for r in recs:
                    p.send("ctp-out", f"out-{int(r.value) * 10}".encode(), partition=r.partition)
            offsets = {tp: recs[-1].offset + 1 for tp, recs in batch.items()}
            p.send_offsets_to_transaction(offsets, consumer.group_metadata())
            if not aborted_once:
                # the first round is aborted: neither its output nor its offsets count; reprocess it
                aborted_once = True
                p.abort_transaction()
                assert all(consumer.committed(tp) is None for tp in src)
                for tp in batch:
                    consumer.seek(tp, batch[tp][0].offset)
                continue
            p.commit_transaction()
            processed += sum(len(recs) for recs in batch.values())
        # EndTxn returns before the coordinator has written the markers that make the offsets
        # visible (OffsetFetch below v7 has no require_stable to wait for them): wait for them
        wait_until(lambda: {tp: consumer.committed(tp) for tp in src} == {src[0]: 15, src[1]: 15},
                   30, "the transactional offsets to be committed")
    finally:
        p.close()
        consumer.close()
    values, _ = read(cluster, dst, "read_committed")
    assert values == sorted(f"out-{i * 10}".encode() for i in range(30))


def test_second_producer_with_the_same_id_fences_the_first(cluster):
    tps = create_topic(cluster.bootstrap_servers, "txn-fence", 2)
    zombie = producer(cluster, "tid-fence")
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send("txn-fence", b"zombie", partition=0).get(30)
    successor = producer(cluster, "tid-fence")
    successor.init_transactions()     # bumps the epoch and aborts the zombie's open transaction
    with pytest.raises(ProducerFencedError):
        zombie.commit_transaction()
    with pytest.raises(ProducerFencedError):
        zombie.send("txn-fence", b"again", partition=0)
    with pytest.raises(ProducerFencedError):
        zombie.abort_transaction()
    zombie.close()
    successor.begin_transaction()
    successor.send("txn-fence", b"successor", partition=1)
    successor.commit_transaction()
    successor.close()
    values, _ = read(cluster, tps, "read_committed")
    assert values == [b"successor"]
    everything, _ = read(cluster, tps, "read_uncommitted")
    assert everything == [b"successor", b"zombie"]


def test_a_rejected_batch_makes_the_transaction_abortable_and_the_abort_recovers(cluster):
    tps = create_topic(cluster.bootstrap_servers, "txn-reject", 1, configs={"max.message.bytes": "2000"})
    p = producer(cluster, "tid-reject")
    p.init_transactions()
    p.begin_transaction()
    small = p.send("txn-reject", b"small", partition=0)
    small.get(30)
    big = p.send("txn-reject", b"x" * 5000, partition=0)     # the broker rejects it: MESSAGE_TOO_LARGE
    with pytest.raises(KafkaError, match="MESSAGE_TOO_LARGE"):
        big.get(30)
    with pytest.raises(KafkaError, match="MESSAGE_TOO_LARGE"):
        p.commit_transaction()
    p.abort_transaction()           # also bumps the epoch: the rejected sequence left a gap
    p.begin_transaction()
    p.send("txn-reject", b"after", partition=0)
    p.commit_transaction()
    p.close()
    values, _ = read(cluster, tps, "read_committed")
    assert values == [b"after"]
