"""Transactions against real ZooKeeper + 3 broker processes, driven by confluent-kafka
(librdkafka) as its users drive it: commit and abort, zombie fencing by a second producer
with the same transactional.id, and the coordinator aborting a transaction left open past
transaction.timeout.ms. What is checked is what a read_committed consumer sees."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 3
END = b"__end__"
OVERRIDES = {
    "transaction.state.log.num.partitions": 6,
    "offsets.topic.num.partitions": 6,
    "group.initial.rebalance.delay.ms": 0,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
}


@pytest.fixture
def cluster(cluster_factory):
    return cluster_factory(brokers=3, overrides=OVERRIDES)


def wait_until(cond, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.1)


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, PARTITIONS, 3, config={"min.insync.replicas": "2"})]).values():
        f.result(60)

    def ready() -> bool:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        return (md is not None and md.error is None and len(md.partitions) == PARTITIONS
                and all(p.leader >= 0 and len(p.isrs) == 3 for p in md.partitions.values()))
    wait_until(ready, what=f"leaders and full ISR of {name}")


def txn_producer(bootstrap: str, txn_id: str, **extra) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})


def produce(p: Producer, topic: str, prefix: str, n: int) -> None:
    for i in range(n):
        p.produce(topic, key=f"{prefix}-{i}".encode(), value=f"{prefix}-{i}".encode(), partition=i % PARTITIONS)
    p.flush(60)


def write_end_markers(bootstrap: str, topic: str) -> None:
    """A non-transactional END record on every partition, after the records under test."""
    errors: list = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for part in range(PARTITIONS):
        p.produce(topic, value=END, partition=part, on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(60) == 0 and not errors, errors


def read_until_end(bootstrap: str, topic: str, isolation: str, timeout: float = 90.0) -> list[bytes]:
    """Values the consumer sees before the END record of every partition (assigned, so no
    group coordinator is involved)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": isolation})
    seen: list[bytes] = []
    ended: set[int] = set()
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        while len(ended) < PARTITIONS:
            assert time.monotonic() < deadline, f"END not seen on all partitions ({sorted(ended)})"
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            if msg.value() == END:
                ended.add(msg.partition())
            else:
                seen.append(msg.value())
    finally:
        c.close()
    return seen


def names(prefix: str, n: int) -> set[bytes]:
    return {f"{prefix}-{i}".encode() for i in range(n)}


def test_commit_and_abort(cluster):
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "txn-t")
    p = txn_producer(bootstrap, "tx-commit-abort")
    p.init_transactions(60)
    p.begin_transaction()
    produce(p, "txn-t", "committed", 30)
    p.commit_transaction(60)
    p.begin_transaction()
    produce(p, "txn-t", "aborted", 20)
    p.abort_transaction(60)
    p.begin_transaction()
    produce(p, "txn-t", "again", 10)
    p.commit_transaction(60)
    write_end_markers(bootstrap, "txn-t")

    committed = read_until_end(bootstrap, "txn-t", "read_committed")
    assert sorted(committed) == sorted(names("committed", 30) | names("again", 10))
    everything = read_until_end(bootstrap, "txn-t", "read_uncommitted")
    assert sorted(everything) == sorted(names("committed", 30) | names("aborted", 20) | names("again", 10))


def test_second_producer_fences_the_first(cluster):
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "txn-f")
    zombie = txn_producer(bootstrap, "tx-fence")
    zombie.init_transactions(60)
    zombie.begin_transaction()
    produce(zombie, "txn-f", "zombie", 12)

    fresh = txn_producer(bootstrap, "tx-fence")
    fresh.init_transactions(60)          # aborts the zombie's open transaction first
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(60)
    err: KafkaError = info.value.args[0]
    assert err.fatal(), err
    assert err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), err

    fresh.begin_transaction()
    produce(fresh, "txn-f", "fresh", 9)
    fresh.commit_transaction(60)
    write_end_markers(bootstrap, "txn-f")
    assert sorted(read_until_end(bootstrap, "txn-f", "read_committed")) == sorted(names("fresh", 9))


def test_open_transaction_is_aborted_after_its_timeout(cluster):
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "txn-o")
    p = txn_producer(bootstrap, "tx-timeout", **{"transaction.timeout.ms": 4000, "message.timeout.ms": 4000})
    p.init_transactions(60)
    p.begin_transaction()
    produce(p, "txn-o", "open", 15)
    # the END records sit behind the open transaction: a read_committed reader reaches them
    # only once the coordinator aborted it (and the markers moved the last stable offset)
    write_end_markers(bootstrap, "txn-o")
    assert read_until_end(bootstrap, "txn-o", "read_committed") == []
    assert sorted(read_until_end(bootstrap, "txn-o", "read_uncommitted")) == sorted(names("open", 15))
    with pytest.raises(KafkaException):
        p.commit_transaction(30)          # the coordinator bumped the epoch: this producer is fenced


def txn_coordinator_of(cluster, txn_id: str) -> int:
    """The broker leading the transactional id's ``__transaction_state`` partition (from ZooKeeper)."""
    import json

    from odradek.broker.group.offsets import partition_for
    p = partition_for(txn_id, OVERRIDES["transaction.state.log.num.partitions"])
    data, _ = cluster.zk.get(f"/brokers/topics/__transaction_state/partitions/{p}/state")
    return json.loads(data)["leader"]


def test_commit_survives_the_coordinator_being_killed(cluster):
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "txn-k")
    p = txn_producer(bootstrap, "tx-failover")
    p.init_transactions(60)
    p.begin_transaction()
    produce(p, "txn-k", "before", 12)
    victim = txn_coordinator_of(cluster, "tx-failover")
    cluster.kill_broker(victim)          # kill -9: the new leader loads the Ongoing transaction
    wait_until(lambda: txn_coordinator_of(cluster, "tx-failover") not in (victim, -1),
               what="a new transaction coordinator")
    produce(p, "txn-k", "after", 6)
    p.commit_transaction(90)
    write_end_markers(bootstrap, "txn-k")
    assert sorted(read_until_end(bootstrap, "txn-k", "read_committed")) == \
        sorted(names("before", 12) | names("after", 6))
