"""Group membership, shared by the consumer and Kafka Connect's workers (Kafka's
``AbstractCoordinator``): finding the coordinator, JoinGroup/SyncGroup, heartbeats and
leaving, for any protocol type; subclasses say what to join with and what to do with an
assignment (``ConsumerCoordinator`` in ``client/coordinator.py``, ``WorkerCoordinator`` in
``pipeline/connect/group.py``).

Invariant: JoinGroup and SyncGroup are sent asynchronously on the coordinator connection
and only ever progressed from the member's own thread inside ``poll(deadline)``, so
``poll`` never blocks past its deadline; a rebalance starts (``on_join_prepare``) exactly
once before the first JoinGroup of a rebalance and ends with ``on_join_complete`` after a
successful SyncGroup. The heartbeat thread owns a second connection to the coordinator,
only heartbeats in the STABLE state and only *signals* the member's thread (rejoin needed,
coordinator unknown) except for leaving the group when ``max.poll.interval.ms`` has passed
without a poll. Shared fields are guarded by ``self._lock``; a response for a generation
that is no longer current is ignored. ``find_coordinator`` asks a random known broker and
retries retriable errors (refreshing metadata) until its deadline; a ``Generation`` is
immutable and ``NO_GENERATION`` is what a member without one commits with.
"""
from __future__ import annotations

import enum
import logging
import random
import select
import threading
import time
from typing import Any, NamedTuple

from odradek.protocol.apis import find_coordinator as _find_coordinator
from odradek.protocol.apis import heartbeat as _heartbeat
from odradek.protocol.apis import join_group as _join_group
from odradek.protocol.apis import leave_group as _leave_group
from odradek.protocol.apis import sync_group as _sync_group
from odradek.protocol.errors import ErrorCode, KafkaError

from .cluster import ClusterMetadata, NodePool
from .connection import BrokerConnection, ConnectionLost, InFlightRequest
from .structs import KafkaTimeoutError

log = logging.getLogger(__name__)

COORDINATOR_ERRORS = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT})
RESET_ERRORS = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION})
_FATAL_JOIN = frozenset({ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ErrorCode.INVALID_SESSION_TIMEOUT,
                         ErrorCode.INVALID_GROUP_ID, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                         ErrorCode.GROUP_MAX_SIZE_REACHED, ErrorCode.FENCED_INSTANCE_ID,
                         ErrorCode.UNSUPPORTED_VERSION})


class Generation(NamedTuple):
    generation_id: int
    member_id: str
    protocol: str | None


NO_GENERATION = Generation(-1, "", None)


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    REBALANCING = "rebalancing"
    STABLE = "stable"

def find_coordinator(cluster: ClusterMetadata, pool: NodePool, group_id: str,
                     timeout: float) -> tuple[int, str, int]:
    """(node_id, host, port) of ``group_id``'s coordinator; retries retriable errors until ``timeout``."""
    deadline = time.monotonic() + timeout
    backoff = cluster.config["retry.backoff.ms"] / 1000.0
    last: KafkaError | None = None
    while True:
        try:
            if not cluster.brokers:
                cluster.refresh([])
            node = random.choice(sorted(cluster.brokers))
            conn = pool.get(node)
            version = conn.version_for(_find_coordinator, _find_coordinator.MAX_VERSION)
            resp = conn.request(_find_coordinator, {"key": group_id, "key_type": 0}, version=version)
            if resp.error_code == ErrorCode.NONE:
                return resp.node_id, resp.host, resp.port
            err = KafkaError(resp.error_code, f"FindCoordinator for group {group_id!r}"
                             + (f": {resp.error_message}" if getattr(resp, "error_message", None) else ""))
            if not err.retriable:
                raise err
            last = err
        except KafkaError as exc:
            if not exc.retriable:
                raise
            last = exc
            cluster.request_update()
        if time.monotonic() + backoff >= deadline:
            raise KafkaTimeoutError(f"coordinator of group {group_id!r} not found ({last})")
        time.sleep(backoff)


