"""ACLs in ZooKeeper as Kafka 2.8's AclAuthorizer keeps them: read, add, remove, announce.

Invariant: every method blocks (brokers call it in their thread pool; ``odradek acls
--authorizer-properties`` calls it directly) and every byte goes through the ACL section of
``odradek.zk.znodes``. A resource znode is only ever replaced conditionally on the version read
(create if absent, set at that version, delete at that version when no ACL is left), retried on a
conflict, so concurrent writers (several brokers, the CLI) never lose each other's ACLs; every
change is followed by one sequential change notification, which is how every broker's cache
learns of it. Notifications older than 15 minutes are purged by the readers (Kafka's
ZkNodeChangeNotificationListener).
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from odradek.protocol.acl import (
    CONCRETE_RESOURCE_TYPES,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    PatternType,
    ResourcePattern,
)
from odradek.zk import notifications
from odradek.zk import znodes as zn
from odradek.zk.notifications import sequenced  # noqa: F401  (re-exported for acl_sync)

log = logging.getLogger(__name__)

SPECIFIC_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
CHANGE_ZNODES = (zn.AclChangeNotificationZNode, zn.ExtendedAclChangeNotificationZNode)
Entries = frozenset[AccessControlEntry]


class ZkAclStore:
    """The ACL znodes of one ZooKeeper (a started ``KazooClient``)."""

    def __init__(self, kazoo) -> None:
        self.kazoo = kazoo

    # ------------------------------------------------------------ paths and reads

    def create_acl_paths(self) -> None:
        """Kafka's createAclPaths: each store's root and resource-type folders, and both change paths."""
        for pattern_type in SPECIFIC_PATTERN_TYPES:
            for resource_type in CONCRETE_RESOURCE_TYPES:
                self.kazoo.ensure_path(zn.AclZNode.type_path(pattern_type, resource_type))
        for change in CHANGE_ZNODES:
            self.kazoo.ensure_path(change.path)

    def resources(self) -> list[ResourcePattern]:
        """Every resource pattern that has a znode."""
        out: list[ResourcePattern] = []
        for pattern_type in SPECIFIC_PATTERN_TYPES:
            for resource_type in CONCRETE_RESOURCE_TYPES:
                try:
                    names = self.kazoo.get_children(zn.AclZNode.type_path(pattern_type, resource_type))
                except NoNodeError:
                    continue
                out.extend(ResourcePattern(resource_type, n, pattern_type) for n in names)
        return sorted(out)

    def get(self, pattern: ResourcePattern) -> tuple[Entries, int]:
        """(entries, znode version); (empty, -1) when the znode does not exist."""
        try:
            data, stat = self.kazoo.get(zn.ResourceZNode.path(pattern))
        except NoNodeError:
            return frozenset(), -1
        return zn.ResourceZNode.decode(data), stat.version

    def load_all(self) -> dict[ResourcePattern, Entries]:
        """Every pattern's entries (patterns without entries left out)."""
        out: dict[ResourcePattern, Entries] = {}
        for pattern in self.resources():
            entries, _ = self.get(pattern)
            if entries:
                out[pattern] = entries
        return out

    def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        return sorted(AclBinding(p, e) for p, entries in self.load_all().items() for e in entries
                      if flt.matches(AclBinding(p, e)))

    # ------------------------------------------------------------ writes

    def update(self, pattern: ResourcePattern, change: Callable[[Entries], Entries]) -> Entries:
        """Replace the pattern's entries by ``change(current)``, conditionally on the version read,
        retrying on conflicts; announce the change. Returns the entries now stored."""
        path = zn.ResourceZNode.path(pattern)
        while True:
            current, version = self.get(pattern)
            wanted = frozenset(change(current))
            if wanted == current:
                return current
            try:
                if not wanted:
                    self.kazoo.delete(path, version=version)
                elif version < 0:
                    self.kazoo.create(path, zn.ResourceZNode.encode(wanted), makepath=True)
                else:
                    self.kazoo.set(path, zn.ResourceZNode.encode(wanted), version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue   # someone else changed it meanwhile: read again
            self.announce(pattern)
            return wanted

    def announce(self, pattern: ResourcePattern) -> None:
        change = zn.acl_change_znode(pattern.pattern_type)
        self.kazoo.create(f"{change.path}/{change.prefix}", change.encode(pattern), sequence=True, makepath=True)

    def add(self, bindings: Iterable[AclBinding]) -> dict[ResourcePattern, Entries]:
        """Store the bindings (each must be valid); returns each touched pattern's entries now."""
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        return {p: self.update(p, _adding(frozenset(new))) for p, new in by_pattern.items()}

    def delete(self, filters: list[AclBindingFilter], candidates: Iterable[ResourcePattern] | None = None
               ) -> tuple[list[list[AclBinding]], dict[ResourcePattern, Entries]]:
        """Remove what each filter matches, among ``candidates`` (default: every pattern with a
        znode). Returns (the bindings removed per filter, each touched pattern's entries now)."""
        patterns = self.resources() if candidates is None else sorted(set(candidates))
        removed: list[list[AclBinding]] = [[] for _ in filters]
        now: dict[ResourcePattern, Entries] = {}
        for pattern in patterns:
            if not any(f.pattern.matches(pattern) for f in filters):
                continue
            gone: set[AccessControlEntry] = set()

            def change(current: Entries, pattern: ResourcePattern = pattern,
                       gone: set[AccessControlEntry] = gone) -> Entries:
                gone.clear()
                gone.update(e for e in current if any(f.matches(AclBinding(pattern, e)) for f in filters))
                return current - gone
            now[pattern] = self.update(pattern, change)
            for i, f in enumerate(filters):
                removed[i].extend(AclBinding(pattern, e) for e in sorted(gone) if f.matches(AclBinding(pattern, e)))
        return removed, now

    # ------------------------------------------------------------ change notifications

    def read_change(self, change, name: str) -> tuple[ResourcePattern | None, int]:
        """(the announced pattern or None if gone/unreadable, the notification's ctime in ms)."""
        data, ctime = notifications.read(self.kazoo, change, name)
        if data is None:
            return None, 0
        try:
            return change.decode(data), ctime
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable ACL change notification %s/%s: %s", change.path, name, exc)
            return None, ctime

    def purge_change(self, change, name: str, ctime_ms: int, now_ms: float | None = None) -> None:
        """Delete a notification older than 15 minutes (every reader does; one wins)."""
        notifications.purge_expired(self.kazoo, change, name, ctime_ms, now_ms)


def _adding(new: Entries) -> Callable[[Entries], Entries]:
    """The change that adds ``new`` to a pattern's entries."""
    return lambda current: current | new
