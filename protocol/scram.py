"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka uses them, sans-IO, both ends.

Invariant: the cryptography is the standard library's (``hashlib.pbkdf2_hmac``, ``hmac``,
``secrets``); this module only arranges the RFC's messages. A ``ScramCredential`` holds what a
server may keep (salt, stored key, server key, iterations), never the password, and its string
form is Kafka's ``/config/users/<user>`` value (``salt=...,stored_key=...,server_key=...,
iterations=...``, base64). ``ScramServer`` and ``ScramClient`` are two-round state machines
(the client-first message may carry Kafka's SCRAM extensions, ``tokenauth=true`` for a
delegation token): each ``step`` takes the peer's message and returns the next one, raising ``ScramError`` on any
malformed message, nonce mismatch or failed proof; a server that raised has authenticated
nobody.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Callable

MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096     # Kafka's ScramMechanism minimum
MAX_ITERATIONS = 16384    # Kafka's ceiling for AlterUserScramCredentials
DEFAULT_ITERATIONS = 4096


class ScramError(Exception):
    """An exchange that must fail: the message says why (never the password)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ScramError("invalid base64") from None


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


def _hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ScramError(f"unsupported SCRAM mechanism {mechanism}") from None


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode("utf-8"), salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    """What a broker stores for one user and mechanism."""
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def create(cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
               salt: bytes | None = None) -> "ScramCredential":
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ScramError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
        salt = secrets.token_bytes(32) if salt is None else salt
        return cls.from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                        iterations)

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted: bytes, iterations: int) -> "ScramCredential":
        """RFC 5802's stored key ``H(HMAC(salted, "Client Key"))`` and server key
        ``HMAC(salted, "Server Key")``: what a broker keeps of an AlterUserScramCredentials upsertion,
        which carries the salted password, never the password."""
        h = _hash_name(mechanism)
        client_key = _hmac(h, salted, b"Client Key")
        return cls(bytes(salt), hashlib.new(h, client_key).digest(), _hmac(h, salted, b"Server Key"), iterations)

    def to_config(self) -> str:
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_config(cls, text: str) -> "ScramCredential":
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(_unb64(fields["salt"]), _unb64(fields["stored_key"]), _unb64(fields["server_key"]),
                       int(fields["iterations"]))
        except (KeyError, ValueError):
            raise ScramError("malformed SCRAM credential") from None


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"malformed SCRAM message attribute {part[:20]!r}")
        out.setdefault(part[0], part[2:])
    return out


def _decode_saslname(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("invalid escape in user name")
    return name.replace("=2C", ",").replace("=3D", "=")


def _encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("SCRAM message is not UTF-8") from None


@dataclass(frozen=True)
class ClientFirst:
    """A parsed client-first message: ``gs2-header n=<user>,r=<nonce>[,<key>=<value>]*``, the
    trailing pairs being Kafka's SCRAM extensions (``tokenauth=true`` for a delegation token)."""
    gs2_header: str
    authzid: str
    username: str
    nonce: str
    bare: str
    extensions: dict[str, str]

    @property
    def token_auth(self) -> bool:
        return self.extensions.get("tokenauth", "").lower() == "true"


_EXTENSION_KEY = re.compile(r"[A-Za-z]+")


def parse_client_first(message: bytes) -> ClientFirst:
    parts = _utf8(message).split(",", 2)
    if len(parts) != 3 or parts[0] not in ("n", "y") or (parts[1] and not parts[1].startswith("a=")):
        raise ScramError("invalid SCRAM client-first message (channel binding is not supported)")
    bare = parts[2]
    fields = bare.split(",")
    if len(fields) < 2 or not fields[0].startswith("n=") or not fields[1].startswith("r=") or len(fields[1]) < 3:
        raise ScramError("SCRAM client-first message lacks the user name or nonce")
    extensions: dict[str, str] = {}
    for field in fields[2:]:
        key, sep, value = field.partition("=")
        if not sep or not _EXTENSION_KEY.fullmatch(key):
            raise ScramError(f"malformed SCRAM extension {field[:20]!r}")
        extensions[key] = value
    username = _decode_saslname(fields[0][2:])
    if not username:
        raise ScramError("SCRAM client-first message lacks the user name")
    return ClientFirst(f"{parts[0]},{parts[1]},", parts[1][2:], username, fields[1][2:], bare, extensions)


