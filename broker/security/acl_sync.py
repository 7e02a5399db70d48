"""AclSync: keeps one broker's AclAuthorizer cache equal to the ACLs in ZooKeeper, and writes
ZooKeeper for CreateAcls / DeleteAcls.

Invariant: the rounds are ``broker/security/notification_sync.py``'s (threads, reactor, one round
at a time, a full reload after a session expiry). At start the ACL paths exist and the whole
cache is loaded before the broker serves a request. Afterwards the children of
``/kafka-acl-changes`` and ``/kafka-acl-extended-changes`` are watched; each notification with a
sequence number beyond the last one processed makes its resource pattern be re-read (so a change
made by any broker or by ``odradek acls`` reaches this cache within one watch round trip). A write
through this broker updates its own cache as soon as ZooKeeper took it.
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer

from odradek.protocol.acl import AclBinding, AclBindingFilter, ResourcePattern
from odradek.zk.acl_store import CHANGE_ZNODES, Entries, ZkAclStore, sequenced

from .authorizer import AclAuthorizer
from .notification_sync import NotificationSync

log = logging.getLogger(__name__)


class AclSync(NotificationSync):
    what = "ACL change notifications"

    def __init__(self, authorizer: AclAuthorizer, zk: Any, run_in_thread: Any, reactor: Any) -> None:
        super().__init__(zk, run_in_thread, reactor)
        self.authorizer = authorizer
        self.store = ZkAclStore(zk.kazoo)
        self.last_seen: dict[str, int] = {c.path: -1 for c in CHANGE_ZNODES}
        authorizer.sync = self

    def _load(self) -> dict[ResourcePattern, Entries]:
        self.store.create_acl_paths()
        for change in CHANGE_ZNODES:   # what was announced before this load is in it
            seen = sequenced(change, self.zk.get_children(change.path))
            self.last_seen[change.path] = seen[-1][0] if seen else -1
        return self.store.load_all()

    def _loaded(self, everything: dict[ResourcePattern, Entries]) -> None:
        self.authorizer.replace_all(everything)
        log.info("ACL cache loaded: %d resource patterns", len(everything))

    def _round(self, full: bool) -> tuple[dict[ResourcePattern, Entries], dict[str, int]]:
        """In a thread: read the new notifications (re-arming the watches) and the patterns they name."""
        seen = dict(self.last_seen)
        changed: set[ResourcePattern] = set()
        for change in CHANGE_ZNODES:
            for seq, name in sequenced(change, self.zk.get_children(change.path, watch=self._on_watch)):
                pattern, ctime = self.store.read_change(change, name)
                if seq > seen[change.path]:
                    seen[change.path] = seq
                    if pattern is not None:
                        changed.add(pattern)
                self.store.purge_change(change, name, ctime)
        if full:
            return self.store.load_all(), seen
        return {p: self.store.get(p)[0] for p in changed}, seen

    def _applied(self, result: tuple[dict[ResourcePattern, Entries], dict[str, int]], full: bool) -> None:
        updates, seen = result
        if full:
            self.authorizer.replace_all(updates)
        else:
            self.authorizer.apply(updates)
        for path, seq in seen.items():
            self.last_seen[path] = max(self.last_seen[path], seq)
        if updates:
            log.info("ACL cache updated for %s", ", ".join(str(p) for p in sorted(updates)) if not full
                     else f"{len(updates)} resource patterns (reloaded)")

    # ------------------------------------------------------------ admin writes

    def create_acls(self, bindings: list[AclBinding]) -> defer.Deferred:
        """A list with None (stored) or an error message per binding, in order."""
        errors: list[str | None] = [b.invalid_reason() for b in bindings]
        valid = [b for b, e in zip(bindings, errors) if e is None]

        def stored(now: dict[ResourcePattern, Entries]) -> list[str | None]:
            self.authorizer.apply(now)
            return errors

        def failed(failure) -> list[str | None]:
            log.warning("writing ACLs to ZooKeeper failed: %s", failure.getErrorMessage())
            return [e if e is not None else f"Failed to update ACLs: {failure.getErrorMessage()}" for e in errors]
        if not valid:
            return defer.succeed(errors)
        return self.run_in_thread(self.store.add, valid).addCallbacks(stored, failed)

    def delete_acls(self, filters: list[AclBindingFilter]) -> defer.Deferred:
        """The bindings removed per filter (matched against this cache, removed from ZooKeeper's
        current entries)."""
        candidates = [p for p in self.authorizer.patterns() if any(f.pattern.matches(p) for f in filters)]

        def removed(result: tuple[list[list[AclBinding]], dict[ResourcePattern, Entries]]) -> list[list[AclBinding]]:
            per_filter, now = result
            self.authorizer.apply(now)
            return per_filter
        if not candidates:
            return defer.succeed([[] for _ in filters])
        return self.run_in_thread(self.store.delete, filters, candidates).addCallback(removed)
