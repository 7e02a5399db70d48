"""OffsetForLeaderEpoch (key 23, v0-4): end offset of a leader epoch, for truncation.

Invariant: answered by the partition leader from its log's leader-epoch cache:
the largest epoch ≤ the requested one and its end offset (the next epoch's start,
or the LEO for the current epoch); current_leader_epoch (v2+) fences stale callers.
The debugging replica id (-2) may ask a follower. With an authorizer, ClusterAction on the
Cluster (brokers) or else Describe on the topic (consumers, KIP-320) is needed:
TOPIC_AUTHORIZATION_FAILED for its partitions otherwise.
"""
from __future__ import annotations

from odradek.protocol.apis import offset_for_leader_epoch as API
from odradek.protocol.errors import ErrorCode, KafkaError

from .authz import CLUSTER, CLUSTER_ACTION, DESCRIBE, TOPIC, authorize, denied
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 4

DEBUGGING_REPLICA_ID = -2


def _error(partition: int, code: ErrorCode) -> dict:
    return {"error_code": int(code), "partition": partition, "leader_epoch": -1, "end_offset": -1}


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    rm = ctx.replica_manager
    replica_id = req.replica_id if rc.api_version >= 3 else DEBUGGING_REPLICA_ID
    refused = set() if authorize(ctx, rc, CLUSTER_ACTION, CLUSTER) else \
        denied(ctx, rc, DESCRIBE, TOPIC, (t.topic for t in req.topics))
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            tp = (t.topic, p.partition)
            if t.topic in refused:
                parts.append(_error(p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            try:
                if replica_id == DEBUGGING_REPLICA_ID and rc.api_version >= 3:
                    part = rm.get_partition(tp)
                    if part is None or part.log is None:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    part = rm.leader_partition(tp)
                part.check_leader_epoch(p.current_leader_epoch)
                epoch, end = part.last_offset_for_leader_epoch(p.leader_epoch)
                parts.append({"error_code": 0, "partition": p.partition, "leader_epoch": epoch, "end_offset": end})
            except KafkaError as e:
                parts.append(_error(p.partition, e.code))
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"topic": t.topic, "partitions": [_error(p.partition, code) for p in t.partitions]} for t in req.topics]}
