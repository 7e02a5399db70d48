"""The AdminClient's delegation-token calls: CreateDelegationToken (38), RenewDelegationToken (39),
ExpireDelegationToken (40), DescribeDelegationToken (41), as Kafka's KafkaAdminClient makes them.

Invariant: each call goes to one broker (any broker serves tokens: they all write the same
ZooKeeper and read their own cache), tried in turn while connections fail, until the request
timeout; a refusal raises a ``KafkaError`` with the broker's code (DELEGATION_TOKEN_AUTH_DISABLED,
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, DELEGATION_TOKEN_NOT_FOUND ...). Tokens come back as
``odradek.protocol.delegation_token.DelegationToken`` values; principals are ``Type:name``.
"""
from __future__ import annotations

from typing import Any, Iterable

from odradek.protocol.apis import create_delegation_token as _create
from odradek.protocol.apis import describe_delegation_token as _describe
from odradek.protocol.apis import expire_delegation_token as _expire
from odradek.protocol.apis import renew_delegation_token as _renew
from odradek.protocol.delegation_token import DelegationToken, TokenInformation, parse_principal
from odradek.protocol.errors import ErrorCode, KafkaError


def _principals(principals: Iterable[str]) -> list[dict[str, str]]:
    out = []
    for p in principals:
        try:
            kind, name = parse_principal(p.strip())
        except ValueError as exc:
            raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        out.append({"principal_type": kind, "principal_name": name})
    return out


# Kafka's messages for the errors the token APIs answer (Errors.java)
MESSAGES = {
    ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED: "Delegation Token feature is not enabled.",
    ErrorCode.DELEGATION_TOKEN_NOT_FOUND: "Delegation Token is not found on server.",
    ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH: "Specified Principal is not valid Owner/Renewer.",
    ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: "Delegation Token requests are not allowed on PLAINTEXT/1-way "
                                                    "SSL channels and on delegation token authenticated channels.",
    ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED: "Delegation Token authorization failed.",
    ErrorCode.DELEGATION_TOKEN_EXPIRED: "Delegation Token is expired.",
    ErrorCode.INVALID_PRINCIPAL_TYPE: "Request principal type is not supported.",
}


def _checked(resp: Any, what: str) -> Any:
    if resp.error_code != ErrorCode.NONE:
        code = ErrorCode(resp.error_code)
        raise KafkaError(code, MESSAGES.get(code, what))
    return resp


class TokenAdmin:
    def __init__(self, cluster: Any, pool: Any, timeout_s: float, backoff_s: float) -> None:
        self.cluster, self.pool = cluster, pool
        self.timeout_s, self.backoff_s = timeout_s, backoff_s

    def _call(self, api: Any, body: dict[str, Any]) -> Any:
        resp = self.pool.call(api, body, lambda: sorted(self.cluster.brokers), self.timeout_s, self.backoff_s)
        return _checked(resp, api.NAME)

    def create(self, renewers: Iterable[str] = (), max_lifetime_ms: int = -1) -> DelegationToken:
        r = self._call(_create, {"renewers": _principals(renewers), "max_lifetime_ms": max_lifetime_ms})
        info = TokenInformation(r.token_id, f"{r.principal_type}:{r.principal_name}", tuple(renewers),
                                r.issue_timestamp_ms, r.max_timestamp_ms, r.expiry_timestamp_ms)
        return DelegationToken(info, bytes(r.hmac))

    def renew(self, hmac: bytes, renew_time_period_ms: int = -1) -> int:
        return self._call(_renew, {"hmac": hmac, "renew_period_ms": renew_time_period_ms}).expiry_timestamp_ms

    def expire(self, hmac: bytes, expiry_time_period_ms: int = -1) -> int:
        return self._call(_expire, {"hmac": hmac, "expiry_time_period_ms": expiry_time_period_ms}
                          ).expiry_timestamp_ms

    def describe(self, owners: Iterable[str] | None = None) -> list[DelegationToken]:
        r = self._call(_describe, {"owners": None if owners is None else _principals(owners)})
        return [DelegationToken(TokenInformation(
            t.token_id, f"{t.principal_type}:{t.principal_name}",
            tuple(f"{p.principal_type}:{p.principal_name}" for p in t.renewers),
            t.issue_timestamp, t.max_timestamp, t.expiry_timestamp), bytes(t.hmac)) for t in r.tokens]
