"""``odradek perf failover``: how long a partition is unwritable after its leader is kill -9'd.

Invariant: the broker to kill is found through Metadata (the leader of
``--partition``) and its PID through ``<data-dir>/cluster.json`` (written by
``odradek cluster up``); the PID is signalled only if ``/proc/<pid>/cmdline``
still contains the recorded marker (its server.properties path). The clock
starts at the SIGKILL and stops, per partition the broker led, at the first
acks=all produce acknowledged after it (records sent continuously, one in
flight per partition). Afterwards the broker is restarted with the exact
command line it had (read from /proc before the kill), its new PID recorded in
cluster.json, and the tool waits until it is back in every ISR of the topic, so
runs can be repeated. This module reads cluster.json itself: odradek.client
never imports odradek.zk.
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .tools import ArgParser, ToolError, resolve_bootstrap

POLL = 0.05  # seconds between checks of a condition being waited on


def _parser() -> ArgParser:
    ap = ArgParser(prog="odradek perf failover",
                   description="kill -9 a partition leader and time the first acks=all produce to each "
                               "partition it led")
    ap.add_argument("--bootstrap-server", dest="bootstrap_server")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partition", type=int, default=0, help="kill the leader of this partition (default 0)")
    ap.add_argument("--data-dir", default=os.environ.get("ODRADEK_DATA_DIR", "data"),
                    help="the 'odradek cluster up' data dir holding cluster.json (default ./data)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for each step (default 120)")
    ap.add_argument("--no-restart", action="store_true", help="leave the killed broker down")
    ap.add_argument("--record-size", type=int, default=100)
    return ap


# ---------------------------------------------------------------- cluster.json and /proc

def read_cluster_state(data_dir: Path) -> dict:
    path = data_dir / "cluster.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ToolError(f"no {path}: start the cluster with 'odradek cluster up --data-dir {data_dir}'") from None
    except (OSError, ValueError) as exc:
        raise ToolError(f"cannot read {path}: {exc}") from None


def write_cluster_state(data_dir: Path, state: dict) -> None:
    path = data_dir / "cluster.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


def proc_cmdline(pid: int) -> list[str] | None:
    """The argv of a live (non-zombie) process, or None."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def broker_entry(state: dict, broker_id: int) -> dict:
    for b in state.get("brokers", []):
        if b.get("id") == broker_id:
            return b
    raise ToolError(f"broker {broker_id} is not in cluster.json (brokers {[b.get('id') for b in state['brokers']]})")


def session_timeout_ms(properties_path: str) -> int:
    """zookeeper.session.timeout.ms from the broker's server.properties (Kafka 2.8 default 18000)."""
    try:
        for line in Path(properties_path).read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "zookeeper.session.timeout.ms":
                return int(value.strip())
    except (OSError, ValueError):
        pass
    return 18000


def wait_for(cond, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise ToolError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(POLL)


# ---------------------------------------------------------------- metadata

def describe(admin: Any, topic: str) -> list[dict]:
    try:
        desc = admin.describe_topics([topic])[0]
    except Exception:  # noqa: BLE001 - a broker just died: ask again
        return []
    return desc["partitions"]


def broker_ids(admin: Any) -> set[int]:
    try:
        return {b["node_id"] for b in admin.describe_cluster()["brokers"]}
    except Exception:  # noqa: BLE001
        return set()


# ---------------------------------------------------------------- measurement

class Prober:
    """One acks=all record in flight per partition, sent again as soon as the last one completes;
    remembers when each partition got its first acknowledgement after ``arm()``."""

    def __init__(self, bootstrap: str, topic: str, partitions: list[int], record_size: int, timeout: float):
        from .producer import Producer
        self.topic = topic
        self.partitions = partitions
        self.payload = b"F" * record_size
        self.producer = Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, retry_backoff_ms=20,
                                 reconnect_backoff_ms=20, request_timeout_ms=5000,
                                 delivery_timeout_ms=int(timeout * 1000) + 10000, max_block_ms=int(timeout * 1000))
        self.lock = threading.Condition()
        self.armed_at: float | None = None
        self.first_ack: dict[int, float] = {}
        self.sent_at: dict[int, float] = {}
        self.errors: list[str] = []
        self.stopped = False

    def _send(self, p: int) -> None:
        if self.stopped:
            return
        sent = time.monotonic()

        def done(md: Any, exc: Any) -> None:
            now = time.monotonic()
            with self.lock:
                if exc is not None:
                    self.errors.append(f"partition {p}: {exc}")
                elif self.armed_at is not None and sent >= self.armed_at and p not in self.first_ack:
                    self.first_ack[p] = now
                self.lock.notify_all()
            self._send(p)
        self.producer.send(self.topic, self.payload, partition=p, callback=done)

    def start(self) -> None:
        for p in self.partitions:
            self._send(p)

    def arm(self) -> float:
        with self.lock:
            self.armed_at = time.monotonic()
            return self.armed_at

    def wait_all(self, timeout: float) -> dict[int, float]:
        deadline = time.monotonic() + timeout
        with self.lock:
            while len(self.first_ack) < len(self.partitions):
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(set(self.partitions) - set(self.first_ack))
                    raise ToolError(f"no acks=all produce succeeded on partition(s) {missing} within {timeout:g} s "
                                    f"(errors: {self.errors[:3]})")
                self.lock.wait(min(left, 0.5))
            return dict(self.first_ack)

    def close(self) -> None:
        self.stopped = True
        self.producer.close(10)


