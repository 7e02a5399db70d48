"""Users' SCRAM credentials through the admin API (DescribeUserScramCredentials 50,
AlterUserScramCredentials 51), as Kafka's KafkaAdminClient does them.

Invariant: a password never leaves this process: an upsertion sends a fresh 32-byte random
salt and the salted password (PBKDF2 through ``protocol/scram.py``), from which the broker
derives the stored and server keys. Alterations go to the controller (found through
Metadata; NOT_CONTROLLER or a lost connection refreshes and retries until the timeout);
describes go to any broker. Per-user errors are ``KafkaError``s with the broker's code.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any, Iterable, Union

from odradek.protocol.apis import alter_user_scram_credentials as _alter
from odradek.protocol.apis import describe_user_scram_credentials as _describe
from odradek.protocol.apis.alter_user_scram_credentials import MECHANISM_BY_TYPE, TYPE_BY_MECHANISM
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.scram import DEFAULT_ITERATIONS, salted_password

from .cluster import ClusterMetadata, NodePool


@dataclass(frozen=True)
class ScramCredentialInfo:
    """One credential of a user, as DescribeUserScramCredentials reports it."""
    mechanism: str       # "SCRAM-SHA-256" | "SCRAM-SHA-512"
    iterations: int


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Create or replace ``user``'s credential for ``mechanism``."""
    user: str
    mechanism: str
    password: str = field(repr=False)
    iterations: int = DEFAULT_ITERATIONS


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    """Remove ``user``'s credential for ``mechanism``."""
    user: str
    mechanism: str


Alteration = Union[UserScramCredentialUpsertion, UserScramCredentialDeletion]


def _mechanism_type(name: str) -> int:
    try:
        return TYPE_BY_MECHANISM[name]
    except KeyError:
        raise KafkaError(ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                         f"unknown SCRAM mechanism {name!r} (use SCRAM-SHA-256 or SCRAM-SHA-512)") from None


def alter_body(alterations: Iterable[Alteration]) -> dict[str, Any]:
    """The request body: deletions as given, upsertions with salt and salted password."""
    deletions, upsertions = [], []
    for a in alterations:
        mechanism = _mechanism_type(a.mechanism)
        if isinstance(a, UserScramCredentialDeletion):
            deletions.append({"name": a.user, "mechanism": mechanism})
            continue
        salt = secrets.token_bytes(32)
        upsertions.append({"name": a.user, "mechanism": mechanism, "iterations": a.iterations, "salt": salt,
                           "salted_password": salted_password(a.mechanism, a.password, salt, a.iterations)})
    return {"deletions": deletions, "upsertions": upsertions}


def _error(code: int, message: str | None, user: str) -> KafkaError:
    return KafkaError(ErrorCode(code), f"{user}: {message}" if message else user)


class ScramAdmin:
    """The two calls over an AdminClient's metadata and connections (its lock held by the caller)."""

    def __init__(self, cluster: ClusterMetadata, pool: NodePool, timeout_s: float, backoff_s: float):
        self.cluster, self.pool = cluster, pool
        self.timeout_s, self.backoff_s = timeout_s, backoff_s

    def describe(self, users: Iterable[str] | None) -> dict[str, list[ScramCredentialInfo] | KafkaError]:
        names = None if users is None else list(users)
        body = {"users": None if names is None else [{"name": n} for n in names]}
        resp = self._send(_describe, body, to_controller=False)
        if resp.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(resp.error_code), resp.error_message or _describe.NAME)
        out: dict[str, list[ScramCredentialInfo] | KafkaError] = {}
        for r in resp.results:
            if r.error_code != ErrorCode.NONE:
                out[r.user] = _error(r.error_code, r.error_message, r.user)
            else:
                out[r.user] = [ScramCredentialInfo(MECHANISM_BY_TYPE.get(i.mechanism, "UNKNOWN"), i.iterations)
                               for i in r.credential_infos]
        return out

    def alter(self, alterations: Iterable[Alteration]) -> dict[str, KafkaError | None]:
        body = alter_body(alterations)
        resp = self._send(_alter, body, to_controller=True)
        return {r.user: None if r.error_code == ErrorCode.NONE else _error(r.error_code, r.error_message, r.user)
                for r in resp.results}

    def _send(self, api: Any, body: dict[str, Any], to_controller: bool) -> Any:
        def nodes() -> list[int]:
            node = self.cluster.controller_id if to_controller else min(self.cluster.brokers, default=-1)
            return [node] if node is not None and node >= 0 else []

        def moved(resp: Any) -> str | None:
            if to_controller and resp.results and all(r.error_code == ErrorCode.NOT_CONTROLLER
                                                      for r in resp.results):
                return "no longer the controller"
            return None
        return self.pool.call(api, body, nodes, self.timeout_s, self.backoff_s, moved=moved)
