"""Helpers for the exactly-once integration tests (test_eos_*.py): topics, readers that stop
at an end marker, transaction coordinators, and the consume-transform-produce loop process.

Invariant: every wait polls a condition with a deadline (never a fixed sleep); every loop
process is started through ``Loops`` and stopped by PID (SIGTERM, then SIGKILL) when the
test ends, also on failure; readers report what the client saw, never what we expect.
"""
from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from groups_support import GROUP_OVERRIDES, find_coordinator, live_ports, request, wait_until

LOOP_SCRIPT = str(Path(__file__).with_name("eos_txn_loop.py"))
END = b"__end__"  # non-transactional end marker, written after the records under test

# broker settings: quick group and transaction coordinators on a 3-broker cluster
EOS_OVERRIDES = {
    **GROUP_OVERRIDES,
    "zookeeper.session.timeout.ms": 6000,
    "transaction.state.log.num.partitions": 10,
    # Kafka's name; the coordinator aborts transactions past their timeout this often
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
}

Seen = dict[int, list[tuple[int, bytes | None, bytes]]]  # partition -> [(offset, key, value)]

__all__ = ["EOS_OVERRIDES", "END", "Loops", "Seen", "create_topic", "full_isr", "read_until_end", "txn_coordinator",
           "txn_coordinator_everywhere",
           "wait_until", "write_end_markers", "live_ports", "request",
           "find_coordinator"]


# ------------------------------------------------------------------ topics and leaders

def full_isr(cluster, topic: str, partitions: int) -> bool:
    try:
        return all(cluster.isr(topic, p) == sorted(cluster.brokers) for p in range(partitions))
    except Exception:  # noqa: BLE001 - state znode not written yet
        return False


def create_topic(cluster, topic: str, partitions: int, min_isr: int = 2) -> None:
    """RF 3 (every broker), min.insync.replicas ``min_isr``; waits for leaders and a full ISR."""
    import groups_support
    groups_support.create_topic(cluster, topic, partitions, len(cluster.brokers),
                                {"min.insync.replicas": str(min_isr)})
    wait_until(lambda: full_isr(cluster, topic, partitions), 90, f"{topic}: every replica in the ISR")


def txn_coordinator(cluster, transactional_id: str) -> int | None:
    """The broker id a live broker names as ``transactional_id``'s coordinator (None: not yet)."""
    from odradek.protocol.apis import find_coordinator as fc
    for port in live_ports(cluster):
        resp = request(port, fc, 2, {"key": transactional_id, "key_type": 1})
        if resp is not None and resp.error_code == 0:
            return resp.node_id
    return None


def txn_coordinator_everywhere(cluster, transactional_id: str) -> int | None:
    """The broker id every live broker names as ``transactional_id``'s coordinator (None: one
    has none yet, or they differ: a broker's metadata cache can trail ZooKeeper's leaders)."""
    from odradek.protocol.apis import find_coordinator as fc
    named = set()
    for port in live_ports(cluster):
        resp = request(port, fc, 2, {"key": transactional_id, "key_type": 1})
        named.add(resp.node_id if resp is not None and resp.error_code == 0 else None)
    return named.pop() if len(named) == 1 else None


def write_end_markers(bootstrap: str, topic: str, partitions: int) -> None:
    """One non-transactional ``END`` record per partition, acks=all."""
    import confluent_kafka as ck
    errors: list = []
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "message.timeout.ms": 120000})
    for part in range(partitions):
        p.produce(topic, END, partition=part, on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(150) == 0 and not errors, f"end markers not written: {errors}"


# ------------------------------------------------------------------ readers
# read_until_end(client, bootstrap, topic, partitions, isolation) -> Seen (END excluded):
# every record before the END marker of every partition, as the client delivers it.

def _read_confluent(bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float) -> Seen:
    import confluent_kafka as ck
    seen: Seen = {p: [] for p in range(partitions)}
    ended: set[int] = set()
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"eos-read-{uuid.uuid4().hex[:8]}",
                     "enable.auto.commit": False, "isolation.level": isolation, "auto.offset.reset": "earliest"})
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(ended) < partitions:
            assert time.monotonic() < deadline, \
                f"confluent-kafka ({isolation}) saw no end marker on partitions {sorted(set(seen) - ended)}"
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error() is not None:
                    raise AssertionError(f"confluent-kafka consumer error: {m.error()}")
                _add(seen, ended, m.partition(), m.offset(), m.key(), m.value())
    finally:
        c.close()
    return seen


