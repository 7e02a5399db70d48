"""DescribeDelegationToken (key 41, v0-2): the tokens the requesting principal may see (KIP-48).

Invariant: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED for a connection that may not ask, then
DELEGATION_TOKEN_AUTH_DISABLED without a secret key, each with no tokens. Otherwise Kafka 2.8's
filter (``broker/security/delegation_tokens.py:filter_token``): null owners asks for every token,
a list for the tokens those principals own or renew; of those the requester sees the ones it owns
or renews, and the others only with Describe on the DelegationToken resource (every one when no
authorizer is configured, as in Kafka). Each token is answered with its HMAC and renewers.
"""
from __future__ import annotations

from typing import Any

from odradek.protocol.acl import ResourceType
from odradek.protocol.apis import describe_delegation_token as API
from odradek.protocol.errors import ErrorCode

from ..security.delegation_tokens import filter_token
from .authz import DESCRIBE, authorize
from .context import BrokerContext, RequestContext
from .token_common import allow_token_requests, principal_fields, principal_of

MIN_VERSION = 0
MAX_VERSION = 2


def _body(code: ErrorCode, tokens: list[Any]) -> dict[str, Any]:
    return {"error_code": int(code), "throttle_time_ms": 0, "tokens": [
        {**principal_fields(t.info.owner), "issue_timestamp": t.info.issue_timestamp,
         "expiry_timestamp": t.info.expiry_timestamp, "max_timestamp": t.info.max_timestamp,
         "token_id": t.info.token_id, "hmac": t.hmac,
         "renewers": [principal_fields(r) for r in t.info.renewers]} for t in tokens]}


def handle(ctx: BrokerContext, rc: RequestContext, req: Any) -> dict[str, Any]:
    if not allow_token_requests(ctx, rc):
        return _body(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [])
    tokens = ctx.tokens
    if tokens is None or not tokens.enabled:
        return _body(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, [])
    owners = None if req.owners is None else [principal_of(o) for o in req.owners]

    def authorized(token_id: str) -> bool:
        return authorize(ctx, rc, DESCRIBE, ResourceType.DELEGATION_TOKEN, token_id)
    return _body(ErrorCode.NONE, tokens.describe(lambda info: filter_token(rc.principal, owners, info, authorized)))


def error_response(req: Any, version: int, code: ErrorCode) -> dict[str, Any]:
    return _body(code, [])


__all__ = ["API", "MIN_VERSION", "MAX_VERSION", "handle", "error_response"]
