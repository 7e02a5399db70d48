"""OffsetCommit (key 8, v0-8): store a group's consumed offsets.

Invariant: partitions of topics the MetadataCache does not know get
UNKNOWN_TOPIC_OR_PARTITION and are not stored (Kafka's KafkaApis check); the others go
to the GroupCoordinator, which answers after the append to ``__consumer_offsets``
(acks=-1) completed. Per version: v0 has no generation/member (a "simple" commit,
generation -1), v1 a per-partition commit timestamp, v2-4 a retention time, v6+ the
committed leader epoch, v7 the group.instance.id. The response lists the partitions in
request order.
With an authorizer: Read on the group (else GROUP_AUTHORIZATION_FAILED everywhere) and on each
topic (else TOPIC_AUTHORIZATION_FAILED for its partitions, not stored).
"""
from __future__ import annotations

from odradek.broker.group import CommitOffset
from odradek.protocol.apis import offset_commit as API
from odradek.protocol.errors import ErrorCode

from .authz import GROUP, READ, TOPIC, authorize, denied
from .context import BrokerContext, RequestContext, respond_when
from .group_common import coordinator

MIN_VERSION = 0
MAX_VERSION = 8


def handle(ctx: BrokerContext, rc: RequestContext, req):
    # Fields are read as items, once each: a decoded request is a dict, and its attribute access
    # (a failed lookup first) cost more than the rest of this handler (issue 17).
    version = rc.api_version
    group_id = req["group_id"]
    coord = coordinator(ctx)
    if coord is None:
        return error_response(req, version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not authorize(ctx, rc, READ, GROUP, group_id):
        return error_response(req, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics = req["topics"]
    refused = denied(ctx, rc, READ, TOPIC, (t["name"] for t in topics))
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], CommitOffset] = {}
    cache = ctx.metadata_cache
    epochs = version >= 6
    for t in topics:
        name = t["name"]
        known = cache.partitions(name)
        for p in t["partitions"]:
            index = p["partition_index"]
            if name in refused:
                errors[(name, index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif known is None or index not in known:
                errors[(name, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:   # (offset, metadata, leader epoch, commit timestamp)
                offsets[(name, index)] = CommitOffset(
                    p["committed_offset"], p["committed_metadata"], p["committed_leader_epoch"] if epochs else -1,
                    p["commit_timestamp"] if version == 1 else -1)
    if not offsets:
        return _response(topics, errors)
    stored = coord.handle_commit_offsets(
        group_id, req["member_id"] if version >= 1 else "", req["group_instance_id"] if version >= 7 else None,
        req["generation_id"] if version >= 1 else -1, offsets, req["retention_time_ms"] if 2 <= version <= 4 else -1)
    # answered at once when the append is already acknowledged (the offsets topic's ISR is this
    # broker alone), else when it is
    return respond_when(stored, lambda result: _response(topics, {**errors, **result} if errors else result))


def _response(topics: list, errors: dict[tuple[str, int], ErrorCode]) -> dict:
    """The answer to each partition of ``topics`` (the request's), in their order."""
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": int(errors[(t["name"], p["partition_index"])])}
            for p in t["partitions"]]} for t in topics]}


def error_response(req, version: int, code: ErrorCode) -> dict:
    topics = req["topics"]
    return _response(topics, {(t["name"], p["partition_index"]): code for t in topics for p in t["partitions"]})
