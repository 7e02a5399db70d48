"""OffsetDelete (key 47, v0): delete a group's committed offsets for some partitions (KIP-496).

Invariant: as KafkaApis.handleOffsetDeleteRequest: without Delete on the group the whole request
is GROUP_AUTHORIZATION_FAILED; a partition whose topic the principal may not Read is
TOPIC_AUTHORIZATION_FAILED, one the MetadataCache does not know UNKNOWN_TOPIC_OR_PARTITION,
and the rest go to the coordinator (``handle_delete_offsets``: GROUP_SUBSCRIBED_TO_TOPIC for
a topic a member still consumes). A group error (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, a
coordinator error) is top-level, with only the partitions refused before the coordinator listed.
"""
from __future__ import annotations

from odradek.protocol.apis import offset_delete as API
from odradek.protocol.errors import ErrorCode

from .authz import DELETE, GROUP, READ, TOPIC, authorize, denied
from .context import BrokerContext, RequestContext
from .group_common import coordinator

MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    if not authorize(ctx, rc, DELETE, GROUP, req.group_id):
        return error_response(req, rc.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coord = coordinator(ctx)
    if coord is None:
        return error_response(req, rc.api_version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    refused = denied(ctx, rc, READ, TOPIC, (t.name for t in req.topics))
    cache = ctx.metadata_cache
    errors: dict[tuple[str, int], ErrorCode] = {}
    asked: list[tuple[str, int]] = []
    for t in req.topics:
        known = cache.partitions(t.name) or {}
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if t.name in refused:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif tp[1] not in known:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                asked.append(tp)
    group_error, deleted = coord.handle_delete_offsets(req.group_id, asked)
    errors.update(deleted)
    topics: dict[str, list[dict]] = {}
    for (topic, partition), code in errors.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": int(code)})
    return {"error_code": int(group_error), "throttle_time_ms": 0,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"error_code": int(code), "throttle_time_ms": 0, "topics": []}
