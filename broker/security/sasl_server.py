"""SASL authentication of one connection on a SASL_PLAINTEXT or SASL_SSL listener (Kafka's
SaslServerAuthenticator): SaslHandshake, then the mechanism's tokens, then requests.

Invariant: until ``complete``, a connection is served ApiVersions, one SaslHandshake and the
mechanism's tokens — in SaslAuthenticate requests after a v1 handshake, as bare size-prefixed
frames after a v0 one — and nothing else: any other request, a second handshake, a token over
``MAX_TOKEN_BYTES`` or a failed exchange ends the connection (after the error response, when
the protocol has one: UNSUPPORTED_SASL_MECHANISM 33, ILLEGAL_SASL_STATE 34,
SASL_AUTHENTICATION_FAILED 58). ``principal`` is set only by a successful exchange: the user, or
for a SCRAM login with ``tokenauth=true`` the delegation token's owner (``token_authenticated``).
Passwords never reach a log line.
"""
from __future__ import annotations

import hmac
import logging
from typing import Any, Callable

from twisted.internet import defer

from odradek.protocol.apis import sasl_authenticate, sasl_handshake
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.header import decode_request_header, encode_response
from odradek.protocol.scram import ScramCredential, ScramError, ScramServer, parse_client_first

from .principal import user

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
MAX_TOKEN_BYTES = 524288   # Kafka's sasl.server.max.receive.size

CredentialLookup = Callable[[str, str], "defer.Deferred[ScramCredential | None]"]
# (mechanism, token id) -> (the token's credential, its owner principal), None for no such live token
TokenLookup = Callable[[str, str], "tuple[ScramCredential, str] | None"]


class SaslFailure(Exception):
    """The exchange failed: the message is what the client is told."""


class PlainServer:
    """SASL/PLAIN (RFC 4616): one token ``authzid NUL user NUL password``, checked against the
    listener's JAAS ``user_<name>="<password>"`` options."""

    def __init__(self, users: dict[str, str]):
        self.users = users
        self.username: str | None = None
        self.complete = False

    def step(self, token: bytes) -> defer.Deferred:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, name, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        if not name or not password:
            raise SaslFailure("Authentication failed: username or password not specified")
        if authzid and authzid != name:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is "
                              "different from username")
        expected = self.users.get(name)
        if expected is None or not hmac.compare_digest(expected.encode("utf-8"), password.encode("utf-8")):
            raise SaslFailure("Authentication failed: Invalid username or password")
        self.username, self.complete = name, True
        return defer.succeed(b"")


class ScramMechanismServer:
    """SCRAM-SHA-256/512 with the user's credential read from ZooKeeper for each login, or, when
    the client-first message carries ``tokenauth=true``, a delegation token's from the token
    cache (the token id as user name; the principal is then the token's owner)."""

    def __init__(self, mechanism: str, lookup: CredentialLookup, token_lookup: TokenLookup | None = None):
        self.mechanism = mechanism
        self.lookup = lookup
        self.token_lookup = token_lookup
        self.server: ScramServer | None = None
        self.token_owner: str | None = None     # set for a token login

    @property
    def complete(self) -> bool:
        return self.server is not None and self.server.complete

    @property
    def username(self) -> str | None:
        return self.server.username if self.server is not None else None

    def step(self, token: bytes) -> defer.Deferred:
        if self.server is not None:
            return defer.succeed(self._step(self.server, token))
        try:
            client_first = parse_client_first(token)
        except ScramError as e:
            raise SaslFailure(f"Authentication failed: {e}") from None
        name = client_first.username
        d: defer.Deferred[ScramCredential | None]
        if client_first.token_auth:
            found = self.token_lookup(self.mechanism, name) if self.token_lookup is not None else None
            if found is None:
                raise SaslFailure(f"Authentication failed during authentication due to invalid credentials with "
                                  f"SASL mechanism {self.mechanism}: Token Authentication failed: Invalid tokenId : {name}")
            self.token_owner = found[1]
            d = defer.succeed(found[0])
        else:
            d = self.lookup(self.mechanism, name)

        def first(credential: ScramCredential | None) -> bytes:
            self.server = ScramServer(self.mechanism, lambda _name: credential)
            return self._step(self.server, token)
        return d.addCallback(first)

    @staticmethod
    def _step(server: ScramServer, token: bytes) -> bytes:
        try:
            return server.step(token)
        except ScramError as e:
            message = str(e)
            raise SaslFailure(message if message.startswith("Authentication failed")
                              else f"Authentication failed during authentication due to invalid "
                                   f"credentials with SASL mechanism {server.mechanism}: {message}") from None