class ScramServer:
    """The broker's side: ``step(client_first)`` -> server-first, ``step(client_final)`` ->
    server-final; then ``complete`` is True and ``username`` is the authenticated user.
    ``lookup(username)`` returns the user's credential for this mechanism, or None."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None]):
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._lookup = lookup
        self.username: str | None = None
        self.complete = False
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""

    def step(self, message: bytes) -> bytes:
        if self._state == "first":
            return self._first(message)
        if self._state == "final":
            return self._final(_utf8(message))
        raise ScramError("SCRAM exchange already finished")

    def _first(self, message: bytes) -> bytes:
        self._state = "failed"
        first = parse_client_first(message)
        self._gs2_header = first.gs2_header
        username = first.username
        if first.authzid and _decode_saslname(first.authzid) != username:
            raise ScramError("authorization id differs from the user name")
        credential = self._lookup(username)
        if credential is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        self.username, self._credential = username, credential
        self._nonce = first.nonce + secrets.token_urlsafe(24)
        self._client_first_bare = first.bare
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._state = "final"
        return self._server_first.encode("utf-8")

    def _final(self, text: str) -> bytes:
        self._state = "failed"
        credential = self._credential
        assert credential is not None
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("SCRAM client-final message lacks a proof")
        attrs = _attributes(without_proof)
        # Kafka's server accepts a nonce that ENDS with the one it sent (RFC 5802 asks for equality):
        # librdkafka up to 2.0 sends the client nonce twice, and works against Kafka that way.
        if not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("Invalid client nonce in the final client message")
        if _unb64(attrs.get("c", "")) != self._gs2_header.encode("utf-8"):
            raise ScramError("Invalid SCRAM channel binding")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode("utf-8")
        client_signature = _hmac(self._hash, credential.stored_key, auth_message)
        client_key = _xor(_unb64(proof_part), client_signature)
        if len(client_key) != len(credential.stored_key) or not hmac.compare_digest(
                hashlib.new(self._hash, client_key).digest(), credential.stored_key):
            raise ScramError("Authentication failed: Invalid user credentials")
        self._state = "done"
        self.complete = True
        return f"v={_b64(_hmac(self._hash, credential.server_key, auth_message))}".encode("utf-8")


class ScramClient:
    """The client's side: ``first()`` -> client-first, ``step(server_first)`` -> client-final,
    ``step(server_final)`` -> b"" once the server's signature checks out."""

    def __init__(self, mechanism: str, username: str, password: str, extensions: dict[str, str] | None = None):
        self._hash = _hash_name(mechanism)
        self.mechanism = mechanism
        self._password = password
        self._cnonce = secrets.token_urlsafe(24)
        ext = "".join(f",{k}={v}" for k, v in (extensions or {}).items())
        self._client_first_bare = f"n={_encode_saslname(username)},r={self._cnonce}{ext}"
        self._state = "first"
        self._server_signature = b""
        self.complete = False

    def first(self) -> bytes:
        self._state = "server-first"
        return f"n,,{self._client_first_bare}".encode("utf-8")

    def step(self, message: bytes) -> bytes:
        text = _utf8(message)
        if self._state == "server-first":
            return self._final(text)
        if self._state == "server-final":
            attrs = _attributes(text)
            if "e" in attrs:
                raise ScramError(f"server refused: {attrs['e']}")
            if not hmac.compare_digest(_unb64(attrs.get("v", "")), self._server_signature):
                raise ScramError("the server's signature does not match")
            self._state = "done"
            self.complete = True
            return b""
        raise ScramError("SCRAM exchange not in progress")

    def _final(self, server_first: str) -> bytes:
        attrs = _attributes(server_first)
        nonce = attrs.get("r", "")
        if not nonce.startswith(self._cnonce) or len(nonce) == len(self._cnonce):
            raise ScramError("Invalid SCRAM server nonce")
        try:
            iterations = int(attrs["i"])
            salt = _unb64(attrs["s"])
        except (KeyError, ValueError):
            raise ScramError("malformed SCRAM server-first message") from None
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode("utf-8")
        proof = _xor(client_key, _hmac(self._hash, stored_key, auth_message))
        self._server_signature = _hmac(self._hash, _hmac(self._hash, salted, b"Server Key"), auth_message)
        self._state = "server-final"
        return f"{without_proof},p={_b64(proof)}".encode("utf-8")
