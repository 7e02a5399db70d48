"""Worker group membership: JoinGroup/SyncGroup with protocol type ``connect`` and Kafka's
ConnectProtocol v0 (protocol name ``default``, the eager assignor).

Invariant: the member is driven from one thread (the herder's) through
``join(metadata, assign)``, which blocks until this worker has an assignment
for a new generation (or raises when closed); a heartbeat thread with its own
connection only heartbeats in the stable state and only *signals*
(``rejoin_needed``) — it never changes the assignment. Byte formats are Kafka's
``ConnectProtocol`` v0, so the layout is documented by Kafka itself:

- metadata (WorkerState): ``int16 version=0, string url, int64 config_offset``
- assignment: ``int16 version=0, int16 error (0 none, 1 CONFIG_MISMATCH),
  string leader, string leader_url, int64 config_offset,
  array[string connector, array[int32 task]]`` — task ``-1`` is the connector itself.
"""
from __future__ import annotations

import logging
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from odradek.client import ErrorCode, KafkaError
from odradek.client.cluster import ClusterMetadata, NodePool
from odradek.client.config import ClientConfig
from odradek.client.group_membership import find_coordinator
from odradek.protocol.apis import heartbeat as _heartbeat
from odradek.protocol.apis import join_group as _join_group
from odradek.protocol.apis import leave_group as _leave_group
from odradek.protocol.apis import sync_group as _sync_group

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "connect"
PROTOCOL_NAME = "default"
CONNECTOR_TASK = -1
NO_ERROR, CONFIG_MISMATCH = 0, 1

_H, _I, _Q = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_COORD_ERRORS = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION,
                 ErrorCode.REQUEST_TIMED_OUT, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


