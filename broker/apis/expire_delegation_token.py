"""ExpireDelegationToken (key 40, v0-2): a new expiry for the token with this HMAC (KIP-48).

Invariant: Kafka 2.8's checks, in its order: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED for a connection
that may not ask, DELEGATION_TOKEN_AUTH_DISABLED without a secret key, DELEGATION_TOKEN_NOT_FOUND
for an unknown HMAC, DELEGATION_TOKEN_OWNER_MISMATCH for a principal neither owner nor renewer,
DELEGATION_TOKEN_EXPIRED for a token past its expiry; each answers expiry -1 and changes nothing.
Otherwise the new expiry (now + the period, at most the token's max timestamp; a negative period
removes the token at once (its answer's expiry is now)) is in ZooKeeper, and announced, before the
answer.
"""
from __future__ import annotations

from typing import Any

from twisted.internet import defer

from odradek.protocol.apis import expire_delegation_token as API
from odradek.protocol.errors import ErrorCode

from .context import BrokerContext, RequestContext
from .token_common import change_expiry, expiry_body

MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: BrokerContext, rc: RequestContext, req: Any) -> dict[str, Any] | defer.Deferred:
    return change_expiry(ctx, rc, lambda tokens: tokens.expire(rc.principal, bytes(req.hmac), req.expiry_time_period_ms))


def error_response(req: Any, version: int, code: ErrorCode) -> dict[str, Any]:
    return expiry_body(code, -1)


__all__ = ["API", "MIN_VERSION", "MAX_VERSION", "handle", "error_response"]