def warm_up(prober: Prober, timeout: float) -> None:
    """Every probed partition acknowledged at least one record (the cluster is writable)."""
    start = prober.arm()
    prober.wait_all(timeout)
    with prober.lock:
        prober.armed_at, prober.first_ack = None, {}
    del start


# ---------------------------------------------------------------- the tool

def failover_perf(argv: list[str], out=None) -> int:
    from .admin import AdminClient

    args = _parser().parse_args(argv)
    out = out or sys.stdout
    data_dir = Path(args.data_dir).resolve()
    state = read_cluster_state(data_dir)
    bootstrap = resolve_bootstrap(args.bootstrap_server or state.get("bootstrap_servers"),
                                  data_dir / "cluster.json")
    admin = AdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        parts = wait_for(lambda: describe(admin, args.topic), args.timeout, f"metadata of topic {args.topic!r}")
        by_id = {p["partition"]: p for p in parts}
        if args.partition not in by_id:
            raise ToolError(f"topic {args.topic!r} has no partition {args.partition} ({len(parts)} partitions)")
        victim = by_id[args.partition]["leader"]
        if victim < 0:
            raise ToolError(f"partition {args.partition} of {args.topic!r} has no leader")
        led = sorted(p["partition"] for p in parts if p["leader"] == victim)
        not_full = [p["partition"] for p in parts if sorted(p["isr"]) != sorted(p["replicas"])]
        if not_full:
            print(f"WARNING: partitions {not_full} have an incomplete ISR before the kill", file=sys.stderr)

        entry = broker_entry(state, victim)
        pid: int = entry.get("pid") or 0
        marker = entry["marker"]
        argv_before = proc_cmdline(pid) if pid else None
        if argv_before is None or not any(marker in a for a in argv_before):
            raise ToolError(f"broker {victim}'s recorded pid {pid} is not running with marker {marker} "
                            f"(is the cluster in {data_dir} up?)")
        timeout_ms = session_timeout_ms(marker)

        prober = Prober(bootstrap, args.topic, led, args.record_size, args.timeout)
        try:
            prober.start()
            warm_up(prober, args.timeout)
            print(f"Killing broker {victim} (pid {pid}), leader of {args.topic} partition(s) {led}; "
                  f"zookeeper.session.timeout.ms={timeout_ms}", file=out, flush=True)
            os.kill(pid, signal.SIGKILL)
            t0 = prober.arm()
            acks = prober.wait_all(args.timeout + timeout_ms / 1000.0)
        finally:
            prober.close()
        times = {p: acks[p] - t0 for p in led}
        new_leaders = {p["partition"]: p["leader"] for p in describe(admin, args.topic)}
        for p in led:
            print(f"partition {p}: first acks=all produce acknowledged {times[p]:.3f} s after the kill "
                  f"(leader now {new_leaders.get(p, '?')})", file=out)
        worst = max(times.values())
        print(f"Failover time: {worst:.3f} s (max over {len(led)} partition(s); min {min(times.values()):.3f} s, "
              f"median {statistics.median(times.values()):.3f} s; session timeout {timeout_ms / 1000:g} s)",
              file=out, flush=True)

        if args.no_restart:
            print(f"Broker {victim} is down. Restart it with:\n  cd {Path(marker).parent} && "
                  f"{' '.join(argv_before)} >> {entry.get('log', 'broker.log')} 2>&1 &", file=out)
            return 0
        wait_for(lambda: proc_cmdline(pid) is None, 30, f"pid {pid} to exit")
        log_path = entry.get("log") or str(Path(marker).parent / "broker.log")
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(argv_before, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    cwd=Path(marker).parent, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                    start_new_session=True, close_fds=True)
        state = read_cluster_state(data_dir)
        broker_entry(state, victim)["pid"] = proc.pid
        write_cluster_state(data_dir, state)
        print(f"Restarted broker {victim} (pid {proc.pid}, recorded in {data_dir / 'cluster.json'}); "
              f"waiting until it is back in every ISR of {args.topic} ...", file=out, flush=True)
        start = time.monotonic()

        def rejoined() -> bool:
            if proc.poll() is not None:
                raise ToolError(f"restarted broker {victim} exited with code {proc.returncode}; see {log_path}")
            ps = describe(admin, args.topic)
            return bool(ps) and victim in broker_ids(admin) and all(
                sorted(p["isr"]) == sorted(p["replicas"]) for p in ps)
        wait_for(rejoined, args.timeout, f"broker {victim} to rejoin every ISR of {args.topic}")
        print(f"Broker {victim} is back in every ISR after {time.monotonic() - start:.1f} s.", file=out, flush=True)
        return 0
    finally:
        admin.close()


def main(argv: list[str]) -> int:
    return failover_perf(argv)
