"""DescribeProducers (61 v0) against a real log: the producer state of each replica, Kafka's errors."""
from __future__ import annotations

import pytest

from odradek.broker.apis import describe_producers, produce
from odradek.broker.security.authorizer import AclAuthorizer
from odradek.protocol.errors import ErrorCode

from broker_fixtures import Broker, batch, call, produce_body
from test_acl_handlers import allow, Op, RT


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    b.lead("t", 2)
    yield b
    b.close()


def ask(broker, topics: dict[str, list[int]]):
    return call(broker, describe_producers, 0, {"topics": [
        {"name": t, "partition_indexes": ps} for t, ps in topics.items()]})


def test_producers_of_a_partition(broker):
    assert call(broker, produce, 8, produce_body("t", batch(3, producer_id=7, producer_epoch=2, base_sequence=0,
                                                              timestamp=1000))).responses[0]
    call(broker, produce, 8, produce_body("t", batch(2, producer_id=7, producer_epoch=2, base_sequence=3,
                                                     timestamp=2000)))
    call(broker, produce, 8, produce_body("t", batch(1, producer_id=9, producer_epoch=0, base_sequence=0,
                                                     timestamp=3000)))
    call(broker, produce, 8, produce_body("t", batch(1)))   # not idempotent: no producer state
    resp = ask(broker, {"t": [0, 1]})
    p0, p1 = resp.topics[0].partitions
    assert (p0.partition_index, p0.error_code, p0.error_message) == (0, 0, None)
    got = sorted((s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp, s.coordinator_epoch,
                  s.current_txn_start_offset) for s in p0.active_producers)
    assert got == [(7, 2, 4, 2001, -1, -1), (9, 0, 0, 3000, -1, -1)]
    assert (p1.partition_index, p1.error_code, list(p1.active_producers)) == (1, 0, [])


def test_errors_as_kafka_answers_them(broker):
    broker.set_metadata({"t": {0: (1, [1], [1]), 1: (1, [1], [1])}, "other": {0: (2, [2], [2])}},
                        brokers=(1, 2))
    resp = ask(broker, {"t": [5], "other": [0], "nope": [0, 1]})
    t, other, nope = resp.topics
    assert t.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert other.partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert [(p.partition_index, p.error_code, p.error_message) for p in nope.partitions] == [
        (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."),
        (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")]


def test_needs_read_on_the_topic(broker):
    broker.ctx.authorizer = AclAuthorizer()
    p = ask(broker, {"t": [0]}).topics[0].partitions[0]
    assert (p.error_code, p.error_message) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
    broker.ctx.authorizer.apply(allow(Op.READ, RT.TOPIC, "t"))
    assert ask(broker, {"t": [0]}).topics[0].partitions[0].error_code == 0