def _s(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _H.pack(len(raw)) + raw


class _R:
    def __init__(self, data: bytes) -> None:
        self.d, self.p = bytes(data), 0

    def take(self, st: struct.Struct) -> int:
        if self.p + st.size > len(self.d):
            raise ValueError("truncated ConnectProtocol data")
        (v,) = st.unpack_from(self.d, self.p)
        self.p += st.size
        return v

    def string(self) -> str:
        n = self.take(_H)
        if n < 0 or self.p + n > len(self.d):
            raise ValueError("bad string in ConnectProtocol data")
        out = self.d[self.p:self.p + n].decode("utf-8")
        self.p += n
        return out


@dataclass
class WorkerState:
    url: str
    config_offset: int
    version: int = 0

    def encode(self) -> bytes:
        return _H.pack(self.version) + _s(self.url) + _Q.pack(self.config_offset)

    @classmethod
    def decode(cls, data: bytes) -> "WorkerState":
        r = _R(data)
        version = r.take(_H)
        return cls(r.string(), r.take(_Q), version)


@dataclass
class ConnectAssignment:
    error: int
    leader: str
    leader_url: str
    config_offset: int
    connectors: list[str] = field(default_factory=list)
    tasks: list[tuple[str, int]] = field(default_factory=list)
    version: int = 0

    def encode(self) -> bytes:
        by_conn: dict[str, list[int]] = {}
        for c in self.connectors:
            by_conn.setdefault(c, []).append(CONNECTOR_TASK)
        for c, t in self.tasks:
            by_conn.setdefault(c, []).append(t)
        out = [_H.pack(self.version), _H.pack(self.error), _s(self.leader), _s(self.leader_url),
               _Q.pack(self.config_offset), _I.pack(len(by_conn))]
        for c, ts in by_conn.items():
            out += [_s(c), _I.pack(len(ts))] + [_I.pack(t) for t in ts]
        return b"".join(out)

    @classmethod
    def decode(cls, data: bytes) -> "ConnectAssignment":
        r = _R(data)
        version = r.take(_H)
        a = cls(r.take(_H), r.string(), r.string(), r.take(_Q), version=version)
        for _ in range(max(r.take(_I), 0)):
            conn = r.string()
            for _ in range(max(r.take(_I), 0)):
                t = r.take(_I)
                if t == CONNECTOR_TASK:
                    a.connectors.append(conn)
                else:
                    a.tasks.append((conn, t))
        return a


def eager_assign(members: list[str], connectors: list[str], tasks: list[tuple[str, int]]
                 ) -> dict[str, tuple[list[str], list[tuple[str, int]]]]:
    """Kafka's eager round robin: connectors, then tasks, over the members sorted by id."""
    order = sorted(members)
    out: dict[str, tuple[list[str], list[tuple[str, int]]]] = {m: ([], []) for m in order}
    i = 0
    for c in sorted(connectors):
        out[order[i % len(order)]][0].append(c)
        i += 1
    for t in sorted(tasks):
        out[order[i % len(order)]][1].append(t)
        i += 1
    return out


@dataclass
class JoinResult:
    generation: int
    member_id: str
    leader_id: str
    assignment: ConnectAssignment


class WorkerGroupMember:
    """This worker's membership in ``group.id``."""

    def __init__(self, wc: Any, on_rejoin_needed: Callable[[], None]) -> None:
        self.wc = wc
        self.group_id: str = wc.group_id
        self.config = ClientConfig("consumer", {
            **{k: v for k, v in wc.consumer_props().items() if k in ("bootstrap.servers",)},
            "group.id": wc.group_id, "session.timeout.ms": wc.session_timeout_ms,
            "heartbeat.interval.ms": wc.heartbeat_interval_ms, "max.poll.interval.ms": wc.rebalance_timeout_ms,
            "client.id": f"connect-{wc.worker_id}"})
        self.cluster = ClusterMetadata(self.config)
        self.pool = NodePool(self.cluster)
        self.on_rejoin_needed = on_rejoin_needed
        self.member_id = ""
        self.generation = -1
        self.stable = False
        self.rejoin_needed = True
        self.closed = False
        self.lock = threading.Condition()
        self._conn: Any = None
        self._coordinator: tuple[int, str, int] | None = None
        self._hb = threading.Thread(target=self._heartbeat_loop, name="connect-heartbeat", daemon=True)
        self._hb.start()

    # -- coordinator ---------------------------------------------------------------------------

    def _connection(self) -> Any:
        if self._conn is not None and self._conn.connected:
            return self._conn
        node, host, port = find_coordinator(self.cluster, self.pool, self.group_id, 30.0)
        conn = self.cluster.new_connection(host, port, node)
        conn.connect()
        self._conn, self._coordinator = conn, (node, host, port)
        return conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        self.cluster.request_update()

    # -- join ------------------------------------------------------------------------------------

    def join(self, metadata: bytes, assign: Callable[[str, list[tuple[str, bytes]]], dict[str, bytes]]
             ) -> JoinResult:
        """JoinGroup + SyncGroup until this worker holds an assignment (``assign`` runs on the leader)."""
        with self.lock:
            self.stable = False
            self.rejoin_needed = False
        backoff = self.config["retry.backoff.ms"] / 1000.0
        rebalance_s = self.wc.rebalance_timeout_ms / 1000.0
        while not self.closed:
            try:
                conn = self._connection()
                body = {"group_id": self.group_id, "session_timeout_ms": self.wc.session_timeout_ms,
                        "rebalance_timeout_ms": self.wc.rebalance_timeout_ms, "member_id": self.member_id,
                        "group_instance_id": None, "protocol_type": PROTOCOL_TYPE,
                        "protocols": [{"name": PROTOCOL_NAME, "metadata": metadata}]}
                resp = conn.request(_join_group, body, version=conn.version_for(_join_group, _join_group.MAX_VERSION),
                                    timeout=rebalance_s + 15)
            except KafkaError as exc:
                log.info("group %s: JoinGroup failed (%s); retrying", self.group_id, exc)
                self._drop()
                time.sleep(backoff)
                continue
            code = ErrorCode(resp.error_code)
            if code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                self.member_id = "" if code == ErrorCode.UNKNOWN_MEMBER_ID else self.member_id
                continue
            if code in _COORD_ERRORS:
                self._drop()
                time.sleep(backoff)
                continue
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                time.sleep(backoff)
                continue
            if code != ErrorCode.NONE:
                raise KafkaError(code, f"JoinGroup of Connect group {self.group_id!r} failed")
            self.member_id = resp.member_id
            assignments = []
            if resp.leader == resp.member_id:
                members = [(m.member_id, bytes(m.metadata)) for m in resp.members]
                assignments = [{"member_id": m, "assignment": a} for m, a in assign(resp.member_id, members).items()]
            try:
                sync = conn.request(_sync_group, {
                    "group_id": self.group_id, "generation_id": resp.generation_id, "member_id": resp.member_id,
                    "group_instance_id": None, "protocol_type": PROTOCOL_TYPE, "protocol_name": PROTOCOL_NAME,
                    "assignments": assignments}, version=conn.version_for(_sync_group, _sync_group.MAX_VERSION),
                    timeout=rebalance_s + 15)
            except KafkaError as exc:
                log.info("group %s: SyncGroup failed (%s); rejoining", self.group_id, exc)
                self._drop()
                continue
            scode = ErrorCode(sync.error_code)
            if scode == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if scode in _COORD_ERRORS:
                self._drop()
                continue
            if scode != ErrorCode.NONE:  # REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION: join again
                continue
            assignment = ConnectAssignment.decode(sync.assignment)
            with self.lock:
                self.generation = resp.generation_id
                self.stable = not self.rejoin_needed
                self.lock.notify_all()
            log.info("group %s: joined generation %d as %s (leader %s)", self.group_id, resp.generation_id,
                     resp.member_id, resp.leader)
            return JoinResult(resp.generation_id, resp.member_id, resp.leader, assignment)
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "group member closed")

    def request_rejoin(self) -> None:
        with self.lock:
            self.rejoin_needed = True
            self.stable = False
            self.lock.notify_all()
        self.on_rejoin_needed()

    # -- heartbeats --------------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        conn = None
        interval = self.wc.heartbeat_interval_ms / 1000.0
        session = self.wc.session_timeout_ms / 1000.0
        last_ok = time.monotonic()
        hb_cluster = ClusterMetadata(self.config)
        hb_pool = NodePool(hb_cluster)
        while True:
            with self.lock:
                if self.closed:
                    break
                if not self.stable:
                    self.lock.wait(0.2)
                    last_ok = time.monotonic()
                    continue
                generation, member_id = self.generation, self.member_id
                self.lock.wait(interval)
                if self.closed or not self.stable or generation != self.generation:
                    continue
            try:
                if conn is None or not conn.connected:
                    node, host, port = find_coordinator(hb_cluster, hb_pool, self.group_id, min(session, 5.0))
                    conn = hb_cluster.new_connection(host, port, node)
                    conn.connect()
                resp = conn.request(_heartbeat, {"group_id": self.group_id, "generation_id": generation,
                                                 "member_id": member_id, "group_instance_id": None},
                                    version=conn.version_for(_heartbeat, _heartbeat.MAX_VERSION), timeout=interval + 5)
                code = ErrorCode(resp.error_code)
            except KafkaError as exc:
                code = ErrorCode.NETWORK_EXCEPTION
                log.info("group %s: heartbeat failed: %s", self.group_id, exc)
                if conn is not None:
                    conn.close()
                conn = None
            if code == ErrorCode.NONE:
                last_ok = time.monotonic()
                continue
            if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS):
                log.info("group %s: heartbeat got %s; rejoining", self.group_id, code.name)
                if code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                self.request_rejoin()
            elif code in _COORD_ERRORS:
                if conn is not None:
                    conn.close()
                conn = None
                if time.monotonic() - last_ok > session:
                    self.request_rejoin()
        if conn is not None:
            conn.close()
        hb_pool.close()
        hb_cluster.close()

    def leave(self) -> None:
        if self.member_id and self._conn is not None:
            try:
                self._conn.request(_leave_group, {"group_id": self.group_id, "member_id": self.member_id,
                                                  "members": [{"member_id": self.member_id,
                                                               "group_instance_id": None}]},
                                   version=self._conn.version_for(_leave_group, _leave_group.MAX_VERSION),
                                   timeout=5)
            except KafkaError as exc:
                log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.stable = False
            self.lock.notify_all()
        self._hb.join(10)
        self._drop()
        self.pool.close()
        self.cluster.close()
