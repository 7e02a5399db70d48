"""AclSync: keeps one broker's AclAuthorizer cache equal to the ACLs in ZooKeeper, and writes
ZooKeeper for CreateAcls / DeleteAcls.

Invariant: every ZooKeeper call runs in the thread pool and every cache change is applied on
the reactor thread. At start the ACL paths exist and the whole cache is loaded before the
broker serves a request. Afterwards the children of ``/kafka-acl-changes`` and
``/kafka-acl-extended-changes`` are watched; each notification with a sequence number beyond the
last one processed makes its resource pattern be re-read (so a change made by any broker or by
``odradek acls`` reaches this cache within one watch round trip), one processing round at a
time (a watch firing during a round schedules exactly one more). After a ZooKeeper session
expiry the whole cache is reloaded and the watches re-armed. A write through this broker
updates its own cache as soon as ZooKeeper took it.
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer

from odradek.protocol.acl import AclBinding, AclBindingFilter, ResourcePattern
from odradek.zk.acl_store import CHANGE_ZNODES, Entries, ZkAclStore, sequenced

from .authorizer import AclAuthorizer

log = logging.getLogger(__name__)


class AclSync:
    def __init__(self, authorizer: AclAuthorizer, zk: Any, run_in_thread: Any, reactor: Any) -> None:
        self.authorizer = authorizer
        self.zk = zk                      # KafkaZkClient: its watches survive connection losses
        self.store = ZkAclStore(zk.kazoo)
        self.run_in_thread = run_in_thread
        self.reactor = reactor
        self.last_seen: dict[str, int] = {c.path: -1 for c in CHANGE_ZNODES}
        self._running = False
        self._again = False
        self._full_reload = False
        self._stopped = False
        authorizer.sync = self

    # ------------------------------------------------------------ lifecycle

    def start(self) -> defer.Deferred:
        def load() -> dict[ResourcePattern, Entries]:
            self.store.create_acl_paths()
            for change in CHANGE_ZNODES:   # what was announced before this load is in it
                seen = sequenced(change, self.zk.get_children(change.path))
                self.last_seen[change.path] = seen[-1][0] if seen else -1
            return self.store.load_all()

        def loaded(everything: dict[ResourcePattern, Entries]) -> None:
            self.authorizer.replace_all(everything)
            log.info("ACL cache loaded: %d resource patterns", len(everything))
            self.zk.on_new_session(lambda: self.reactor.callFromThread(self._session_renewed))
            self.trigger()                 # arm the watches (and catch what came meanwhile)
        return self.run_in_thread(load).addCallback(loaded)

    def stop(self) -> None:
        self._stopped = True

    def _session_renewed(self) -> None:
        self._full_reload = True
        self.trigger()

    def _on_watch(self) -> None:          # on a kazoo thread
        if not self._stopped:
            self.reactor.callFromThread(self.trigger)

    # ------------------------------------------------------------ notification rounds

    def trigger(self) -> None:
        """Run a processing round now, or once more after the one running."""
        if self._stopped:
            return
        if self._running:
            self._again = True
            return
        self._running = True
        self._again = False
        full = self._full_reload
        self._full_reload = False
        d = self.run_in_thread(self._round, full)
        d.addCallbacks(lambda result: self._applied(result, full), self._failed)

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
        self._finish()

    def _failed(self, failure) -> None:
        log.warning("processing ACL change notifications failed (retrying in 1 s): %s", failure.getErrorMessage())
        self._running = False
        self.reactor.callLater(1.0, self.trigger)

    def _finish(self) -> None:
        self._running = False
        if self._again:
            self.trigger()

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
