"""The client's half of a SASL exchange (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), sans-IO.

Invariant: a ``SaslClient`` yields the tokens to send, one per round, in order:
``first_token()``, then ``next_token(server_token)`` for each token the server answers with,
until ``next_token`` returns None (the exchange is over and, for SCRAM, the server proved it
knows the credential). ``exchange`` is the whole login as requests: a SaslHandshake v1, then a
SaslAuthenticate v1 per token; whoever owns the socket sends what it yields and sends back each
response, and a ``SaslClientError`` carries Kafka's error code of a refusal.
"""
from __future__ import annotations

from collections.abc import Generator
from types import ModuleType
from typing import Any

from .apis import sasl_authenticate, sasl_handshake
from .errors import ErrorCode
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import ScramClient, ScramError

MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)


class SaslClientError(Exception):
    """A refused login, or a server whose answer does not check out (a SCRAM server that cannot
    prove itself); ``code`` is the Kafka error code to report."""

    def __init__(self, message: str, code: int = ErrorCode.SASL_AUTHENTICATION_FAILED) -> None:
        super().__init__(message)
        self.code = code


def exchange(client: "SaslClient") -> Generator[tuple[ModuleType, int, dict[str, Any]], Any, None]:
    """The requests of one login, as (api, version, body); send each response back in."""
    resp = yield sasl_handshake, 1, {"mechanism": client.mechanism}
    if resp.error_code != ErrorCode.NONE:
        raise SaslClientError(f"the broker does not enable SASL mechanism {client.mechanism} "
                              f"(it offers {', '.join(resp.mechanisms)})", resp.error_code)
    token: bytes | None = client.first_token()
    while token is not None:
        resp = yield sasl_authenticate, 1, {"auth_bytes": token}
        if resp.error_code != ErrorCode.NONE:
            raise SaslClientError(resp.error_message or "SASL authentication failed", resp.error_code)
        token = client.next_token(bytes(resp.auth_bytes))


class SaslClient:
    """``token_auth``: a SCRAM login with a delegation token (username = token id, password = the
    base64 HMAC), announced by Kafka's ``tokenauth=true`` SCRAM extension."""

    def __init__(self, mechanism: str, username: str, password: str, token_auth: bool = False):
        if mechanism not in MECHANISMS:
            raise ValueError(f"unsupported SASL mechanism {mechanism!r} (supported: {', '.join(MECHANISMS)})")
        if token_auth and mechanism == "PLAIN":
            raise ValueError("a delegation token logs in with SCRAM-SHA-256 or SCRAM-SHA-512, not PLAIN")
        self.mechanism = mechanism
        self._username, self._password = username, password
        extensions = {"tokenauth": "true"} if token_auth else None
        self._scram = ScramClient(mechanism, username, password, extensions) if mechanism != "PLAIN" else None

    def first_token(self) -> bytes:
        if self._scram is None:
            return b"\x00" + self._username.encode("utf-8") + b"\x00" + self._password.encode("utf-8")
        return self._scram.first()

    def next_token(self, server_token: bytes) -> bytes | None:
        if self._scram is None or self._scram.complete:
            return None
        try:
            token = self._scram.step(server_token)
        except ScramError as e:
            raise SaslClientError(str(e)) from None
        return None if self._scram.complete else token