def _read_kafka_python(bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float) -> Seen:
    from kafka import KafkaConsumer, TopicPartition
    seen: Seen = {p: [] for p in range(partitions)}
    ended: set[int] = set()
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", isolation_level=isolation)
    try:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(ended) < partitions:
            assert time.monotonic() < deadline, \
                f"kafka-python ({isolation}) saw no end marker on partitions {sorted(set(seen) - ended)}"
            for tp, recs in c.poll(timeout_ms=500).items():
                for r in recs:
                    _add(seen, ended, tp.partition, r.offset, r.key, r.value)
    finally:
        c.close()
    return seen


def _read_aiokafka(bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float) -> Seen:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    seen: Seen = {p: [] for p in range(partitions)}
    ended: set[int] = set()

    async def run() -> None:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level=isolation)
        await c.start()
        try:
            c.assign([TopicPartition(topic, p) for p in range(partitions)])
            await c.seek_to_beginning()
            deadline = time.monotonic() + timeout
            while len(ended) < partitions:
                assert time.monotonic() < deadline, \
                    f"aiokafka ({isolation}) saw no end marker on partitions {sorted(set(seen) - ended)}"
                for tp, recs in (await c.getmany(timeout_ms=500)).items():
                    for r in recs:
                        _add(seen, ended, tp.partition, r.offset, r.key, r.value)
        finally:
            await c.stop()

    asyncio.run(run())
    return seen


def _add(seen: Seen, ended: set[int], p: int, offset: int, key, value) -> None:
    if p in ended:
        return
    if value == END:
        ended.add(p)
    else:
        seen[p].append((offset, key, value))


READERS: dict[str, Callable[..., Seen]] = {
    "confluent-kafka": _read_confluent,
    "kafka-python": _read_kafka_python,
    "aiokafka": _read_aiokafka,
}


def read_until_end(client: str, bootstrap: str, topic: str, partitions: int, isolation: str,
                   timeout: float = 120.0) -> Seen:
    return READERS[client](bootstrap, topic, partitions, isolation, timeout)


# ------------------------------------------------------------------ loop processes

class Loop:
    """One run of eos_txn_loop.py."""

    def __init__(self, client: str, args: list[str], out: Path, name: str):
        self.client, self.out, self.name = client, out, name
        self.cmd = [sys.executable, LOOP_SCRIPT, client, *args, str(out), "--name", name]
        self.log = out.with_suffix(".log")
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Loop":
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
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
                continue  # a line cut by SIGKILL
            if kind is None or ev["e"] == kind:
                out.append(ev)
        return out

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)

    def tail(self, n: int = 40) -> str:
        try:
            log = "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            log = ""
        errors = [e for e in self.events() if e["e"] in ("error", "abort")]
        return f"{log}\nerror/abort events: {errors[-5:]}"


class Loops:
    """Starts loop processes and stops every one of them (by PID) at the end."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.all: list[Loop] = []

    def start(self, client: str, args: list[str]) -> Loop:
        name = f"loop{len(self.all)}"
        loop = Loop(client, args, self.tmp / f"{name}.jsonl", name)
        self.all.append(loop)
        return loop.start()

    def stop_all(self) -> None:
        for loop in self.all:
            if loop.alive:
                loop.proc.send_signal(signal.SIGTERM)
        for loop in self.all:
            loop.kill()

    def dump(self) -> str:
        return "\n".join(f"--- {loop.name} ({loop.client}):\n{loop.tail()}" for loop in self.all)
