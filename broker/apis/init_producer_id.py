"""InitProducerId (key 22, v0-1): producer ids for idempotent (non-transactional) producers.

Invariant: ids come from blocks of 1000 reserved in /latest_producer_id_block
(allocated in a thread), epoch 0. Transactions are out of scope: a request with a
transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED (fatal for the
client, so it stops instead of retrying forever).
"""
from __future__ import annotations

import logging

from twisted.internet import defer

from odradek.protocol.apis import init_producer_id as API
from odradek.protocol.errors import ErrorCode

from .context import BrokerContext, RequestContext

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 1


def _response(code: ErrorCode | int, producer_id: int = -1, epoch: int = -1) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "producer_id": producer_id, "producer_epoch": epoch}


def handle(ctx: BrokerContext, rc: RequestContext, req):
    if req.transactional_id is not None:
        return _response(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if ctx.producer_ids is None:
        return _response(ErrorCode.COORDINATOR_NOT_AVAILABLE)

    async def run() -> dict:
        pid = await ctx.producer_ids.generate()
        return _response(ErrorCode.NONE, pid, 0)
    return defer.Deferred.fromCoroutine(run())


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response(code)
