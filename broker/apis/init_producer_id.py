"""InitProducerId (key 22, v0-4): producer ids for idempotent and transactional producers.

Invariant: the (producer_id, producer_epoch) pair of v3+ must be both -1 or both set
(else INVALID_REQUEST). Without a transactional id the answer is a fresh id from the
ProducerIdManager (blocks of 1000 reserved in /latest_producer_id_block) at epoch 0 —
also when v3+ names a producer id. With one, the TransactionCoordinator answers
(after the transaction log write); PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for
v0-3, which predate it (KafkaApis).
With an authorizer: Write on the TransactionalId (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), or
without one IdempotentWrite on the Cluster or Write on some topic (CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

import logging

from twisted.internet import defer

from odradek.broker.txn import InitProducerIdResult
from odradek.protocol.apis import init_producer_id as API
from odradek.protocol.errors import ErrorCode

from .authz import CLUSTER, IDEMPOTENT_WRITE, TOPIC, TRANSACTIONAL_ID, WRITE, authorize, authorize_any
from .context import BrokerContext, RequestContext, to_deferred
from .txn_common import coordinator, fenced_for_version

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 4
PRODUCER_FENCED_VERSION = 4


def _response(code: ErrorCode | int, producer_id: int = -1, epoch: int = -1) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "producer_id": producer_id, "producer_epoch": epoch}


def handle(ctx: BrokerContext, rc: RequestContext, req):
    version = rc.api_version
    pid = req.get("producer_id", -1) if version >= 3 else -1
    epoch = req.get("producer_epoch", -1) if version >= 3 else -1
    if (pid == -1) != (epoch == -1):
        return _response(ErrorCode.INVALID_REQUEST)
    if req.transactional_id is None:
        if not (authorize(ctx, rc, IDEMPOTENT_WRITE, CLUSTER) or authorize_any(ctx, rc, WRITE, TOPIC)):
            return _response(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        producer_ids = ctx.producer_ids
        if producer_ids is None:
            return _response(ErrorCode.COORDINATOR_NOT_AVAILABLE)

        async def run() -> dict:
            new_pid = await producer_ids.generate()
            return _response(ErrorCode.NONE, new_pid, 0)
        return defer.Deferred.fromCoroutine(run())
    if not authorize(ctx, rc, WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return _response(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    coord = coordinator(ctx)
    if coord is None:
        return _response(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    expected = None if pid == -1 else (pid, epoch)

    def answer(result: InitProducerIdResult) -> dict:
        code = fenced_for_version(result.error_code, version, PRODUCER_FENCED_VERSION)
        if code != ErrorCode.NONE:
            return _response(code)
        return _response(code, result.producer_id, result.producer_epoch)
    return to_deferred(coord.handle_init_producer_id(req.transactional_id, req.transaction_timeout_ms,
                                                     expected)).addCallback(answer)


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response(code)
