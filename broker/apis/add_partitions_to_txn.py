"""AddPartitionsToTxn (key 24, v0-3): add partitions to the producer's transaction.

Invariant: if any partition is unknown to the MetadataCache, nothing is added: those get
UNKNOWN_TOPIC_OR_PARTITION and the rest OPERATION_NOT_ATTEMPTED (KafkaApis). Otherwise
every partition gets the TransactionCoordinator's one answer, given after the
transaction log write; PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for v0-1.
With an authorizer: Write on the TransactionalId (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
everywhere) and on each topic (else TOPIC_AUTHORIZATION_FAILED there, the rest
OPERATION_NOT_ATTEMPTED, nothing added).
"""
from __future__ import annotations

from odradek.protocol.apis import add_partitions_to_txn as API
from odradek.protocol.errors import ErrorCode

from .authz import TOPIC, TRANSACTIONAL_ID, WRITE, authorize, denied
from .context import BrokerContext, RequestContext, to_deferred
from .txn_common import coordinator, fenced_for_version

MIN_VERSION = 0
MAX_VERSION = 3
PRODUCER_FENCED_VERSION = 2


def _partitions(req) -> list[tuple[str, int]]:
    return [(t.name, p) for t in req.topics for p in t.partitions]


def _response(errors: dict[tuple[str, int], ErrorCode], order: list[tuple[str, int]]) -> dict:
    topics: dict[str, list[dict]] = {}
    for tp in order:
        topics.setdefault(tp[0], []).append({"partition_index": tp[1], "error_code": int(errors[tp])})
    return {"throttle_time_ms": 0, "results": [{"name": t, "results": rs} for t, rs in topics.items()]}


def handle(ctx: BrokerContext, rc: RequestContext, req):
    order = _partitions(req)
    coord = coordinator(ctx)
    if coord is None:
        return error_response(req, rc.api_version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not authorize(ctx, rc, WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return error_response(req, rc.api_version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    refused = denied(ctx, rc, WRITE, TOPIC, (t.name for t in req.topics))
    cache = ctx.metadata_cache
    failed = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in order if tp[0] in refused}
    failed.update({tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in order
                   if tp not in failed and cache.partition_state(*tp) is None})
    if failed:
        return _response({tp: failed.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in order}, order)

    def answer(code: ErrorCode) -> dict:
        code = fenced_for_version(code, rc.api_version, PRODUCER_FENCED_VERSION)
        return _response({tp: code for tp in order}, order)
    return to_deferred(coord.handle_add_partitions(req.transactional_id, req.producer_id,
                                                   req.producer_epoch, order)).addCallback(answer)


def error_response(req, version: int, code: ErrorCode) -> dict:
    order = _partitions(req)
    return _response({tp: code for tp in order}, order)
