"""DescribeLogDirs (key 35, v0-2): this broker's log dirs, and each asked partition's size there.

Invariant: as ReplicaManager.describeLogDirs in Kafka 2.8: one result per configured log dir (its
absolute path); an offline dir is KAFKA_STORAGE_ERROR with no topics; a partition's offset lag is
how far its log end is behind its high watermark (0 on a leader); a future replica (a move between
log dirs, AlterReplicaLogDirs) is listed in its dir with is_future_key true and an offset lag of
how far its log end is behind the current replica's. Without Describe on the Cluster the answer
lists no dir.
"""
from __future__ import annotations

from typing import Any

from odradek.protocol.apis import describe_log_dirs as API
from odradek.protocol.errors import ErrorCode

from .authz import CLUSTER, DESCRIBE, authorize
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    if not authorize(ctx, rc, DESCRIBE, CLUSTER):
        return {"throttle_time_ms": 0, "results": []}
    lm = ctx.log_manager
    asked = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partition_index}
    by_dir: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for log in sorted(lm.all_logs() + lm.future_logs(), key=lambda lg: (lg.topic, lg.partition, lg.is_future)):
        tp = (log.topic, log.partition)
        if asked is not None and tp not in asked:
            continue
        current = lm.get_log(tp)
        if log.is_future:
            d = lm.future_log_dir_of(tp)
            lag = current.log_end_offset - log.log_end_offset if current is not None else -1
        else:
            d = lm.log_dir_of(tp)
            lag = max(log.high_watermark - log.log_end_offset, 0)
        by_dir.setdefault(d or "", {}).setdefault(log.topic, []).append({
            "partition_index": log.partition, "partition_size": log.size,
            "offset_lag": lag, "is_future_key": log.is_future})
    results = []
    for d in lm.log_dirs:
        if not lm.is_log_dir_online(d):
            results.append({"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "log_dir": d, "topics": []})
            continue
        results.append({"error_code": 0, "log_dir": d, "topics": [
            {"name": t, "partitions": parts}
            for t, parts in sorted(by_dir.get(d, {}).items())]})
    return {"throttle_time_ms": 0, "results": results}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "results": []}
