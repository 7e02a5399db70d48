"""The shape every ZooKeeper-backed cache of a broker shares (ACLs, delegation tokens): load all,
then follow a change-notification path (Kafka's ZkNodeChangeNotificationListener).

Invariant: every ZooKeeper call runs in the thread pool and every cache change is applied on the
reactor thread. ``start`` loads the whole cache (``_load`` in a thread, ``_loaded`` on the reactor)
before the broker serves a request. Afterwards each watch firing runs a processing round
(``_round`` in a thread, re-arming the watch; ``_applied`` on the reactor), one round at a time: a
watch firing during a round schedules exactly one more. After a ZooKeeper session expiry the
next round is a full reload; a failed round is retried after a second.
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer

log = logging.getLogger(__name__)

RETRY_S = 1.0


class NotificationSync:
    what = "change notifications"      # for the log lines

    def __init__(self, zk: Any, run_in_thread: Any, reactor: Any) -> None:
        self.zk = zk                      # KafkaZkClient: its watches survive connection losses
        self.run_in_thread = run_in_thread
        self.reactor = reactor
        self._running = False
        self._again = False
        self._full_reload = False
        self._stopped = False

    # ------------------------------------------------------------ what a cache provides

    def _load(self) -> Any:
        """In a thread: everything, and the notifications already covered by it."""
        raise NotImplementedError

    def _loaded(self, result: Any) -> None:
        raise NotImplementedError

    def _round(self, full: bool) -> Any:
        """In a thread: the new notifications (re-arming the watch with ``self._on_watch``) and
        what they announce, or everything when ``full``."""
        raise NotImplementedError

    def _applied(self, result: Any, full: bool) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------ lifecycle

    def start(self) -> defer.Deferred:
        def loaded(result: Any) -> None:
            self._loaded(result)
            self.zk.on_new_session(lambda: self.reactor.callFromThread(self._session_renewed))
            self.trigger()                 # arm the watches (and catch what came meanwhile)
        return self.run_in_thread(self._load).addCallback(loaded)

    def stop(self) -> None:
        self._stopped = True

    def _session_renewed(self) -> None:
        self._full_reload = True
        self.trigger()

    def _on_watch(self, *_event: Any) -> None:          # on a kazoo thread
        if not self._stopped:
            self.reactor.callFromThread(self.trigger)

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
        d.addCallbacks(lambda result: self._done(result, full), self._failed)

    def _done(self, result: Any, full: bool) -> None:
        try:
            self._applied(result, full)
        finally:
            self._running = False
        if self._again:
            self.trigger()

    def _failed(self, failure: Any) -> None:
        log.warning("processing %s failed (retrying in %.0f s): %s", self.what, RETRY_S, failure.getErrorMessage())
        self._running = False
        self.reactor.callLater(RETRY_S, self.trigger)