class AbstractCoordinator:
    """One member of ``group.id`` (config ``group.id``, ``group.instance.id``,
    ``session.timeout.ms``, ``heartbeat.interval.ms``, ``max.poll.interval.ms`` as the
    rebalance timeout, ``retry.backoff.ms``, ``request.timeout.ms``)."""

    protocol_type: str   # JoinGroup's protocol_type: "consumer", "connect"

    def __init__(self, config: Any, cluster: ClusterMetadata, pool: NodePool) -> None:
        self.config = config
        self.group_id: str = config["group.id"]
        self.group_instance_id: str | None = config["group.instance.id"]
        self.cluster, self.pool = cluster, pool
        self._lock = threading.Condition(threading.RLock())
        self.state = MemberState.UNJOINED
        self.generation = NO_GENERATION
        self.rejoin_needed = True
        self.is_leader = False
        self._coordinator: tuple[int, str, int] | None = None
        self._lookup_not_before = 0.0
        self._conn: BrokerConnection | None = None
        self._inflight: tuple[str, InFlightRequest, float] | None = None  # ("join"|"sync", request, sent at)
        self._prepared = False  # on_join_prepare ran for the current rebalance
        self._closed = False
        self.last_poll = time.monotonic()
        self._last_hb_ok = time.monotonic()
        self._next_hb = 0.0
        self._hb_conn: BrokerConnection | None = None
        self._hb_thread = threading.Thread(target=self._heartbeat_loop, name=f"odradek-heartbeat-{self.group_id}",
                                           daemon=True)
        self._hb_thread.start()

    # -- what a subclass says (called on the member's thread) ----------------------------------

    def join_protocols(self) -> list[tuple[str, bytes]]:
        """(protocol name, member metadata) to join with, in order of preference."""
        raise NotImplementedError

    def on_join_prepare(self, generation_valid: bool) -> None:
        """A rebalance starts: give up what the last assignment gave (before the first JoinGroup)."""

    def perform_assignment(self, leader_id: str, protocol: str,
                           members: list[tuple[str, str | None, bytes]]) -> dict[str, bytes]:
        """The leader's assignment: {member id: assignment bytes} for (member id, instance id, metadata)."""
        raise NotImplementedError

    def on_join_complete(self, generation: Generation, assignment: bytes) -> None:
        """This member's assignment for ``generation`` (the member is STABLE already)."""
        raise NotImplementedError

    # -- coordinator discovery ---------------------------------------------------------------

    @property
    def coordinator_id(self) -> int | None:
        c = self._coordinator
        return None if c is None else c[0]

    def coordinator_unknown(self) -> bool:
        return self._coordinator is None or self._conn is None or not self._conn.connected

    def mark_coordinator_dead(self, why: Any) -> None:
        with self._lock:
            if self._coordinator is not None:
                log.info("group %s: coordinator %s marked dead (%s)", self.group_id, self._coordinator[0], why)
            self._coordinator = None
            conn, self._conn = self._conn, None
            self._lookup_not_before = time.monotonic() + self.config["retry.backoff.ms"] / 1000.0
            self._lock.notify_all()
        if conn is not None:
            conn.close(ConnectionLost(f"coordinator marked dead: {why}"))

    def ensure_coordinator(self, deadline: float) -> bool:
        """Look up and connect to the coordinator; False when ``deadline`` passed first."""
        backoff = self.config["retry.backoff.ms"] / 1000.0
        while self.coordinator_unknown():
            pause = self._lookup_not_before - time.monotonic()
            if pause > 0:  # retry.backoff.ms between losing a coordinator and looking it up again
                if time.monotonic() + pause > deadline:
                    return False
                time.sleep(pause)
            remaining = deadline - time.monotonic()
            try:
                node, host, port = find_coordinator(self.cluster, self.pool, self.group_id,
                                                    max(remaining, 0.001))
                conn = self.cluster.new_connection(host, port, node)
                conn.connect()
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                if time.monotonic() + backoff >= deadline:
                    return False
                time.sleep(backoff)
                continue
            with self._lock:
                old, self._conn = self._conn, conn
                self._coordinator = (node, host, port)
                self._lock.notify_all()
            if old is not None:  # the heartbeat thread dropped the coordinator; fail what was in flight
                old.close(ConnectionLost("coordinator changed"))
        return True

    # -- the rebalance state machine (consumer thread) ----------------------------------------

    def request_rejoin(self) -> None:
        with self._lock:
            self.rejoin_needed = True

    def reset_generation(self, code: ErrorCode | None = None) -> None:
        """Forget the generation (and the member id, unless ``code`` is ILLEGAL_GENERATION); rejoin."""
        with self._lock:
            self.generation = self._after_error(code)
            self.state = MemberState.UNJOINED
            self.rejoin_needed = True
            self.is_leader = False

    def _after_error(self, code: ErrorCode | None) -> Generation:
        if code == ErrorCode.ILLEGAL_GENERATION:  # keep the member id: the coordinator still knows it
            return Generation(-1, self.generation.member_id, None)
        return NO_GENERATION

    def stable(self) -> bool:
        return self.state == MemberState.STABLE and not self.rejoin_needed

    def poll(self, deadline: float) -> bool:
        """Drive coordinator lookup and (re)joining until stable or ``deadline``; True when stable."""
        with self._lock:
            self.last_poll = time.monotonic()
        self.poll_io()
        while True:
            if self.coordinator_unknown():
                self._inflight = None
                stable = self.stable()
                # a stable member keeps fetching while it looks for the coordinator (one try per poll)
                if not self.ensure_coordinator(time.monotonic() if stable else deadline):
                    return stable
            if self.stable() and self._inflight is None:
                return True
            if self._inflight is None:
                self._start_join()
            elif self._inflight[1].done:
                self._complete_inflight()
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._wait(min(remaining, 0.5))
            self._check_inflight_timeout()

    def _start_join(self) -> None:
        if not self._prepared:
            with self._lock:
                generation_valid = self.generation.generation_id >= 0
            self.on_join_prepare(generation_valid)
            self._prepared = True
            with self._lock:
                self.state = MemberState.REBALANCING
                self.rejoin_needed = False
        protocols = [{"name": name, "metadata": metadata} for name, metadata in self.join_protocols()]
        conn = self._conn
        assert conn is not None
        try:
            version = conn.version_for(_join_group, _join_group.MAX_VERSION)
        except KafkaError as exc:
            raise KafkaError(exc.code, f"broker cannot join groups: {exc}") from None
        body = {"group_id": self.group_id, "session_timeout_ms": self.config["session.timeout.ms"],
                "rebalance_timeout_ms": self.config["max.poll.interval.ms"],
                "member_id": self.generation.member_id, "group_instance_id": self.group_instance_id,
                "protocol_type": self.protocol_type, "protocols": protocols}
        self._send("join", _join_group, body, version)

    def _send(self, kind: str, api: Any, body: dict, version: int) -> None:
        conn = self._conn
        try:
            req = conn.send(api, body, version=version)  # type: ignore[union-attr]
        except KafkaError as exc:
            self.mark_coordinator_dead(exc)
            return
        self._inflight = (kind, req, time.monotonic())

    def _check_inflight_timeout(self) -> None:
        if self._inflight is None or self._inflight[1].done:
            return
        kind, _req, sent = self._inflight
        limit = self.config["request.timeout.ms"] / 1000.0
        if kind == "join":
            limit = max(limit, self.config["max.poll.interval.ms"] / 1000.0 + 5.0)
        if time.monotonic() - sent > limit:
            self.mark_coordinator_dead(f"{kind} request timed out")
            self._inflight = None

    def _complete_inflight(self) -> None:
        kind, req, _ = self._inflight  # type: ignore[misc]
        self._inflight = None
        if req.error is not None:
            self.mark_coordinator_dead(req.error)
            return
        if kind == "join":
            self._on_join_response(req.response, req.version)
        else:
            self._on_sync_response(req.response)

    def _on_join_response(self, resp: Any, version: int) -> None:
        code = ErrorCode(resp.error_code)
        if code == ErrorCode.NONE:
            with self._lock:
                self.generation = Generation(resp.generation_id, resp.member_id, resp.protocol_name)
                self.is_leader = resp.leader == resp.member_id
            log.info("group %s: joined generation %s as %s%s", self.group_id, resp.generation_id,
                     resp.member_id, " (leader)" if self.is_leader else "")
            assignments = []
            if self.is_leader:
                members = [(m.member_id, getattr(m, "group_instance_id", None), bytes(m.metadata))
                           for m in resp.members]
                assignments = [{"member_id": m, "assignment": a}
                               for m, a in self.perform_assignment(resp.member_id, resp.protocol_name,
                                                                   members).items()]
            conn = self._conn
            if conn is None:
                return
            body = {"group_id": self.group_id, "generation_id": resp.generation_id, "member_id": resp.member_id,
                    "group_instance_id": self.group_instance_id, "protocol_type": self.protocol_type,
                    "protocol_name": resp.protocol_name, "assignments": assignments}
            self._send("sync", _sync_group, body, conn.version_for(_sync_group, _sync_group.MAX_VERSION))
        elif code == ErrorCode.MEMBER_ID_REQUIRED:
            with self._lock:
                self.generation = Generation(-1, resp.member_id, None)
        elif code in RESET_ERRORS:
            with self._lock:
                self.generation = self._after_error(code)
        elif code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REBALANCE_IN_PROGRESS):
            time.sleep(self.config["retry.backoff.ms"] / 1000.0)
        elif code in COORDINATOR_ERRORS:
            self.mark_coordinator_dead(code.name)
        elif code in _FATAL_JOIN or not code.retriable:
            self._prepared = False
            with self._lock:
                self.state = MemberState.UNJOINED
                self.rejoin_needed = True
            raise KafkaError(code, f"JoinGroup of group {self.group_id!r} failed")
        # anything else: the next poll() sends JoinGroup again

    def _on_sync_response(self, resp: Any) -> None:
        code = ErrorCode(resp.error_code)
        if code == ErrorCode.NONE:
            with self._lock:
                generation = self.generation
                self.state = MemberState.STABLE
                self._last_hb_ok = time.monotonic()
                self._next_hb = time.monotonic() + self.config["heartbeat.interval.ms"] / 1000.0
                self._lock.notify_all()
            self._prepared = False
            try:
                self.on_join_complete(generation, bytes(resp.assignment))
            except BaseException:
                self.request_rejoin()   # an assignment this member cannot take: join again
                raise
        elif code == ErrorCode.REBALANCE_IN_PROGRESS:
            pass  # rejoin with the same member id
        elif code in RESET_ERRORS or code == ErrorCode.FENCED_INSTANCE_ID:
            with self._lock:
                self.generation = self._after_error(code)
        elif code in COORDINATOR_ERRORS:
            self.mark_coordinator_dead(code.name)
        else:
            raise KafkaError(code, f"SyncGroup of group {self.group_id!r} failed")

    # -- I/O on the coordinator connection (consumer thread) -----------------------------------

    def _wait(self, timeout: float) -> None:
        conn = self._conn
        if conn is None or not conn.connected:
            time.sleep(min(timeout, 0.05))
            return
        try:
            ready, _, _ = select.select([conn.fileno()], [], [], max(timeout, 0))
        except (OSError, ValueError):
            return
        if ready:
            conn.read_responses()

    def poll_io(self) -> None:
        """Complete whatever responses (async commits) the coordinator connection has ready."""
        conn = self._conn
        if conn is not None and conn.connected and conn.in_flight:
            self._wait(0)

    def _request(self, api: Any, body: dict, deadline: float) -> Any:
        """One blocking request to the coordinator (discovering it first)."""
        if not self.ensure_coordinator(deadline):
            raise KafkaTimeoutError(f"coordinator of group {self.group_id!r} not available")
        conn = self._conn
        assert conn is not None
        try:
            return conn.request(api, body, version=conn.version_for(api, api.MAX_VERSION),
                                timeout=max(0.001, min(deadline - time.monotonic(),
                                                       self.config["request.timeout.ms"] / 1000.0)))
        except KafkaError as exc:
            if exc.retriable:
                self.mark_coordinator_dead(exc)
            raise

    # -- leaving -----------------------------------------------------------------------------

    def _leave_body(self, member_id: str) -> dict:
        return {"group_id": self.group_id, "member_id": member_id,
                "members": [{"member_id": member_id, "group_instance_id": self.group_instance_id}]}

    def maybe_leave_group(self, reason: str) -> None:
        """Send LeaveGroup (dynamic members only) and reset the generation."""
        with self._lock:
            generation = self.generation
            self._inflight = None
        if generation.member_id and self.group_instance_id is None and not self.coordinator_unknown():
            log.info("group %s: member %s leaving (%s)", self.group_id, generation.member_id, reason)
            try:
                self._request(_leave_group, self._leave_body(generation.member_id),
                              time.monotonic() + self.config["request.timeout.ms"] / 1000.0)
            except KafkaError as exc:
                log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        self.reset_generation()
        self._prepared = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        self._hb_thread.join(timeout=5)
        for conn in (self._conn, self._hb_conn):
            if conn is not None:
                conn.close()
        self._conn = self._hb_conn = None

    # -- heartbeat thread --------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        session = self.config["session.timeout.ms"] / 1000.0
        interval = self.config["heartbeat.interval.ms"] / 1000.0
        max_poll = self.config["max.poll.interval.ms"] / 1000.0
        backoff = self.config["retry.backoff.ms"] / 1000.0
        while True:
            with self._lock:
                if self._closed:
                    return
                if self.state != MemberState.STABLE or self._coordinator is None:
                    self._lock.wait(0.1)
                    continue
                now = time.monotonic()
                generation, coordinator = self.generation, self._coordinator
                if now - self.last_poll > max_poll:
                    action = "leave"
                    self.generation = NO_GENERATION
                    self.state = MemberState.UNJOINED
                    self.rejoin_needed = True
                elif now - self._last_hb_ok > session:
                    action = "dead"
                elif now < self._next_hb:
                    self._lock.wait(min(self._next_hb - now, max(0.0, self.last_poll + max_poll - now) + 0.01))
                    continue
                else:
                    action = "beat"
                    self._next_hb = now + interval
            if action == "dead":
                log.info("group %s: no heartbeat answer within session.timeout.ms; rediscovering the "
                         "coordinator", self.group_id)
                with self._lock:
                    self._coordinator = None  # the consumer thread rediscovers it
                    self._last_hb_ok = time.monotonic()
                continue
            try:
                conn = self._hb_connection(coordinator)
                if action == "leave":
                    log.warning("group %s: poll() not called within max.poll.interval.ms; leaving the group",
                                self.group_id)
                    if self.group_instance_id is None:
                        conn.request(_leave_group, self._leave_body(generation.member_id),
                                     version=conn.version_for(_leave_group, _leave_group.MAX_VERSION))
                    continue
                api, body = self.heartbeat_request(generation)
                resp = conn.request(api, body, version=conn.version_for(api, api.MAX_VERSION))
                code = ErrorCode(resp.error_code)
            except KafkaError as exc:
                code = exc.code if not isinstance(exc, ConnectionLost) else ErrorCode.NETWORK_EXCEPTION
                self._drop_hb_conn()
                if action == "leave":
                    continue
            self._on_heartbeat(code, generation, backoff)

    def heartbeat_request(self, generation: Generation) -> tuple[Any, dict]:
        """The Heartbeat this member sends for ``generation``: (API module, request body)."""
        return _heartbeat, {"group_id": self.group_id, "generation_id": generation.generation_id,
                            "member_id": generation.member_id, "group_instance_id": self.group_instance_id}

    def _on_heartbeat(self, code: ErrorCode, generation: Generation, backoff: float) -> None:
        with self._lock:
            if self.generation != generation or self.state != MemberState.STABLE:
                return  # stale answer
            if code == ErrorCode.NONE:
                self._last_hb_ok = time.monotonic()
            elif code == ErrorCode.REBALANCE_IN_PROGRESS:
                log.info("group %s: rebalance in progress; rejoining", self.group_id)
                self.rejoin_needed = True
            elif code in RESET_ERRORS or code == ErrorCode.FENCED_INSTANCE_ID:
                log.info("group %s: heartbeat got %s; rejoining", self.group_id, code.name)
                self.generation = self._after_error(code)
                self.state = MemberState.UNJOINED
                self.rejoin_needed = True
            elif code in COORDINATOR_ERRORS or code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                self._next_hb = time.monotonic() + backoff
                if code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    self._coordinator = None  # the consumer thread rediscovers it
            else:
                log.warning("group %s: heartbeat failed: %s", self.group_id, code.name)
                self._next_hb = time.monotonic() + backoff

    def _hb_connection(self, coordinator: tuple[int, str, int]) -> BrokerConnection:
        conn = self._hb_conn
        if conn is not None and conn.connected and (conn.host, conn.port) == coordinator[1:]:
            return conn
        self._drop_hb_conn()
        conn = self.cluster.new_connection(coordinator[1], coordinator[2], coordinator[0])
        conn.connect()
        self._hb_conn = conn
        return conn

    def _drop_hb_conn(self) -> None:
        conn, self._hb_conn = self._hb_conn, None
        if conn is not None:
            conn.close()
