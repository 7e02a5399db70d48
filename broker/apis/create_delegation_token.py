"""CreateDelegationToken (key 38, v0-2): a token owned by the requesting principal (KIP-48).

Invariant: Kafka 2.8's checks, in its order: a connection that may not ask
(``token_common.allow_token_requests``) gets DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, a renewer that
is not a ``User`` principal INVALID_PRINCIPAL_TYPE, a broker without a secret key
DELEGATION_TOKEN_AUTH_DISABLED; none of these writes anything. Otherwise the token is in
ZooKeeper (and announced) before the answer, which carries the owner, the three timestamps, the
token id and the HMAC. Every answer names the requesting principal as owner.
"""
from __future__ import annotations

from typing import Any

from twisted.internet import defer

from odradek.protocol.apis import create_delegation_token as API
from odradek.protocol.delegation_token import USER_TYPE
from odradek.protocol.errors import ErrorCode

from .context import BrokerContext, RequestContext
from .token_common import allow_token_requests, principal_fields, principal_of

MIN_VERSION = 0
MAX_VERSION = 2


def _body(code: ErrorCode, owner: str | None, token: Any = None) -> dict[str, Any]:
    info = token.info if token is not None else None
    return {"error_code": int(code),
            **(principal_fields(owner) if owner else {"principal_type": "", "principal_name": ""}),
            "issue_timestamp_ms": info.issue_timestamp if info else -1,
            "expiry_timestamp_ms": info.expiry_timestamp if info else -1,
            "max_timestamp_ms": info.max_timestamp if info else -1,
            "token_id": info.token_id if info else "", "hmac": token.hmac if token is not None else b"",
            "throttle_time_ms": 0}


def handle(ctx: BrokerContext, rc: RequestContext, req: Any) -> dict[str, Any] | defer.Deferred:
    owner = rc.principal
    if not allow_token_requests(ctx, rc):
        return _body(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner)
    if any(r.principal_type != USER_TYPE for r in req.renewers):
        return _body(ErrorCode.INVALID_PRINCIPAL_TYPE, owner)
    tokens = ctx.tokens
    if tokens is None or not tokens.enabled:
        return _body(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, owner)

    async def create() -> dict[str, Any]:
        code, token = await tokens.create(owner, [principal_of(r) for r in req.renewers], req.max_lifetime_ms)
        return _body(code, owner, token)
    return defer.Deferred.fromCoroutine(create())


def error_response(req: Any, version: int, code: ErrorCode) -> dict[str, Any]:
    return _body(code, None)


__all__ = ["API", "MIN_VERSION", "MAX_VERSION", "handle", "error_response"]
