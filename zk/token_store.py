"""Delegation tokens in ZooKeeper as Kafka 2.8's DelegationTokenManager keeps them: read, write,
delete, announce.

Invariant: every method blocks (brokers call it in their thread pool) and every byte goes through
``zk/token_znodes.py``. Each write or delete of ``/delegation_token/tokens/<id>`` is followed by
one ``/delegation_token/token_changes/token_change_<seq>`` notification naming the token, which is
how every broker's token cache learns of it; notifications older than 15 minutes are purged by
the readers. An unreadable token znode is skipped with a warning, never fatal.
"""
from __future__ import annotations

import logging
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from odradek.protocol.delegation_token import TokenInformation

from . import notifications
from .token_znodes import (
    DelegationTokenChangeNotificationZNode as Changes,
)
from .token_znodes import DelegationTokenInfoZNode, DelegationTokensZNode

log = logging.getLogger(__name__)


class ZkTokenStore:
    """The token znodes of one ZooKeeper (a started ``KazooClient``)."""

    def __init__(self, kazoo: Any) -> None:
        self.kazoo = kazoo

    def create_paths(self) -> None:
        """Kafka's createDelegationTokenPaths."""
        self.kazoo.ensure_path(DelegationTokensZNode.path)
        self.kazoo.ensure_path(Changes.path)

    def get(self, token_id: str) -> TokenInformation | None:
        try:
            data, _ = self.kazoo.get(DelegationTokenInfoZNode.path(token_id))
        except NoNodeError:
            return None
        try:
            return DelegationTokenInfoZNode.decode(data)
        except ValueError as exc:
            log.warning("ignoring delegation token znode %s: %s", token_id, exc)
            return None

    def load_all(self) -> dict[str, TokenInformation]:
        try:
            ids = self.kazoo.get_children(DelegationTokensZNode.path)
        except NoNodeError:
            return {}
        return {info.token_id: info for info in map(self.get, sorted(ids)) if info is not None}

    def put(self, info: TokenInformation) -> None:
        """Kafka's setOrCreateDelegationToken, then the change notification."""
        path, data = DelegationTokenInfoZNode.path(info.token_id), DelegationTokenInfoZNode.encode(info)
        try:
            self.kazoo.set(path, data)
        except NoNodeError:
            try:
                self.kazoo.create(path, data, makepath=True)
            except NodeExistsError:
                self.kazoo.set(path, data)
        self.announce(info.token_id)

    def delete(self, token_id: str) -> None:
        try:
            self.kazoo.delete(DelegationTokenInfoZNode.path(token_id))
        except NoNodeError:
            pass
        self.announce(token_id)

    def announce(self, token_id: str) -> None:
        self.kazoo.create(f"{Changes.path}/{Changes.prefix}", Changes.encode(token_id), sequence=True, makepath=True)

    def changes(self, watch: Any = None) -> list[tuple[int, str]]:
        """[(sequence, child)] of the change notifications, oldest first (``watch`` re-armed)."""
        return notifications.sequenced(Changes, self.kazoo.get_children(Changes.path, watch=watch))

    def read_change(self, name: str) -> str | None:
        """The token id a notification names (None when gone); purges it once expired."""
        data, ctime = notifications.read(self.kazoo, Changes, name)
        notifications.purge_expired(self.kazoo, Changes, name, ctime)
        return None if data is None else Changes.decode(data)
