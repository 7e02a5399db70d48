"""Transactional offset commits end to end: confluent-kafka's transactional producer sends a
consumer group's offsets with ``send_offsets_to_transaction`` (AddOffsetsToTxn +
TxnOffsetCommit) on a real 3-broker cluster. What the group's ``committed()`` shows:
nothing new while the transaction is open (and a read_committed consumer, which asks with
OffsetFetch v7's require_stable, waits: KIP-447), the offsets once it commits, the old ones
after an abort, and the committed ones still after kill -9 of the group coordinator (its
successor replays ``__consumer_offsets`` with the transaction markers); then a new producer
takes the transactional id over from the successors with its producer id kept and its epoch
bumped, and commits offsets again. EndTxn answers
before the markers are written (as in Kafka), so visibility after a commit is waited for;
a later commit of one partition shows that an aborted offset of the other never landed."""
from __future__ import annotations

import uuid

import pytest

from groups_support import (GROUP_OVERRIDES, committed, create_topic, find_coordinator, wait_for_coordinator,
                            wait_until)

OVERRIDES = {
    **GROUP_OVERRIDES,
    "replica.lag.time.max.ms": 6000,
    "zookeeper.session.timeout.ms": 6000,
    "transaction.state.log.num.partitions": 10,
}
TIMEOUT = 60.0   # seconds a transactional call may take (coordinators may be moving)


def _tp(topic: str, partition: int, offset: int = -1001):
    import confluent_kafka as ck
    return ck.TopicPartition(topic, partition, offset)


class TxnClient:
    """A transactional producer plus two (never subscribed) consumers of the group whose
    ``committed()`` answers what a user of the group sees: read_committed (waits while the
    group's offsets are part of an open transaction) and read_uncommitted (answers at once)."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int):
        import confluent_kafka as ck
        self.topic, self.partitions = topic, partitions
        self.producer_config = {"bootstrap.servers": bootstrap,
                                "transactional.id": f"txn-offsets-{uuid.uuid4().hex[:8]}",
                                "transaction.timeout.ms": 60000, "message.timeout.ms": 60000}
        self.producer = ck.Producer(self.producer_config)
        self.consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                     "enable.auto.commit": False, "isolation.level": "read_committed"})
        self.peek = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                 "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
        self.producer.init_transactions(TIMEOUT)

    def replace_producer(self) -> None:
        """A new producer instance for the same transactional id (init_transactions fences the
        old one). After kill -9 of the group coordinator, the old librdkafka instance can wait
        forever in send_offsets_to_transaction, past its timeout, for the coordinator it cached
        once the dead broker leaves the metadata (confluentinc/librdkafka#5511 and #5456: a
        client bug; the broker then aborts the transaction at transaction.timeout.ms)."""
        import confluent_kafka as ck
        self.producer.flush(TIMEOUT)
        self.producer = ck.Producer(self.producer_config)
        self.producer.init_transactions(TIMEOUT)

    def transaction(self, offsets: dict[int, int], value: bytes):
        """Begin a transaction with one record and the group's ``offsets``; left open."""
        self.producer.begin_transaction()
        self.producer.produce(self.topic, value, partition=0)
        self.producer.send_offsets_to_transaction(
            [_tp(self.topic, p, o) for p, o in offsets.items()],
            self.consumer.consumer_group_metadata(), TIMEOUT)

    def wait_committed(self, expected: dict[int, int], what: str) -> None:
        wait_until(lambda: self.committed() == expected, 60, what)

    def committed(self, stable: bool = True, timeout: float = TIMEOUT) -> dict[int, int]:
        consumer = self.consumer if stable else self.peek
        got = consumer.committed([_tp(self.topic, p) for p in range(self.partitions)], timeout=timeout)
        assert all(tp.error is None for tp in got), got
        return {tp.partition: tp.offset for tp in got if tp.offset >= 0}

    def waits_for_the_open_transaction(self) -> bool:
        """A read_committed consumer's committed() times out while the offsets are pending."""
        import confluent_kafka as ck
        try:
            self.committed(timeout=3)
        except ck.KafkaException as e:
            return e.args[0].code() == ck.KafkaError._TIMED_OUT
        return False

    def close(self) -> None:
        self.consumer.close()
        self.peek.close()
        self.producer.flush(TIMEOUT)


def producers_of(cluster, topic: str) -> list:
    """The active producers of ``topic``'s partition 0 (DescribeProducers on its leader)."""
    from odradek.client import AdminClient, TopicPartition
    tp = TopicPartition(topic, 0)
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        return admin.describe_producers([tp])[tp]


@pytest.fixture
def cluster(cluster_factory):
    return cluster_factory(brokers=3, overrides=OVERRIDES)


def test_send_offsets_commit_abort_and_coordinator_kill9(cluster):
    topic, group, partitions = "txn-src", f"txn-group-{uuid.uuid4().hex[:6]}", 2
    create_topic(cluster, topic, partitions)
    wait_for_coordinator(cluster, group)
    client = TxnClient(cluster.bootstrap_servers, group, topic, partitions)
    try:
        # open: the offsets are pending, not visible
        client.transaction({0: 10, 1: 11}, b"first")
        assert client.committed(stable=False) == {}
        assert client.waits_for_the_open_transaction()
        client.producer.commit_transaction(TIMEOUT)
        client.wait_committed({0: 10, 1: 11}, "the first transaction's offsets")

        # aborted: the previous offsets stay (partition 1 proves it after the next commit)
        client.transaction({0: 20, 1: 21}, b"aborted")
        client.producer.abort_transaction(TIMEOUT)
        assert client.committed() == {0: 10, 1: 11}

        client.transaction({0: 30}, b"third")
        assert client.committed(stable=False) == {0: 10, 1: 11}
        client.producer.commit_transaction(TIMEOUT)
        client.wait_committed({0: 30, 1: 11}, "the third transaction's offsets")

        # kill -9 the group coordinator: its successor loads the log and the markers
        old = find_coordinator(cluster, group)
        assert old is not None
        cluster.kill_broker(old)
        wait_until(lambda: (n := find_coordinator(cluster, group)) not in (None, old) and n, 90,
                   "a new group coordinator")
        wait_until(lambda: committed(cluster, group, topic, partitions) == {0: 30, 1: 11}, 90,
                   "the committed transactional offsets on the new coordinator")
        assert client.committed() == {0: 30, 1: 11}

        # and the transactional id keeps working against the new coordinators: a new producer
        # takes it over with the producer id the successor loaded, its epoch bumped
        (before,) = producers_of(cluster, topic)
        client.replace_producer()
        client.transaction({1: 40}, b"after-failover")
        client.producer.commit_transaction(TIMEOUT)
        client.wait_committed({0: 30, 1: 40}, "offsets committed after the failover")
        (after,) = producers_of(cluster, topic)
        assert (after.producer_id, after.producer_epoch) == (before.producer_id, before.producer_epoch + 1)
    finally:
        client.close()
