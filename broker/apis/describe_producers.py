"""DescribeProducers (key 61, v0): the active producers of partitions (KIP-664), as Kafka 2.8's
KafkaApis.handleDescribeProducersRequest and ReplicaManager.activeProducerState answer it.

Invariant: read-only. A topic the principal may not Read is TOPIC_AUTHORIZATION_FAILED, one the
metadata cache does not know UNKNOWN_TOPIC_OR_PARTITION (both with Kafka's message, for every
partition asked); otherwise each partition is answered from the producer state of this broker's
replica of it (Kafka's ``log.activeProducers``: a follower answers its own copy, as Kafka 3.0's
``--broker-id`` relies on): producer id and epoch, the last sequence (-1 with no batch
remembered), the last timestamp, coordinator epoch and the open transaction's first offset (-1
with none). A known partition this broker holds no replica of is NOT_LEADER_OR_FOLLOWER, one of
an offline log dir KAFKA_STORAGE_ERROR, an unknown index UNKNOWN_TOPIC_OR_PARTITION.
"""
from __future__ import annotations

from odradek.protocol.apis import describe_producers as API
from odradek.protocol.errors import ErrorCode

from .authz import READ, TOPIC, authorize
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 0

# Kafka's Errors.<code>.message(), which ApiError carries for a topic-level refusal
MESSAGES = {ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition."}


def _error(index: int, code: ErrorCode, message: str | None = None) -> dict:
    return {"partition_index": index, "error_code": int(code), "error_message": message, "active_producers": []}


def partition_state(ctx: BrokerContext, topic: str, index: int) -> dict:
    rm = ctx.replica_manager
    p = rm.get_partition((topic, index))
    state = None if p is None or p.log is None else p.producer_state
    if state is not None:
        return {"partition_index": index, "error_code": 0, "error_message": None,
                "active_producers": state.active_producers()}
    if (topic, index) in rm.offline_partitions:
        return _error(index, ErrorCode.KAFKA_STORAGE_ERROR)
    if ctx.metadata_cache.partition_state(topic, index) is not None:
        return _error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    return _error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    topics = []
    for t in req.topics:
        code = None
        if not authorize(ctx, rc, READ, TOPIC, t.name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not ctx.metadata_cache.contains_topic(t.name):
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        topics.append({"name": t.name, "partitions": [
            _error(i, code, MESSAGES[code]) if code is not None else partition_state(ctx, t.name, i)
            for i in t.partition_indexes]})
    return {"throttle_time_ms": 0, "topics": topics}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [_error(i, code) for i in t.partition_indexes]} for t in req.topics]}
