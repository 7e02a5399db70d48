"""The client's half of a SASL exchange (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), sans-IO.

Invariant: a ``SaslClient`` yields the tokens to send, one per round, in order:
``first_token()``, then ``next_token(server_token)`` for each token the server answers with,
until ``next_token`` returns None (the exchange is over and, for SCRAM, the server proved it
knows the credential). Whoever owns the socket wraps the tokens (SaslAuthenticate requests after
a SaslHandshake v1) and turns an error response into a failure; this module only makes and
checks tokens.
"""
from __future__ import annotations

from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import ScramClient, ScramError

MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)


class SaslClientError(Exception):
    """The server's answer does not check out (a SCRAM server that cannot prove itself)."""


class SaslClient:
    def __init__(self, mechanism: str, username: str, password: str):
        if mechanism not in MECHANISMS:
            raise ValueError(f"unsupported SASL mechanism {mechanism!r} (supported: {', '.join(MECHANISMS)})")
        self.mechanism = mechanism
        self._username, self._password = username, password
        self._scram = ScramClient(mechanism, username, password) if mechanism != "PLAIN" else None

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
