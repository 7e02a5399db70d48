"""ZooKeeperClient: one kazoo session with Kafka's connection-loss, watch and expiry rules.

Invariants:
- every method blocks (call it off the reactor thread, e.g. through ``deferToThread``);
- watches are one-shot kazoo watches delivered as zero-argument callbacks on a kazoo
  thread, one kazoo watcher per callable (re-registering never fires a callback twice);
  session-reset pseudo events are not delivered, and a watch kazoo dropped on a
  connection loss is called once when the SAME session reconnects (its handler re-reads
  and re-arms);
- ``retry(fn)`` is Kafka's ZooKeeperClient behaviour: a call that fails with connection
  loss waits for the reconnection and runs again, but never across a session expiry (it
  then raises ``SessionExpiredError``: the caller's session-level handling takes over);
- ``on_session_expired`` / ``on_new_session`` callbacks run on fresh threads, never on
  kazoo's connection thread, and not after ``close()``.

It knows nothing of Kafka's znodes: ``odradek.zk.session.KafkaZkClient`` adds those. Its
SASL login and znode ACLs are ``odradek.zk.security``'s (JAAS from ``KAFKA_OPTS``,
``zookeeper.set.acl``).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss, NoNodeError, OperationTimeoutError, SessionExpiredError
from kazoo.protocol.states import EventType, KeeperState

from odradek.zk.security import ZkClientSecurity, new_kazoo, start_kazoo, zk_client_security

log = logging.getLogger(__name__)

Watch = Callable[[], None]

RETRIABLE_ERRORS = (ConnectionLoss, OperationTimeoutError)

_WRAPPERS_LOCK = threading.Lock()


def _make_watcher(watch: Watch, dropped: Callable[[Watch], None] | None = None):
    def fire(event) -> None:
        if event is not None and event.type == EventType.NONE:
            # kazoo drops every watch on a connection loss too (NONE in state CONNECTING) and
            # never restores them (no SetWatches): ``dropped`` re-tells the owner once the
            # SAME session reconnects. A session reset: the caller re-registers on the new one.
            if dropped is not None and event.state == KeeperState.CONNECTING:
                dropped(watch)
            return
        try:
            watch()
        except Exception:  # pragma: no cover - never kill kazoo's callback thread
            log.exception("watch callback failed")
    return fire


class ZooKeeperClient:
    """Kafka's ZooKeeperClient over kazoo (blocking): session, watches, retries."""

    def __init__(self, connect: str, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None, set_acl: bool = False,
                 security: ZkClientSecurity | None = None):
        """``security``: the SASL login (default: from ``KAFKA_OPTS``, as Kafka's JVM reads it);
        ``set_acl``: Kafka's ``zookeeper.set.acl`` (secure ACLs on every znode created).
        Raises ``ZkSecurityError`` (one line) for a bad JAAS setup or set_acl without SASL."""
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.security = zk_client_security() if security is None else security
        self.kazoo: KazooClient = new_kazoo(connect, session_timeout_ms / 1000.0, self.security, set_acl)
        self._new_session_callbacks: list[Callable[[], None]] = []
        self._expired_callbacks: list[Callable[[], None]] = []
        self._lost = False
        self._closing = False
        self._connected = threading.Event()
        self._session_generation = 0          # bumped on every session loss
        self._wrappers: dict = {}             # watch -> its kazoo watcher (one per callable)
        self._dropped: set = set()            # watches kazoo dropped on a connection loss
        self._suspend_generation = -1         # session generation of the last connection loss
        self.kazoo.add_listener(self._state_listener)

    # ------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 30.0) -> None:
        """Connect (and log in): kazoo's timeout error, or ZkAuthenticationError if refused."""
        start_kazoo(self.kazoo, self.connect, timeout, self.security)

    def close(self) -> None:
        self._closing = True
        try:
            self.kazoo.stop()
        finally:
            self.kazoo.close()

    @property
    def session_id(self) -> int | None:
        cid = self.kazoo.client_id
        return cid[0] if cid else None

    def on_new_session(self, callback: Callable[[], None]) -> None:
        """``callback()`` runs on a fresh thread once a new session replaced an expired one."""
        self._new_session_callbacks.append(callback)

    def on_session_expired(self, callback: Callable[[], None]) -> None:
        """``callback()`` runs on a fresh thread when the session is lost (not on close())."""
        self._expired_callbacks.append(callback)

    def _wrap(self, watch: Watch | None):
        """The kazoo watcher for ``watch`` (the same callable always gets the same watcher, so
        re-registering a watch does not make kazoo call it twice)."""
        if watch is None:
            return None
        with _WRAPPERS_LOCK:
            w = self._wrappers.get(watch)
            if w is None:
                w = self._wrappers[watch] = _make_watcher(watch, self._watch_dropped)
            return w

    def _watch_dropped(self, watch: Watch) -> None:
        """kazoo dropped ``watch`` on a connection loss: call it once the same session is
        connected again (its handler re-reads the znode and re-arms the watch); forget it if
        the session is lost instead."""
        with _WRAPPERS_LOCK:
            if self._suspend_generation != self._session_generation:
                return
            if not self.kazoo.connected:
                self._dropped.add(watch)
                return
        self._spawn_watches([watch])

    def _spawn_watches(self, watches) -> None:
        def run() -> None:
            for w in watches:
                self._run_callback(w)
        threading.Thread(target=run, daemon=True, name="zk-dropped-watches").start()

    def _state_listener(self, state: str) -> None:
        # Called on kazoo's connection thread: must not block, so spawn.
        if state == KazooState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
        if state == KazooState.LOST:
            self._session_generation += 1
        with _WRAPPERS_LOCK:
            if state == KazooState.SUSPENDED:
                self._suspend_generation = self._session_generation
                dropped = None
            else:
                dropped, self._dropped = self._dropped, set()
        if dropped and state == KazooState.CONNECTED and not self._lost and not self._closing:
            self._spawn_watches(dropped)
        if self._closing:
            self._connected.set()             # wake retry loops: they see _closing and give up
            return
        if state == KazooState.LOST:
            self._lost = True
            callbacks = list(self._expired_callbacks)
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            callbacks = list(self._new_session_callbacks)
        else:
            return
        for cb in callbacks:
            threading.Thread(target=self._run_callback, args=(cb,), daemon=True,
                             name="zk-session-callback").start()

    @staticmethod
    def _run_callback(cb: Callable[[], None]) -> None:
        try:
            cb()
        except Exception:
            log.exception("session callback failed")

    # ------------------------------------------------------------ connection-loss retries

    def wait_connected(self, timeout: float | None = None) -> bool:
        """Block until the client is connected (True) or ``timeout`` passed / closing (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._closing:
            if self.kazoo.connected:
                return True
            left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if left <= 0:
                return False
            self._connected.wait(left)
        return False

    def retry(self, fn: Callable, *args, **kwargs):
        """``fn(*args, **kwargs)``, run again after every connection loss once reconnected.

        Raises ``SessionExpiredError`` if the session was lost meanwhile (no retry on a new
        session: the caller's expiry handling decides), and the last error when closing.
        """
        generation = self._session_generation
        while True:
            try:
                return fn(*args, **kwargs)
            except RETRIABLE_ERRORS as exc:
                if self._closing:
                    raise
                log.info("ZooKeeper call %s failed (%s); retrying once reconnected",
                         getattr(fn, "__name__", fn), type(exc).__name__)
                if not self.wait_connected():
                    raise
                if self._session_generation != generation:
                    raise SessionExpiredError("session expired while retrying") from exc

    # ------------------------------------------------------------ generic

    def exists(self, path: str, watch: Watch | None = None):
        return self.kazoo.exists(path, watch=self._wrap(watch))

    def get_children(self, path: str, watch: Watch | None = None) -> list[str]:
        try:
            return self.kazoo.get_children(path, watch=self._wrap(watch))
        except NoNodeError:
            if watch is not None:  # still learn when it appears
                self.kazoo.exists(path, watch=self._wrap(watch))
            return []

    def get_data(self, path: str, watch: Watch | None = None):
        """(data, stat) or (None, None) when absent; a watch is kept either way."""
        try:
            return self.kazoo.get(path, watch=self._wrap(watch))
        except NoNodeError:
            if watch is not None:
                self.kazoo.exists(path, watch=self._wrap(watch))
            return None, None
