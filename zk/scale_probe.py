"""What ``odradek perf scale`` reads from a running cluster: raw Metadata views, CreateTopics, RSS.

Invariant: read-only except ``create_topics`` (which sends exactly the CreateTopics requests it
is asked to); every request is one blocking round trip on its own socket to one broker,
encoded and decoded by odradek's protocol codec, so a figure is what that broker answered,
never a client library's cache. A broker that cannot answer yields None (the caller waits on a
condition), never a guess.
"""
from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from odradek.protocol.apis import create_topics as create_topics_api
from odradek.protocol.apis import metadata
from odradek.protocol.errors import ErrorCode
from odradek.protocol.header import decode_response, encode_request

HOST = "127.0.0.1"
METADATA_VERSION = 8     # the brief's "Metadata v8+": what Kafka 2.8's Java clients send is v9-11
CREATE_TOPICS_VERSION = 4


class ScaleError(RuntimeError):
    """A step of the scale run failed or timed out; the message says which and why."""


@dataclass
class PartitionState:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass
class View:
    """One broker's Metadata answer for all topics."""
    controller: int
    brokers: set[int]
    partitions: dict[tuple[str, int], PartitionState] = field(default_factory=dict)

    def leaders(self) -> dict[int, int]:
        """Broker id -> how many partitions it leads."""
        counts: dict[int, int] = {}
        for p in self.partitions.values():
            counts[p.leader] = counts.get(p.leader, 0) + 1
        return counts


class Conn:
    """One blocking connection to one broker (reconnects after an error)."""

    def __init__(self, port: int, timeout: float = 60.0):
        self.port = port
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.correlation = 0
        self.last_size = 0     # bytes of the last response frame

    def request(self, api: ModuleType, version: int, body: dict[str, Any]) -> Any:
        return self.decode(api, version, self.exchange(api, version, body))

    def exchange(self, api: ModuleType, version: int, body: dict[str, Any]) -> bytes:
        """One round trip: the request sent, the response frame's bytes received (not decoded)."""
        if self.sock is None:
            self.sock = socket.create_connection((HOST, self.port), timeout=self.timeout)
        self.correlation += 1
        frame = encode_request(api, version, self.correlation, "odradek-perf-scale", body)
        try:
            self.sock.sendall(len(frame).to_bytes(4, "big") + frame)
            size = int.from_bytes(_recv_exactly(self.sock, 4), "big")
            data = _recv_exactly(self.sock, size)
        except OSError:
            self.close()
            raise
        self.last_size = size
        return data

    def decode(self, api: ModuleType, version: int, data: bytes) -> Any:
        correlation, resp = decode_response(api, version, data)
        if correlation != self.correlation:
            self.close()
            raise OSError(f"correlation id {correlation} != {self.correlation}")
        return resp

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise OSError("connection closed")
        got += k
    return bytes(buf)


def metadata_body() -> dict[str, Any]:
    """All topics (null topic list), no auto-creation, no authorized operations."""
    return {"topics": None, "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}


def fetch_view(conn: Conn) -> View | None:
    try:
        resp = conn.request(metadata, METADATA_VERSION, metadata_body())
    except (OSError, ValueError):
        return None
    view = View(resp.controller_id, {b.node_id for b in resp.brokers})
    for t in resp.topics:
        if t.error_code:
            return None
        for p in t.partitions:
            view.partitions[(t.name, p.partition_index)] = PartitionState(
                p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes))
    return view


def time_metadata(conn: Conn, rounds: int) -> tuple[float, int]:
    """Median seconds per all-topics Metadata request over ``rounds`` (after one warm-up), and
    the response size in bytes. A round is the broker's answer on the wire: from the request's
    send to the response's last byte; this client's Python decode of the response is not in it
    (each response is decoded afterwards, so a broken one still fails the run)."""
    conn.request(metadata, METADATA_VERSION, metadata_body())
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        data = conn.exchange(metadata, METADATA_VERSION, metadata_body())
        times.append(time.perf_counter() - t0)
        conn.decode(metadata, METADATA_VERSION, data)
    times.sort()
    return times[len(times) // 2], conn.last_size


def time_list_topics(bootstrap: str, rounds: int, expected: int) -> float | None:
    """Median seconds of librdkafka's list_topics() (None without confluent-kafka)."""
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError:
        return None
    admin = AdminClient({"bootstrap.servers": bootstrap})
    times = []
    for i in range(rounds + 1):
        t0 = time.perf_counter()
        md = admin.list_topics(timeout=60)
        elapsed = time.perf_counter() - t0
        got = sum(len(t.partitions) for name, t in md.topics.items() if not name.startswith("__"))
        if got != expected:
            raise ScaleError(f"librdkafka's list_topics saw {got} partitions, expected {expected}")
        if i:  # the first call includes librdkafka's bootstrap
            times.append(elapsed)
    times.sort()
    return times[len(times) // 2]


def create_topics(conn: Conn, sizes: dict[str, int], rf: int, batch: int, timeout_ms: int) -> None:
    """CreateTopics requests of ``batch`` topics each, one after another; any error but
    REQUEST_TIMED_OUT (created, its leaders not yet everywhere: the caller waits for them) is fatal."""
    names = list(sizes)
    for i in range(0, len(names), batch):
        chunk = names[i:i + batch]
        body = {"topics": [{"name": n, "num_partitions": sizes[n], "replication_factor": rf, "assignments": [],
                            "configs": []} for n in chunk], "timeout_ms": timeout_ms, "validate_only": False}
        resp = conn.request(create_topics_api, CREATE_TOPICS_VERSION, body)
        bad = [(t.name, ErrorCode(t.error_code).name, t.error_message) for t in resp.topics if t.error_code
               and t.error_code != ErrorCode.REQUEST_TIMED_OUT]
        if bad:
            raise ScaleError(f"CreateTopics failed: {bad[:3]}")


def rss_kib(pid: int | None) -> int | None:
    """VmRSS of a live process in KiB, from /proc/<pid>/status."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"
