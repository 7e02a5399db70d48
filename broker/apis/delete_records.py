"""DeleteRecords (key 21, v0-2): move partitions' log start offsets forward (KIP-107).

Invariant: as KafkaApis.handleDeleteRecordsRequest with ReplicaManager.deleteRecords: a partition
of a topic the principal may not Delete is TOPIC_AUTHORIZATION_FAILED, one the MetadataCache does
not know UNKNOWN_TOPIC_OR_PARTITION; the rest go to the replica manager, which refuses a broker
that does not lead the partition (NOT_LEADER_OR_FOLLOWER), a topic without ``delete`` in its
cleanup.policy (POLICY_VIOLATION) and an offset below 0 or above the high watermark
(OFFSET_OUT_OF_RANGE; -1 means the high watermark), else moves the log start at once and answers
when every live replica's log starts there too (its low watermark), or REQUEST_TIMED_OUT after
``timeout_ms``. Records below the new log start are no longer readable; their segments go at the
next retention check. A rejected partition changes nothing.
"""
from __future__ import annotations

from odradek.protocol.apis import delete_records as API
from odradek.protocol.errors import ErrorCode

from ..replication.delete_records import delete_records as delete_on_leaders
from .authz import DELETE, TOPIC, authorize
from .context import BrokerContext, RequestContext, respond_when

MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: BrokerContext, rc: RequestContext, req):
    cache = ctx.metadata_cache
    early: dict[tuple[str, int], dict] = {}
    offsets: dict[tuple[str, int], int] = {}
    order: list[tuple[str, list[int]]] = []
    for t in req.topics:
        allowed = authorize(ctx, rc, DELETE, TOPIC, t.name)
        known = cache.partitions(t.name) or {}
        indexes: list[int] = []
        order.append((t.name, indexes))
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            indexes.append(p.partition_index)
            if not allowed:
                early[tp] = _error(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif tp[1] not in known:
                early[tp] = _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                offsets[tp] = p.offset

    def build(results: dict) -> dict:
        results = {**early, **results}
        return {"throttle_time_ms": 0, "topics": [
            {"name": topic, "partitions": [dict(results[(topic, i)], partition_index=i) for i in dict.fromkeys(indexes)]}
            for topic, indexes in order]}
    if not offsets:
        return build({})
    return respond_when(delete_on_leaders(ctx.replica_manager, req.timeout_ms, offsets), build)


def _error(code: ErrorCode) -> dict:
    return {"low_watermark": -1, "error_code": int(code)}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [dict(_error(code), partition_index=p.partition_index) for p in t.partitions]}
        for t in req.topics]}
