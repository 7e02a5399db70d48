"""TxnOffsetCommit (key 28, v0-3): a transactional producer's consumed offsets.

Invariant: partitions of topics the MetadataCache does not know get
UNKNOWN_TOPIC_OR_PARTITION and are not stored (Kafka's KafkaApis check); the others go
to the GroupCoordinator, which answers after the transactional batch was appended to
``__consumer_offsets`` (acks=-1); the offsets become visible only once the
transaction commits. Per version: v2+ carry the committed leader epoch, v3 the
generation, member id and group.instance.id (checked only when set). v0-1 clients
predate COORDINATOR_LOAD_IN_PROGRESS here, so they get COORDINATOR_NOT_AVAILABLE
instead. The response lists the partitions in request order.
With an authorizer: Write on the TransactionalId (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
Read on the group (else GROUP_AUTHORIZATION_FAILED) and on each topic (else
TOPIC_AUTHORIZATION_FAILED for its partitions).
"""
from __future__ import annotations

from twisted.internet import defer

from odradek.broker.group import CommitOffset
from odradek.protocol.apis import txn_offset_commit as API
from odradek.protocol.errors import ErrorCode

from .authz import GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE, authorize, denied
from .context import BrokerContext, RequestContext, to_deferred
from .group_common import coordinator

MIN_VERSION = 0
MAX_VERSION = 3


def handle(ctx: BrokerContext, rc: RequestContext, req):
    return defer.Deferred.fromCoroutine(_handle(ctx, rc, req))


def _order(req) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in req.topics]


def _response(version: int, order: list[tuple[str, list[int]]],
              errors: dict[tuple[str, int], ErrorCode]) -> dict:
    def code(error: ErrorCode) -> int:
        if version < 2 and error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return int(error)

    return {"throttle_time_ms": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": i, "error_code": code(errors[(name, i)])}
                                      for i in indexes]} for name, indexes in order]}


async def _handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    version = rc.api_version
    order = _order(req)
    coord = coordinator(ctx)
    if coord is None:
        return error_response(req, version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not authorize(ctx, rc, WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return error_response(req, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authorize(ctx, rc, READ, GROUP, req.group_id):
        return error_response(req, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    refused = denied(ctx, rc, READ, TOPIC, (t.name for t in req.topics))
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], CommitOffset] = {}
    cache = ctx.metadata_cache
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if t.name in refused:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if cache.partition_state(*tp) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = CommitOffset(
                offset=p.committed_offset, metadata=p.committed_metadata,
                leader_epoch=p.committed_leader_epoch if version >= 2 else -1)
    if offsets:
        stored = await to_deferred(coord.handle_txn_commit_offsets(
            req.group_id, req.producer_id, req.producer_epoch,
            req.member_id if version >= 3 else "",
            req.group_instance_id if version >= 3 else None,
            req.generation_id if version >= 3 else -1, offsets))
        errors.update(stored)
    return _response(version, order, errors)


def error_response(req, version: int, code: ErrorCode) -> dict:
    order = _order(req)
    return _response(version, order, {(name, i): code for name, indexes in order for i in indexes})
