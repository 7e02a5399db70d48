"""What the four delegation-token handlers share (Kafka 2.8's KafkaApis.allowTokenRequests and
the principal form of the token messages). Not a handler module (it is not in the registry).

Invariant: token requests are refused (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, 64) on a PLAINTEXT
listener, on an SSL connection without a client certificate and on any connection that logged in
with a delegation token, as in Kafka; any broker serves them (no controller involved).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable

from twisted.internet import defer

from odradek.protocol.delegation_token import parse_principal
from odradek.protocol.errors import ErrorCode

from ..security.principal import ANONYMOUS
from .context import BrokerContext, RequestContext

if TYPE_CHECKING:
    from ..security.delegation_tokens import DelegationTokenManager


def allow_token_requests(ctx: BrokerContext, rc: RequestContext) -> bool:
    protocol = ctx.config.security_protocol(rc.listener)
    return not (rc.token_authenticated or protocol == "PLAINTEXT"
                or (protocol == "SSL" and rc.principal == ANONYMOUS))


def principal_fields(principal: str) -> dict[str, Any]:
    """``{"principal_type", "principal_name"}`` of a ``Type:name`` principal."""
    kind, name = parse_principal(principal)
    return {"principal_type": kind, "principal_name": name}


def principal_of(entry: Any) -> str:
    """``Type:name`` of a request's principal_type/principal_name pair."""
    return f"{entry.principal_type}:{entry.principal_name}"


def expiry_body(code: ErrorCode, expiry: int) -> dict[str, Any]:
    """Renew's and Expire's answer (the same fields in both)."""
    return {"error_code": int(code), "expiry_timestamp_ms": expiry, "throttle_time_ms": 0}


def change_expiry(ctx: BrokerContext, rc: RequestContext,
                  change: Callable[[DelegationTokenManager], Awaitable[tuple[ErrorCode, int]]]
                  ) -> dict[str, Any] | defer.Deferred:
    """Renew or Expire: Kafka's two refusals that need no token, then ``change(tokens)``."""
    if not allow_token_requests(ctx, rc):
        return expiry_body(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
    tokens = ctx.tokens
    if tokens is None or not tokens.enabled:
        return expiry_body(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, -1)

    async def run() -> dict[str, Any]:
        return expiry_body(*await change(tokens))
    return defer.Deferred.fromCoroutine(run())
