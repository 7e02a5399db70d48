"""DescribeLogDirs (key 35, v0-2): this broker's log dirs, and each asked partition's size there.

Invariant: as ReplicaManager.describeLogDirs in Kafka 2.8: one result per configured log dir (its
absolute path); an offline dir is KAFKA_STORAGE_ERROR with no topics; a partition's offset lag is
how far its log end is behind its high watermark (0 on a leader; odradek has no future replicas,
so is_future_key is always false). Without Describe on the Cluster the answer lists no dir.
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
    for log in sorted(lm.all_logs(), key=lambda lg: (lg.topic, lg.partition)):
        tp = (log.topic, log.partition)
        if asked is not None and tp not in asked:
            continue
        topics = by_dir.setdefault(lm.log_dir_of(tp) or "", {})
        topics.setdefault(log.topic, []).append({
            "partition_index": log.partition, "partition_size": log.size,
            "offset_lag": max(log.high_watermark - log.log_end_offset, 0), "is_future_key": False})
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
