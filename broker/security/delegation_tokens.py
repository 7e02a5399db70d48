"""Delegation tokens on one broker (Kafka 2.8's DelegationTokenManager and DelegationTokenCache):
the cache every SCRAM token login and token request reads, kept equal to ZooKeeper.

Invariant: tokens exist only with a non-empty ``delegation.token.secret.key`` (or its deprecated
alias ``delegation.token.master.key``); otherwise nothing is loaded and every operation answers
DELEGATION_TOKEN_AUTH_DISABLED. The cache follows ``/delegation_token/token_changes`` through
``broker/security/notification_sync.py``: a token created, renewed or expired through any broker
reaches this one within a watch round trip, and this broker's own writes update its cache as soon
as ZooKeeper took them. The HMAC is never stored: each broker derives it (and, for each SCRAM
mechanism, a credential from its base64 form at 4096 iterations, in a pool thread) from its key.
A write to ZooKeeper that fails changes nothing here and answers UNKNOWN_SERVER_ERROR.
Expired tokens are removed every ``delegation.token.expiry.check.interval.ms`` by the active
controller, as in Kafka; unlike Kafka, a token past its expiry is refused at login at once.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from twisted.internet import defer

from odradek.protocol.delegation_token import (
    DelegationToken,
    TokenInformation,
    create_hmac,
    hmac_base64,
    new_token_id,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.scram import MECHANISMS, MIN_ITERATIONS, ScramCredential
from odradek.zk.token_store import ZkTokenStore

from .notification_sync import NotificationSync

log = logging.getLogger(__name__)

Credentials = dict[str, ScramCredential]


def secret_key(config: Any) -> str | None:
    """The key tokens are signed with, None when tokens are disabled (Kafka's tokenAuthEnabled)."""
    key = config["delegation.token.secret.key"] or config["delegation.token.master.key"]
    return str(key) if key else None


def scram_credentials(mac: bytes) -> Credentials:
    """A token's SCRAM credential for each mechanism (its password is the base64 HMAC)."""
    password = hmac_base64(mac)
    return {m: ScramCredential.create(m, password, MIN_ITERATIONS) for m in MECHANISMS}


@dataclass
class TokenCache:
    """Sans-IO: the tokens, by id and by HMAC, and their SCRAM credentials."""
    key: str
    tokens: dict[str, TokenInformation] = field(default_factory=dict)
    credentials: dict[str, Credentials] = field(default_factory=dict)
    by_hmac: dict[bytes, str] = field(default_factory=dict)

    def hmac(self, token_id: str) -> bytes:
        return create_hmac(token_id, self.key)

    def update(self, info: TokenInformation, credentials: Credentials | None = None) -> None:
        if credentials is not None:
            self.credentials[info.token_id] = credentials
        self.tokens[info.token_id] = info
        self.by_hmac[self.hmac(info.token_id)] = info.token_id

    def remove(self, token_id: str) -> None:
        if self.tokens.pop(token_id, None) is not None:
            self.by_hmac.pop(self.hmac(token_id), None)
        self.credentials.pop(token_id, None)

    def for_hmac(self, mac: bytes) -> TokenInformation | None:
        token_id = self.by_hmac.get(bytes(mac))
        return None if token_id is None else self.tokens.get(token_id)

    def token(self, info: TokenInformation) -> DelegationToken:
        return DelegationToken(info, self.hmac(info.token_id))


def filter_token(requester: str, owners: list[str] | None, info: TokenInformation,
                 authorized: Callable[[str], bool]) -> bool:
    """Kafka 2.8's DelegationTokenManager.filterToken: asked-for owners (an owner matches the
    tokens it owns or renews), then the requester's own tokens, then Describe on the token."""
    if owners is not None and not any(info.owner_or_renewer(o) for o in owners):
        return False
    return info.owner_or_renewer(requester) or authorized(info.token_id)


class DelegationTokenManager(NotificationSync):
    what = "delegation token change notifications"

    def __init__(self, config: Any, zk: Any, run_in_thread: Any, reactor: Any,
                 now_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        super().__init__(zk, run_in_thread, reactor)
        key = secret_key(config)
        self.cache: TokenCache | None = None if key is None else TokenCache(key)
        self.max_lifetime_ms = int(config["delegation.token.max.lifetime.ms"])
        self.renew_time_ms = int(config["delegation.token.expiry.time.ms"])
        self.now_ms = now_ms
        self.store = ZkTokenStore(zk.kazoo) if zk is not None else None
        self.last_seen = -1

    @property
    def enabled(self) -> bool:
        return self.cache is not None

    def start(self) -> defer.Deferred:
        return super().start() if self.enabled else defer.succeed(None)

    # ------------------------------------------------------------ the cache, from ZooKeeper

    def _with_credentials(self, infos: Iterable[TokenInformation | None], known: set[str]
                          ) -> list[tuple[TokenInformation, Credentials | None]]:
        assert self.cache is not None
        return [(i, None if i.token_id in known else scram_credentials(self.cache.hmac(i.token_id)))
                for i in infos if i is not None]

    def _load(self) -> list[tuple[TokenInformation, Credentials | None]]:
        assert self.store is not None
        self.store.create_paths()
        seen = self.store.changes()
        self.last_seen = seen[-1][0] if seen else -1
        return self._with_credentials(self.store.load_all().values(), set())

    def _loaded(self, result: list[tuple[TokenInformation, Credentials | None]]) -> None:
        self._replace(result)
        log.info("delegation token cache loaded: %d tokens", len(result))

    def _replace(self, result: list[tuple[TokenInformation, Credentials | None]]) -> None:
        cache = self.cache
        assert cache is not None
        for token_id in set(cache.tokens) - {i.token_id for i, _ in result}:
            cache.remove(token_id)
        for info, credentials in result:
            cache.update(info, credentials)

    def _round(self, full: bool) -> tuple[dict[str, Any], int]:
        assert self.store is not None and self.cache is not None
        seen, changed = self.last_seen, set()
        # a snapshot (one C-level copy under the GIL): credentials are computed only for new tokens
        known = set(self.cache.tokens)
        for seq, name in self.store.changes(watch=self._on_watch):
            token_id = self.store.read_change(name)
            if seq > seen:
                seen = seq
                if token_id:
                    changed.add(token_id)
        if full:
            return {"all": self._with_credentials(self.store.load_all().values(), known)}, seen
        infos = {t: self.store.get(t) for t in changed}
        return {"update": self._with_credentials(infos.values(), known),
                "gone": [t for t, i in infos.items() if i is None]}, seen

    def _applied(self, result: tuple[dict[str, Any], int], full: bool) -> None:
        changes, seen = result
        self.last_seen = max(self.last_seen, seen)
        cache = self.cache
        assert cache is not None
        if "all" in changes:
            self._replace(changes["all"])
            return
        for info, credentials in changes["update"]:
            if credentials is None and info.token_id not in cache.credentials:
                credentials = scram_credentials(cache.hmac(info.token_id))   # removed meanwhile
            cache.update(info, credentials)
        for token_id in changes["gone"]:
            cache.remove(token_id)
        if changes["update"] or changes["gone"]:
            log.info("delegation token cache updated: %s", ", ".join(
                [i.token_id for i, _ in changes["update"]] + [f"{t} (removed)" for t in changes["gone"]]))

    # ------------------------------------------------------------ login

    def scram_login(self, mechanism: str, token_id: str) -> tuple[ScramCredential, str] | None:
        """(the token's credential for ``mechanism``, its owner principal) for a token login, or
        None: tokens disabled, an unknown token, or one past its expiry."""
        cache = self.cache
        info = None if cache is None else cache.tokens.get(token_id)
        if cache is None or info is None or info.expired(self.now_ms()):
            return None
        credential = cache.credentials.get(token_id, {}).get(mechanism)
        return None if credential is None else (credential, info.owner)

    # ------------------------------------------------------------ the APIs

    async def _write(self, info: TokenInformation, remove: bool = False) -> ErrorCode:
        assert self.store is not None and self.cache is not None
        try:
            if remove:
                await self.run_in_thread(self.store.delete, info.token_id)
            else:
                credentials = None if info.token_id in self.cache.credentials else \
                    await self.run_in_thread(scram_credentials, self.cache.hmac(info.token_id))
                await self.run_in_thread(self.store.put, info)
        except Exception as exc:   # ZooKeeper unavailable: nothing changed here
            log.warning("writing delegation token %s to ZooKeeper failed: %s", info.token_id, exc)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        if remove:
            self.cache.remove(info.token_id)
        else:
            self.cache.update(info, credentials)
        return ErrorCode.NONE

    async def create(self, owner: str, renewers: list[str], max_lifetime_ms: int
                     ) -> tuple[ErrorCode, DelegationToken | None]:
        if self.cache is None:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, None
        now = self.now_ms()
        lifetime = self.max_lifetime_ms if max_lifetime_ms <= 0 else min(max_lifetime_ms, self.max_lifetime_ms)
        info = TokenInformation(new_token_id(), owner, tuple(renewers), now, now + lifetime,
                                min(now + lifetime, now + self.renew_time_ms))
        code = await self._write(info)
        if code != ErrorCode.NONE:
            return code, None
        log.info("Created a delegation token: %s for owner: %s", info.token_id, owner)
        return code, self.cache.token(info)

    def _checked(self, principal: str, mac: bytes) -> tuple[ErrorCode, TokenInformation | None]:
        """Kafka's order: disabled, unknown HMAC, neither owner nor renewer, expired."""
        if self.cache is None:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, None
        info = self.cache.for_hmac(mac)
        if info is None:
            return ErrorCode.DELEGATION_TOKEN_NOT_FOUND, None
        if not info.owner_or_renewer(principal):
            return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, None
        if info.expired(self.now_ms()):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, None
        return ErrorCode.NONE, info

    async def renew(self, principal: str, mac: bytes, period_ms: int) -> tuple[ErrorCode, int]:
        code, info = self._checked(principal, mac)
        if info is None:
            return code, -1
        expiry = min(info.max_timestamp, self.now_ms() + (self.renew_time_ms if period_ms < 0 else period_ms))
        code = await self._write(info.with_expiry(expiry))
        if code == ErrorCode.NONE:
            log.info("Delegation token renewed for token: %s for owner: %s", info.token_id, info.owner)
        return code, expiry if code == ErrorCode.NONE else -1

    async def expire(self, principal: str, mac: bytes, period_ms: int) -> tuple[ErrorCode, int]:
        code, info = self._checked(principal, mac)
        if info is None:
            return code, -1
        now = self.now_ms()
        if period_ms < 0:
            code = await self._write(info, remove=True)
            expiry = now
        else:
            expiry = min(info.max_timestamp, now + period_ms)
            code = await self._write(info.with_expiry(expiry))
        if code == ErrorCode.NONE:
            log.info("Updated expiry time for token: %s for owner: %s", info.token_id, info.owner)
        return code, expiry if code == ErrorCode.NONE else -1

    def describe(self, eligible: Callable[[TokenInformation], bool]) -> list[DelegationToken]:
        cache = self.cache
        if cache is None:
            return []
        return [cache.token(i) for i in sorted(cache.tokens.values(), key=lambda i: i.issue_timestamp)
                if eligible(i)]

    def expire_tokens(self) -> defer.Deferred:
        """Remove every expired token (Kafka's expireTokens, run by the active controller)."""
        cache = self.cache
        now = self.now_ms()
        gone = [] if cache is None else [i for i in cache.tokens.values() if i.expired(now)]

        async def remove() -> None:
            for info in gone:
                log.info("Delegation token expired for token: %s for owner: %s", info.token_id, info.owner)
                await self._write(info, remove=True)
        return defer.Deferred.fromCoroutine(remove())
