"""Cluster metadata as a client sees it: brokers, controller, topic partitions and leaders.

Invariant: ``ClusterMetadata`` is only ever replaced wholesale per topic by a
Metadata response (never patched partition by partition), under its lock, so a
reader sees either the old or the new view of a topic. Refreshes go through one
dedicated connection (to a known broker, else a bootstrap address), never
through the data connections of the producer or consumer. ``NodePool`` holds the
owner's data connections, keyed by broker id, and is used by one thread only.
"""
from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Iterable

from odradek.protocol.apis import metadata as _metadata
from odradek.protocol.errors import ErrorCode, KafkaError

from .config import ClientConfig
from .security import ClientSecurity
from .connection import BrokerConnection, ConnectionLost
from .structs import KafkaTimeoutError


@dataclass(frozen=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error: int = 0


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    error: int
    is_internal: bool = False
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    topic_id: uuid.UUID | None = None   # Metadata v10+; None before, or for the zero id


class ClusterMetadata:
    """Thread-safe metadata cache with refresh through one connection."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.security = ClientSecurity.from_config(config)
        self._bootstrap: list[tuple[str, int]] = list(config["bootstrap.servers"])
        self._lock = threading.RLock()
        self._conn: BrokerConnection | None = None
        self.brokers: dict[int, BrokerMetadata] = {}
        self.controller_id: int = -1
        self.cluster_id: str | None = None
        self.topics: dict[str, TopicMetadata] = {}
        self.tracked: set[str] = set()
        self.last_refresh: float = 0.0
        self.updates = 0  # incremented on every successful refresh
        self._update_requested = True
        self._closed = False

    # -- queries ----------------------------------------------------------------

    def partitions_for(self, topic: str) -> list[int] | None:
        """Partition ids of ``topic`` (sorted), or None when unknown."""
        tm = self.topics.get(topic)
        if tm is None or not tm.partitions:
            return None
        return sorted(tm.partitions)

    def available_partitions(self, topic: str) -> list[int]:
        tm = self.topics.get(topic)
        if tm is None:
            return []
        return sorted(p for p, pm in tm.partitions.items() if pm.leader >= 0)

    def leader_for(self, topic: str, partition: int) -> int:
        """Leader broker id of a partition, -1 when unknown or offline."""
        tm = self.topics.get(topic)
        if tm is None:
            return -1
        pm = tm.partitions.get(partition)
        return -1 if pm is None else pm.leader

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        tm = self.topics.get(topic)
        return None if tm is None else tm.partitions.get(partition)

    def broker(self, node_id: int) -> BrokerMetadata | None:
        return self.brokers.get(node_id)

    # -- refresh ----------------------------------------------------------------

    def request_update(self) -> None:
        """Ask for a refresh at the next ``maybe_refresh``."""
        self._update_requested = True

    def needs_refresh(self) -> bool:
        age = time.monotonic() - self.last_refresh
        if self._update_requested:
            return age * 1000 >= self.config["retry.backoff.ms"] or self.updates == 0
        return age * 1000 >= self.config["metadata.max.age.ms"]

    def maybe_refresh(self) -> bool:
        """Refresh the tracked topics if stale or requested (rate-limited by retry.backoff.ms)."""
        if not self.needs_refresh():
            return False
        try:
            self.refresh()
        except KafkaError:
            self.last_refresh = time.monotonic()  # back off before trying again
            return False
        return True

    def add_topic(self, topic: str) -> None:
        if topic not in self.tracked:
            self.tracked.add(topic)
            self._update_requested = True

    def refresh(self, topics: Iterable[str] | None = None, *, all_topics: bool = False,
                allow_auto_create: bool = True) -> None:
        """One Metadata round trip: ``topics``, else the tracked ones; ``all_topics`` asks for every topic."""
        with self._lock:
            if all_topics:
                names = None
            else:
                names = sorted(set(topics) if topics is not None else self.tracked)
            resp = self._request(names, allow_auto_create)
            self._apply(resp, names)

    def _request(self, names: list[str] | None, allow_auto_create: bool):
        errors: list[str] = []
        for attempt in range(2):
            conn = self._connection(errors)
            version = conn.version_for(_metadata)
            if names is None and version == 0:
                body_topics: list | None = []
            else:
                body_topics = None if names is None else [{"name": n} for n in names]
            body = {"topics": body_topics, "allow_auto_topic_creation": allow_auto_create}
            try:
                return conn.request(_metadata, body, version=version)
            except KafkaError as exc:
                errors.append(f"{conn.host}:{conn.port}: {exc}")
                conn.close()
                self._conn = None
        raise ConnectionLost("metadata request failed: " + "; ".join(errors[-3:]))

    def _connection(self, errors: list[str]) -> BrokerConnection:
        if self._closed:
            raise KafkaError(ErrorCode.NETWORK_EXCEPTION, "client is closed")
        if self._conn is not None and self._conn.connected:
            return self._conn
        candidates = [(b.host, b.port, b.node_id) for b in self.brokers.values()]
        random.shuffle(candidates)
        boot = [(h, p, -1) for h, p in self._bootstrap]
        random.shuffle(boot)
        for host, port, node_id in candidates + boot:
            conn = self.new_connection(host, port, node_id)
            try:
                conn.connect()
            except KafkaError as exc:
                if exc.code in (ErrorCode.SASL_AUTHENTICATION_FAILED, ErrorCode.UNSUPPORTED_SASL_MECHANISM):
                    raise    # another broker would refuse the same credentials: no retry
                errors.append(f"{host}:{port}: {exc}")
                continue
            self._conn = conn
            return conn
        raise ConnectionLost("no broker reachable (" + "; ".join(errors[-3:]) + ")")

    def new_connection(self, host: str, port: int, node_id: int = -1) -> BrokerConnection:
        cfg = self.config
        return BrokerConnection(
            host, port, node_id=node_id, client_id=cfg["client.id"],
            request_timeout_ms=cfg["request.timeout.ms"],
            connect_timeout_ms=cfg["socket.connection.setup.timeout.ms"],
            send_buffer_bytes=cfg["send.buffer.bytes"], receive_buffer_bytes=cfg["receive.buffer.bytes"],
            security=self.security, max_idle_ms=cfg["connections.max.idle.ms"])

    def _apply(self, resp, names: list[str] | None) -> None:
        self.brokers = {b.node_id: BrokerMetadata(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
        self.controller_id = resp.controller_id
        self.cluster_id = resp.cluster_id
        topics = dict(self.topics) if names is not None else {}
        for t in resp.topics:
            parts = {
                p.partition_index: PartitionMetadata(
                    t.name, p.partition_index, p.leader_id, p.leader_epoch,
                    tuple(p.replica_nodes), tuple(p.isr_nodes), tuple(p.offline_replicas), p.error_code)
                for p in t.partitions
            }
            topic_id = t.get("topic_id")
            topics[t.name] = TopicMetadata(t.name, t.error_code, t.is_internal, parts,
                                           topic_id if topic_id is not None and topic_id.int else None)
        self.topics = topics
        self.last_refresh = time.monotonic()
        self.updates += 1
        self._update_requested = False

    def wait_for_topic(self, topic: str, timeout_s: float) -> list[int]:
        """Partition ids of ``topic``, refreshing (auto-create happens broker side) until ``timeout_s``."""
        self.add_topic(topic)
        deadline = time.monotonic() + timeout_s
        backoff = self.config["retry.backoff.ms"] / 1000.0
        last_error: KafkaError | None = None
        while True:
            parts = self.partitions_for(topic)
            if parts:
                return parts
            try:
                self.refresh()
                tm = self.topics.get(topic)
                if tm is not None and tm.error in (ErrorCode.INVALID_TOPIC_EXCEPTION,
                                                   ErrorCode.TOPIC_AUTHORIZATION_FAILED):
                    raise KafkaError(tm.error, topic)
                parts = self.partitions_for(topic)
                if parts:
                    return parts
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                last_error = exc
            if time.monotonic() + backoff > deadline:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                 f"topic {topic!r} not present in metadata after {timeout_s * 1000:.0f} ms"
                                 + (f" ({last_error})" if last_error else ""))
            time.sleep(backoff)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class NodePool:
    """Data connections by broker id (lazily connected); single-threaded."""

    def __init__(self, cluster: ClusterMetadata) -> None:
        self.cluster = cluster
        self.conns: dict[int, BrokerConnection] = {}
        self._failed_at: dict[int, float] = {}

    def get(self, node_id: int) -> BrokerConnection:
        """A connected connection to ``node_id``; raises ConnectionLost (retriable)."""
        conn = self.conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        backoff = self.cluster.config["reconnect.backoff.ms"] / 1000.0
        failed = self._failed_at.get(node_id)
        if failed is not None and time.monotonic() - failed < backoff:
            raise ConnectionLost(f"node {node_id} in reconnect backoff")
        broker = self.cluster.broker(node_id)
        if broker is None:
            raise ConnectionLost(f"node {node_id} not in metadata")
        conn = self.cluster.new_connection(broker.host, broker.port, node_id)
        try:
            conn.connect()
        except KafkaError:
            self._failed_at[node_id] = time.monotonic()
            self.conns.pop(node_id, None)
            self.cluster.request_update()
            raise
        self._failed_at.pop(node_id, None)
        self.conns[node_id] = conn
        return conn

    def drop(self, node_id: int, error: KafkaError | None = None) -> None:
        conn = self.conns.pop(node_id, None)
        if conn is not None:
            conn.close(error)
        self._failed_at[node_id] = time.monotonic()

    def close(self) -> None:
        conns, self.conns = list(self.conns.values()), {}
        for conn in conns:
            conn.close()

    def call(self, api: ModuleType, body: dict[str, Any], nodes: Callable[[], Iterable[int]],
             timeout_s: float, backoff_s: float, version: Callable[[BrokerConnection], int] | None = None,
             moved: Callable[[Any], str | None] | None = None) -> Any:
        """One admin request, retried until ``timeout_s``: after a metadata refresh each of
        ``nodes()`` is tried in turn; a retriable error (a lost connection) drops that node's
        connection and goes on, any other raises. ``moved(response)`` names why an answer came
        from the wrong broker (NOT_CONTROLLER), which is retried the same way."""
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while True:
            try:
                self.cluster.refresh([])
            except KafkaError as exc:
                last = exc
            for node in nodes():
                try:
                    conn = self.get(node)
                    resp = conn.request(api, body, version=version(conn) if version else conn.version_for(api),
                                        timeout=timeout_s)
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    self.drop(node, exc)
                    last = exc
                    continue
                why = moved(resp) if moved is not None else None
                if why is None:
                    return resp
                last = KafkaError(ErrorCode.NOT_CONTROLLER, f"broker {node}: {why}")
            if time.monotonic() + backoff_s > deadline:
                raise KafkaTimeoutError(f"{api.NAME} did not complete in time ({last})")
            time.sleep(backoff_s)
