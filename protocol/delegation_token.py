"""Delegation tokens (KIP-48) as Kafka 2.8 defines them, shared by the broker, ZooKeeper's
znodes and the clients: the token's information, its HMAC and the principals it names.

Invariant: a token's HMAC is HmacSHA512(secret key as UTF-8, token id as UTF-8) computed by the
standard library's ``hmac``; a token id is a random UUID in URL-safe base64 without padding
(Kafka's ``CoreUtils.generateUuidAsBase64``); the password a client logs in with is the HMAC in
standard base64 (``DelegationToken.hmacAsBase64String``). ``TokenInformation`` is immutable: a
renewal is a new value.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from dataclasses import dataclass, replace

USER_TYPE = "User"


def parse_principal(text: str) -> tuple[str, str]:
    """``Type:name`` -> (type, name), as Kafka's SecurityUtils.parseKafkaPrincipal."""
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    return kind, name


def new_token_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def create_hmac(token_id: str, secret_key: str) -> bytes:
    return hmac.new(secret_key.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def hmac_base64(mac: bytes) -> str:
    return base64.b64encode(mac).decode("ascii")


@dataclass(frozen=True)
class TokenInformation:
    """What ZooKeeper keeps of a token (never its HMAC): principals as ``Type:name``, times in ms."""
    token_id: str
    owner: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    def owner_or_renewer(self, principal: str) -> bool:
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_timestamp < now_ms or self.expiry_timestamp < now_ms

    def with_expiry(self, expiry_timestamp: int) -> "TokenInformation":
        return replace(self, expiry_timestamp=expiry_timestamp)


@dataclass(frozen=True)
class DelegationToken:
    """A token and its HMAC, as CreateDelegationToken and DescribeDelegationToken answer it."""
    info: TokenInformation
    hmac: bytes

    @property
    def hmac_base64(self) -> str:
        return hmac_base64(self.hmac)
