"""Helpers for the consumer-group integration tests: member processes, raw group
requests, producing, waiting on conditions.

Invariant: every member process is started through ``Members`` and stopped by PID
(SIGTERM, then SIGKILL) when the test ends, also on failure; every wait polls a
condition with a deadline, never a fixed sleep.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from odradek import testing
from odradek.testing import wait_until

MEMBER_SCRIPT = str(Path(__file__).with_name("group_member.py"))
CLIENTS = ["kafka-python", "confluent-kafka", "aiokafka"]

# broker settings for fast, deterministic group tests
GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "offsets.topic.num.partitions": 10,
}


# ------------------------------------------------------------------ raw requests

def request(port: int, api: Any, version: int, body: dict, timeout: float = 5.0) -> Any | None:
    """One request to 127.0.0.1:port; the decoded response, or None if the broker can't answer."""
    from odradek.protocol.header import decode_response, encode_request
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            frame = encode_request(api, version, 1, "group-tests", body)
            sock.sendall(len(frame).to_bytes(4, "big") + frame)
            size = int.from_bytes(_recv(sock, 4), "big")
            _, resp = decode_response(api, version, _recv(sock, size))
            return resp
    except (OSError, ValueError):
        return None


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf


def live_ports(cluster) -> list[int]:
    return [b.port for b in cluster.brokers.values() if b.pid is not None]


def find_coordinator(cluster, group: str) -> int | None:
    """The coordinator's broker id, as a live broker answers FindCoordinator (None: not yet)."""
    from odradek.protocol.apis import find_coordinator as fc
    for port in live_ports(cluster):
        resp = request(port, fc, 2, {"key": group, "key_type": 0})
        if resp is not None and resp.error_code == 0:
            return resp.node_id
    return None


def wait_for_coordinator(cluster, group: str, timeout: float = 90.0) -> int:
    """Wait until the group has a coordinator that answers OffsetFetch without error."""
    from odradek.protocol.apis import offset_fetch
    def ready():
        node = find_coordinator(cluster, group)
        if node is None or cluster.brokers[node].pid is None:
            return None
        resp = request(cluster.brokers[node].port, offset_fetch, 5, {"group_id": group, "topics": None})
        return node if resp is not None and resp.error_code == 0 else None
    return wait_until(ready, timeout, f"a coordinator for group {group}")


def committed(cluster, group: str, topic: str, partitions: int) -> dict[int, int] | None:
    """{partition: committed offset} from the group's coordinator (None if it can't answer)."""
    from odradek.protocol.apis import offset_fetch
    node = find_coordinator(cluster, group)
    if node is None or cluster.brokers[node].pid is None:
        return None
    resp = request(cluster.brokers[node].port, offset_fetch, 5, {
        "group_id": group, "topics": [{"name": topic, "partition_indexes": list(range(partitions))}]})
    if resp is None or resp.error_code != 0:
        return None
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code != 0:
                return None
            out[p.partition_index] = p.committed_offset
    return out


def create_topic(cluster, topic: str, partitions: int, rf: int = 3, configs: dict | None = None) -> None:
    """odradek.testing.create_topic, waiting for leaders on every live broker of ``cluster``."""
    testing.create_topic(cluster.bootstrap_servers, topic, partitions, rf, configs,
                         brokers=[f"127.0.0.1:{port}" for port in live_ports(cluster)])


def produce(cluster, topic: str, values: list[str], keys: list[str] | None = None,
            partitions: int | None = None) -> None:
    """Send values (round-robin over ``partitions`` if given) with acks=all; waits for every ack."""
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5,
                             retries=10, retry_backoff_ms=200, request_timeout_ms=10000)
    try:
        futures = []
        for i, v in enumerate(values):
            key = keys[i].encode() if keys else None
            part = i % partitions if partitions else None
            futures.append(producer.send(topic, value=v.encode(), key=key, partition=part))
        producer.flush(60)
        for f in futures:
            f.get(timeout=60)
    finally:
        producer.close(10)


# ------------------------------------------------------------------ members

class Member:
    def __init__(self, client: str, cluster, group: str, topic: str, out: Path, name: str,
                 commit: str = "none", session_ms: int = 6000, delay_ms: float = 0.0, batch: int = 100):
        self.client, self.cluster, self.group, self.topic = client, cluster, group, topic
        self.out, self.name = out, name
        self.args = ["--name", name, "--commit", commit, "--session-ms", str(session_ms),
                     "--delay-ms", str(delay_ms), "--batch", str(batch)]
        self.proc: subprocess.Popen | None = None
        self.log = out.with_suffix(".log")

    def start(self) -> "Member":
        cmd = [sys.executable, MEMBER_SCRIPT, self.client, self.cluster.bootstrap_servers, self.group,
               self.topic, str(self.out), *self.args]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         close_fds=True)
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def events(self, kind: str | None = None) -> list[dict]:
        if not self.out.exists():
            return []
        out = []
        for line in self.out.read_text().splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue   # a line cut by SIGKILL
            if kind is None or ev["e"] == kind:
                out.append(ev)
        return out

    def assignment(self) -> list[int] | None:
        """The member's current assignment (None until it has one, or if it is dead)."""
        if not self.alive:
            return None
        assigns = self.events("assign")
        return assigns[-1]["parts"] if assigns else None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)

    def tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


class Members:
    """Starts members and stops every one of them (by PID) at the end."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.all: list[Member] = []

    def start(self, client: str, cluster, group: str, topic: str, name: str | None = None,
              **kw: Any) -> Member:
        name = name or f"m{len(self.all)}"
        m = Member(client, cluster, group, topic, self.tmp / f"{name}.jsonl", name, **kw)
        self.all.append(m)
        return m.start()

    def stop_all(self) -> None:
        for m in self.all:
            if m.alive:
                m.proc.send_signal(signal.SIGTERM)
        for m in self.all:
            m.kill()

    def dump(self) -> str:
        return "\n".join(f"--- member {m.name} ({m.client}):\n{m.tail()}" for m in self.all)


def balanced(members: list[Member], partitions: int) -> dict[str, list[int]] | None:
    """{member: partitions} if the live ``members`` own every partition exactly once with sizes
    differing by at most one, else None."""
    for m in members:
        if not m.alive:
            raise AssertionError(f"member {m.name} exited:\n{m.tail()}")
    got = {m.name: m.assignment() for m in members}
    if any(a is None for a in got.values()):
        return None
    flat = sorted(p for a in got.values() for p in a)
    sizes = [len(a) for a in got.values()]
    if flat != list(range(partitions)) or max(sizes) - min(sizes) > 1:
        return None
    return got


def env_pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
