"""OffsetFetch (key 9, v0-7): read a group's committed offsets.

Invariant: answered at once by the GroupCoordinator; unknown partitions get offset -1
and no error. v2+ may ask for every committed partition (``topics`` null) and carry
the group-level error in the top-level field; v0-1 have no such field, so the group
error (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS...) is copied into every requested
partition. v5+ return the committed leader epoch. v7's ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT for a partition with a transactional offset commit still pending
(KIP-447: a consumer that starts right after a transactional producer's commit waits for it).
With an authorizer: Describe on the group (else GROUP_AUTHORIZATION_FAILED); a requested topic
without Describe answers TOPIC_AUTHORIZATION_FAILED for its partitions, and "all committed"
leaves such topics out.
"""
from __future__ import annotations

from odradek.protocol.apis import offset_fetch as API
from odradek.protocol.errors import ErrorCode

from .authz import DESCRIBE, GROUP, TOPIC, authorize, denied
from .context import BrokerContext, RequestContext
from .group_common import coordinator

MIN_VERSION = 0
MAX_VERSION = 7


def _requested(req) -> list[tuple[str, int]] | None:
    if req.topics is None:
        return None
    return [(t.name, i) for t in req.topics for i in t.partition_indexes]


def _partition(index: int, offset: int = -1, epoch: int = -1, metadata: str | None = "",
               code: ErrorCode | int = ErrorCode.NONE) -> dict:
    return {"partition_index": index, "committed_offset": offset, "committed_leader_epoch": epoch,
            "metadata": metadata, "error_code": int(code)}


def _by_topic(entries: list[tuple[tuple[str, int], dict]]) -> list[dict]:
    topics: dict[str, list[dict]] = {}
    for (topic, _), part in entries:
        topics.setdefault(topic, []).append(part)
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    version = rc.api_version
    coord = coordinator(ctx)
    if coord is None:
        return error_response(req, version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not authorize(ctx, rc, DESCRIBE, GROUP, req.group_id):
        return error_response(req, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    requested = _requested(req)
    refused = denied(ctx, rc, DESCRIBE, TOPIC, (t.name for t in req.topics or ()))
    result = coord.handle_fetch_offsets(req.group_id, None if requested is None else
                                        [tp for tp in requested if tp[0] not in refused],
                                        require_stable=bool(getattr(req, "require_stable", False)))
    if result.error_code != ErrorCode.NONE:
        return error_response(req, version, result.error_code)
    if requested is None:
        hidden = denied(ctx, rc, DESCRIBE, TOPIC, {tp[0] for tp in result.offsets})
        tps = sorted(tp for tp in result.offsets if tp[0] not in hidden)
    else:
        tps = requested
    entries = []
    for tp in tps:
        if tp[0] in refused:
            entries.append((tp, _partition(tp[1], code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
            continue
        o = result.offsets.get(tp)
        part = (_partition(tp[1]) if o is None else
                _partition(tp[1], o.committed_offset, o.committed_leader_epoch, o.metadata, o.error_code))
        entries.append((tp, part))
    return {"throttle_time_ms": 0, "topics": _by_topic(entries), "error_code": 0}


def error_response(req, version: int, code: ErrorCode) -> dict:
    requested = _requested(req) or []
    per_partition = code if version <= 1 else ErrorCode.NONE
    entries = [(tp, _partition(tp[1], code=per_partition)) for tp in requested]
    return {"throttle_time_ms": 0, "topics": _by_topic(entries) if version <= 1 else [],
            "error_code": int(code)}
