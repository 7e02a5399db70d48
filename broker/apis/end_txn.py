"""EndTxn (key 26, v0-3): commit or abort the producer's transaction.

Invariant: the answer is the TransactionCoordinator's, given once PrepareCommit /
PrepareAbort is durable in the transaction log (markers and the Complete state follow
asynchronously); a retry after completion answers NONE for the same result and
INVALID_TXN_STATE for the other. PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for v0-1.
With an authorizer, Write on the TransactionalId is needed (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from odradek.protocol.apis import end_txn as API
from odradek.protocol.errors import ErrorCode

from .authz import TRANSACTIONAL_ID, WRITE, authorize
from .context import BrokerContext, RequestContext, to_deferred
from .txn_common import coordinator, fenced_for_version

MIN_VERSION = 0
MAX_VERSION = 3
PRODUCER_FENCED_VERSION = 2


def _response(code: ErrorCode | int) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code)}


def handle(ctx: BrokerContext, rc: RequestContext, req):
    if not authorize(ctx, rc, WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return _response(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    coord = coordinator(ctx)
    if coord is None:
        return _response(ErrorCode.COORDINATOR_NOT_AVAILABLE)

    def answer(code: ErrorCode) -> dict:
        return _response(fenced_for_version(code, rc.api_version, PRODUCER_FENCED_VERSION))
    return to_deferred(coord.handle_end_transaction(req.transactional_id, req.producer_id,
                                                    req.producer_epoch, bool(req.committed))
                       ).addCallback(answer)


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response(code)
