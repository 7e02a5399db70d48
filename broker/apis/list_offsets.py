"""ListOffsets (key 2, v0-6): earliest (-2), latest (-1) or by-timestamp offsets.

Invariant: answered only by the partition leader (except for the debugging
replica id -2); "latest" is the HW for read_uncommitted consumers, the last stable
offset for read_committed ones (isolation_level 1, v2+) and the LEO for replicas; a timestamp lookup never returns an offset at or beyond
what the caller may fetch (then offset and timestamp are -1). v0 answers in
old_style_offsets (one offset); v2+ rejects a partition listed twice. With an authorizer, a
topic without Describe answers TOPIC_AUTHORIZATION_FAILED for its partitions.
"""
from __future__ import annotations

from odradek.protocol.apis import list_offsets as API
from odradek.protocol.errors import ErrorCode, KafkaError

from ..replication.partition import epoch_cache_of
from .authz import DESCRIBE, TOPIC, denied
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 6

LATEST = -1
EARLIEST = -2
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    version = rc.api_version
    seen: set[tuple[str, int]] = set()
    dups: set[tuple[str, int]] = set()
    if version >= 2:
        for t in req.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                (dups if tp in seen else seen).add(tp)
    refused = denied(ctx, rc, DESCRIBE, TOPIC, (t.name for t in req.topics))
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if t.name in refused:
                parts.append(_error(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if tp in dups:
                parts.append(_error(p.partition_index, ErrorCode.INVALID_REQUEST))
                continue
            try:
                offset, timestamp, epoch = _lookup(ctx, req, tp, p)
            except KafkaError as e:
                parts.append(_error(p.partition_index, e.code))
                continue
            entry = {"partition_index": p.partition_index, "error_code": 0, "timestamp": timestamp,
                     "offset": offset, "leader_epoch": epoch}
            if version == 0:
                entry["old_style_offsets"] = [offset] if offset >= 0 and p.max_num_offsets > 0 else []
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


def _lookup(ctx: BrokerContext, req, tp: tuple[str, int], p) -> tuple[int, int, int]:
    rm = ctx.replica_manager
    if req.replica_id == DEBUGGING_REPLICA_ID:
        part = rm.get_partition(tp)
        if part is None or part.log is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    else:
        part = rm.leader_partition(tp)
    part.check_leader_epoch(p.current_leader_epoch)
    log_ = part.log
    if req.replica_id != CONSUMER_REPLICA_ID:
        fetchable = log_.log_end_offset
    elif getattr(req, "isolation_level", 0) == 1:
        fetchable = part.last_stable_offset
    else:
        fetchable = part.high_watermark
    cache = epoch_cache_of(log_)
    if p.timestamp == LATEST:
        return fetchable, -1, part.leader_epoch
    if p.timestamp == EARLIEST:
        start = log_.log_start_offset
        return start, -1, cache.epoch_for_offset(start) if cache is not None else -1
    found = log_.fetch_offset_by_timestamp(p.timestamp)
    if found is None or found[0] >= fetchable:
        return -1, -1, -1
    offset, timestamp = found[0], found[1]
    epoch = found[2] if len(found) > 2 else (cache.epoch_for_offset(offset) if cache is not None else -1)
    return offset, timestamp, epoch


def _error(index: int, code: ErrorCode) -> dict:
    return {"partition_index": index, "error_code": int(code), "old_style_offsets": [],
            "timestamp": -1, "offset": -1, "leader_epoch": -1}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [_error(p.partition_index, code) for p in t.partitions]}
        for t in req.topics]}