class SaslAuthenticator:
    """One connection's SASL state: ``receive(frame)`` before ``complete`` instead of the
    request handler. ``passthrough(frame)`` serves ApiVersions."""

    def __init__(self, mechanisms: list[str], plain_users: dict[str, str], lookup: CredentialLookup,
                 passthrough: Callable[[bytes], Any], token_lookup: TokenLookup | None = None):
        self.mechanisms = mechanisms
        self.plain_users = plain_users
        self.lookup = lookup
        self.token_lookup = token_lookup
        self.passthrough = passthrough
        self.token_authenticated = False   # the principal logged in with a delegation token
        self.state = "handshake"          # -> authenticate | raw -> complete | failed
        self.mechanism: Any = None
        self.principal: str | None = None
        self.failed: str | None = None     # why, once the connection must close

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    def receive(self, frame: bytes) -> Any:
        """The response (bytes, a Deferred of bytes, or a passthrough's result) to one frame;
        raises SaslFailure when the connection must close without one."""
        if len(frame) > MAX_TOKEN_BYTES:
            raise SaslFailure(f"SASL frame of {len(frame)} bytes exceeds {MAX_TOKEN_BYTES}")
        if self.state == "raw":
            return self._token(frame, None)
        try:
            header, offset = decode_request_header(frame)
        except KafkaError:
            raise SaslFailure("invalid request header during SASL authentication") from None
        key, version = header.api_key, header.api_version
        if key == API_VERSIONS_KEY and self.state == "handshake":
            return self.passthrough(frame)
        if key == sasl_handshake.API_KEY and self.state == "handshake" \
                and version <= sasl_handshake.MAX_VERSION:
            req = sasl_handshake.Request.decode(memoryview(frame)[offset:], version)
            return encode_response(sasl_handshake, version, header.correlation_id,
                                   self._handshake(req.mechanism, version))
        if key == sasl_authenticate.API_KEY and self.state == "authenticate" \
                and version <= sasl_authenticate.MAX_VERSION:
            req = sasl_authenticate.Request.decode(memoryview(frame)[offset:], version)
            return self._token(bytes(req.auth_bytes), (version, header.correlation_id))
        raise SaslFailure(f"unexpected request (API key {key} v{version}) during SASL authentication")

    def _handshake(self, mechanism: str, version: int) -> dict:
        if mechanism not in self.mechanisms:
            self.failed = f"unsupported SASL mechanism {mechanism}"
            self.state = "failed"
            return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": self.mechanisms}
        if mechanism == "PLAIN":
            self.mechanism = PlainServer(self.plain_users)
        else:
            self.mechanism = ScramMechanismServer(mechanism, self.lookup, self.token_lookup)
        self.state = "authenticate" if version >= 1 else "raw"
        return {"error_code": ErrorCode.NONE, "mechanisms": self.mechanisms}

    def _token(self, token: bytes, wrapped: tuple[int, int] | None) -> Any:
        try:
            d = self.mechanism.step(token)
        except SaslFailure as e:
            return self._failed(str(e), wrapped)
        d.addCallbacks(lambda out: self._answered(out, wrapped),
                       lambda f: self._failed(str(f.value) if f.check(SaslFailure)
                                              else "Authentication failed", wrapped, f))
        return d

    def _answered(self, out: bytes, wrapped: tuple[int, int] | None) -> bytes:
        if self.mechanism.complete:
            self.state = "complete"
            owner = getattr(self.mechanism, "token_owner", None)
            self.principal = owner if owner is not None else user(self.mechanism.username)
            self.token_authenticated = owner is not None
        if wrapped is None:
            return out
        version, cid = wrapped
        return encode_response(sasl_authenticate, version, cid,
                               {"error_code": 0, "error_message": None, "auth_bytes": out,
                                "session_lifetime_ms": 0})

    def _failed(self, message: str, wrapped: tuple[int, int] | None, failure: Any = None) -> bytes | None:
        if failure is not None and not failure.check(SaslFailure):
            log.error("SASL authentication error: %s", failure.getTraceback())
        self.state = "failed"
        self.failed = message
        if wrapped is None:
            return None      # a v0 client learns of the failure from the closed connection
        version, cid = wrapped
        return encode_response(sasl_authenticate, version, cid,
                               {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": message,
                                "auth_bytes": b"", "session_lifetime_ms": 0})
