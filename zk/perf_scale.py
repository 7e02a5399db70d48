"""``odradek perf scale``: N partitions on a local 3-broker cluster, timed through the operations
that grow with the partition count.

Invariant: the cluster is one this tool starts itself (LocalCluster in a fresh directory under
``--data-dir``, or a temporary one), and ``LocalCluster.stop`` ends every process it started,
by PID, in a ``finally`` whatever happens. Each figure is a wall-clock time from one event
(a request sent, a signal, a znode's ctime) until a condition holds in what the brokers answer
to Metadata (every partition led by a live broker, every ISR full), polled without fixed
sleeps beyond ``POLL``; the steps run in this order on one cluster: create, Metadata and RSS,
controlled shutdown (SIGTERM) of the non-controller leading the most partitions, its restart
back into every ISR, kill -9 of the controller (ZooKeeper's session-expiry wait reported apart
from the new controller's work), its restart back into every ISR.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from odradek.zk.cluster import LocalCluster
from odradek.zk.scale_probe import (Conn, ScaleError, View, create_topics, fetch_view, pid_alive, rss_kib,
                                    time_list_topics, time_metadata)
from odradek.zk.znodes import ControllerZNode

POLL = 0.05   # seconds between checks of a condition (each check is a full Metadata request)

# (key, label, unit) of every figure, in the table's order
FIGURES = [
    ("create_requests_s", "CreateTopics requests answered", "s"),
    ("create_s", "created: every partition led, full ISR", "s"),
    ("metadata_ms", "Metadata v8, all topics: request to last byte (median)", "ms"),
    ("metadata_kib", "  its response size", "KiB"),
    ("list_topics_ms", "librdkafka list_topics (median)", "ms"),
    ("rss_mib_max", "broker RSS, largest", "MiB"),
    ("rss_kib_per_replica", "RSS growth per partition replica", "KiB"),
    ("shutdown_leaders_moved_s", "SIGTERM: no partition led by it", "s"),
    ("shutdown_exit_s", "SIGTERM: broker exited", "s"),
    ("restart_registered_s", "restart: registered in ZooKeeper", "s"),
    ("restart_isr_s", "restart: back in every ISR", "s"),
    ("session_expiry_s", "kill -9 controller: new one elected", "s"),
    ("failover_leaders_s", "  then every partition led by a live broker", "s"),
    ("restart_after_kill_isr_s", "restart after kill -9: back in every ISR", "s"),
]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="odradek perf scale",
                                 description="time partition creation, controlled shutdown, controller failover, "
                                             "a broker's restart and all-topics Metadata at N partitions")
    ap.add_argument("--partitions", type=int, default=1000, help="partitions in all (default 1000)")
    ap.add_argument("--growth", help="comma-separated partition counts: one run per count, one table")
    ap.add_argument("--topics", type=int, help="topics to spread them over (default: one per 50 partitions)")
    ap.add_argument("--replication-factor", type=int, default=3)
    ap.add_argument("--batch", type=int, default=20, help="topics per CreateTopics request (default 20)")
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--zookeepers", type=int, default=1)
    ap.add_argument("--data-dir", help="runs go in fresh directories under it (default: a temporary directory, "
                                       "removed afterwards)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a server.properties setting for every broker (repeatable)")
    ap.add_argument("--metadata-rounds", type=int, default=7)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds each step may take (default 1800)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    return ap


def wait_until(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise ScaleError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(POLL)


def topic_sizes(partitions: int, topics: int) -> dict[str, int]:
    """``partitions`` spread over ``topics`` topics as evenly as it goes."""
    base, extra = divmod(partitions, topics)
    return {f"scale-{i:05d}": base + (i < extra) for i in range(topics)}


class Run:
    """One partition count on one fresh cluster."""

    def __init__(self, args: argparse.Namespace, partitions: int, data_dir: Path, log: Callable[[str], None]):
        self.args = args
        self.partitions = partitions
        self.log = log
        topics = args.topics or max(1, partitions // 50)
        self.sizes = topic_sizes(partitions, min(topics, partitions))
        overrides = dict(kv.split("=", 1) for kv in args.override)
        self.cluster = LocalCluster(data_dir, zookeepers=args.zookeepers, brokers=args.brokers, overrides=overrides)
        self.conns: dict[int, Conn] = {}
        self.result: dict[str, Any] = {"partitions": partitions, "topics": len(self.sizes),
                                       "replication_factor": args.replication_factor, "brokers": args.brokers}

    # ------------------------------------------------------------ views
    def conn(self, broker_id: int) -> Conn:
        if broker_id not in self.conns:
            self.conns[broker_id] = Conn(self.cluster.brokers[broker_id].port, timeout=self.args.timeout)
        return self.conns[broker_id]

    def live(self) -> list[int]:
        return [i for i, b in self.cluster.brokers.items() if b.pid is not None]

    def views(self, brokers: list[int]) -> list[View] | None:
        """Every listed broker's Metadata view, or None if one can't answer or misses a partition."""
        out = []
        for b in brokers:
            view = fetch_view(self.conn(b))
            if view is None or sum(1 for (t, _) in view.partitions if t in self.sizes) < self.partitions:
                return None
            out.append(view)
        return out

    def all_led_full(self, brokers: list[int], must_hold: int | None = None) -> bool:
        """Every broker in ``brokers`` sees every partition led by one of them, with a full ISR
        (or, with ``must_hold``, that broker back in every ISR it belongs to)."""
        views = self.views(brokers)
        if views is None:
            return False
        live = set(brokers)
        for view in views:
            for (t, _), p in view.partitions.items():
                if t not in self.sizes:
                    continue
                if p.leader not in live:
                    return False
                if must_hold is None and set(p.isr) != set(p.replicas):
                    return False
                if must_hold is not None and must_hold in p.replicas and must_hold not in p.isr:
                    return False
        return True

    def none_led_by(self, gone: int, brokers: list[int]) -> bool:
        views = self.views(brokers)
        return views is not None and all(p.leader != gone and p.leader in brokers
                                         for v in views for (t, _), p in v.partitions.items() if t in self.sizes)

    # ------------------------------------------------------------ steps
    def run(self) -> dict[str, Any]:
        a = self.args
        self.log(f"[{self.partitions} partitions] starting {a.brokers} brokers, {a.zookeepers} ZooKeeper(s) "
                 f"in {self.cluster.data_dir}")
        self.cluster.start()
        self.result["pids"] = [p for p in self.cluster.broker_pids.values() if p] + self._zk_pids()
        base_rss = {i: rss_kib(b.pid) for i, b in self.cluster.brokers.items()}
        self.create()
        self.measure_steady(base_rss)
        victim = self.controlled_shutdown()
        self.restart(victim, "restart")
        killed = self.kill_controller()
        self.restart(killed, "restart_after_kill")
        return self.result

    def _zk_pids(self) -> list[int]:
        return [p for p in self.cluster.ensemble.pids.values() if p]

    def controller_id(self) -> int:
        view = wait_until(lambda: fetch_view(self.conn(self.live()[0])), self.args.timeout, "Metadata")
        return view.controller

    def create(self) -> None:
        a = self.args
        controller = self.controller_id()
        self.log(f"creating {self.partitions} partitions (RF {a.replication_factor}) in {len(self.sizes)} topics, "
                 f"{a.batch} topics per CreateTopics request, through controller {controller}")
        t0 = time.monotonic()
        create_topics(self.conn(controller), self.sizes, a.replication_factor, a.batch, int(a.timeout * 1000))
        self.result["create_requests_s"] = time.monotonic() - t0
        wait_until(lambda: self.all_led_full(self.live()), a.timeout, "every partition led with a full ISR")
        self.result["create_s"] = time.monotonic() - t0
        self.log(f"  created in {self.result['create_s']:.2f} s")

    def measure_steady(self, base_rss: dict[int, int | None]) -> None:
        a = self.args
        some = self.live()[0]
        median, size = time_metadata(self.conn(some), a.metadata_rounds)
        self.result["metadata_ms"] = median * 1000
        self.result["metadata_kib"] = size / 1024
        lt = time_list_topics(self.cluster.bootstrap_servers, a.metadata_rounds, self.partitions)
        self.result["list_topics_ms"] = None if lt is None else lt * 1000
        view = fetch_view(self.conn(some))
        assert view is not None
        rss = {i: rss_kib(b.pid) or 0 for i, b in self.cluster.brokers.items()}
        replicas = {i: sum(1 for (t, _), p in view.partitions.items() if t in self.sizes and i in p.replicas)
                    for i in rss}
        self.result["rss_mib"] = {str(i): kib / 1024 for i, kib in rss.items()}
        self.result["rss_mib_max"] = max(rss.values()) / 1024
        growth = [(rss[i] - (base_rss[i] or 0)) / replicas[i] for i in rss if replicas[i]]
        self.result["rss_kib_per_replica"] = sum(growth) / len(growth) if growth else None
        self.log(f"  Metadata {self.result['metadata_ms']:.1f} ms ({size / 1024:.0f} KiB); RSS {self.result['rss_mib']}")

    def controlled_shutdown(self) -> int:
        view = wait_until(lambda: fetch_view(self.conn(self.live()[0])), self.args.timeout, "Metadata")
        counts = view.leaders()
        victim = max((b for b in self.live() if b != view.controller), key=lambda b: counts.get(b, 0))
        self.result["shutdown_broker_leads"] = counts.get(victim, 0)
        self.log(f"SIGTERM to broker {victim} (leader of {counts.get(victim, 0)} partitions; "
                 f"controller is {view.controller})")
        proc = self.cluster.brokers[victim].proc
        assert proc is not None
        exited: list[float] = []

        def wait_for_exit() -> None:
            proc.wait()
            exited.append(time.monotonic())
        waiter = threading.Thread(target=wait_for_exit, daemon=True)
        survivors = [b for b in self.live() if b != victim]
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        waiter.start()
        wait_until(lambda: self.none_led_by(victim, survivors), self.args.timeout,
                   f"no partition led by broker {victim}")
        self.result["shutdown_leaders_moved_s"] = time.monotonic() - t0
        waiter.join(self.args.timeout)
        if not exited:
            raise ScaleError(f"broker {victim} did not exit within {self.args.timeout:g} s of SIGTERM")
        self.result["shutdown_exit_s"] = exited[0] - t0
        self.log(f"  leaders moved in {self.result['shutdown_leaders_moved_s']:.2f} s, "
                 f"exited in {self.result['shutdown_exit_s']:.2f} s")
        return victim

    def restart(self, broker_id: int, key: str) -> None:
        """``<key>_registered_s``: spawn until registered anew; ``<key>_isr_s``: until in every ISR."""
        t0 = time.monotonic()
        self.cluster.start_broker(broker_id, timeout=self.args.timeout)
        self.result[f"{key}_registered_s"] = time.monotonic() - t0
        self.conns.pop(broker_id, None)
        self.result["pids"].append(self.cluster.brokers[broker_id].pid)
        wait_until(lambda: self.all_led_full(self.live(), must_hold=broker_id), self.args.timeout,
                   f"broker {broker_id} back in every ISR")
        self.result[f"{key}_isr_s"] = time.monotonic() - t0
        self.log(f"  broker {broker_id} registered after {self.result[f'{key}_registered_s']:.2f} s, "
                 f"back in every ISR after {self.result[f'{key}_isr_s']:.2f} s")

    def kill_controller(self) -> int:
        zk = self.cluster.zk
        data, _ = zk.get(ControllerZNode.path)
        old = ControllerZNode.decode(data)
        assert old is not None
        self.log(f"kill -9 of controller {old}")
        t_kill = time.time()
        self.cluster.kill_broker(old, signal.SIGKILL)
        self.conns.pop(old, None)

        def new_controller() -> float | None:
            try:
                data, stat = zk.get(ControllerZNode.path)
            except Exception:  # noqa: BLE001 - not there yet
                return None
            return stat.ctime / 1000.0 if ControllerZNode.decode(data) not in (None, old) else None
        ctime = wait_until(new_controller, self.args.timeout, "a new controller")
        self.result["session_expiry_s"] = ctime - t_kill
        survivors = self.live()
        wait_until(lambda: self.none_led_by(old, survivors), self.args.timeout,
                   "every partition led by a live broker")
        self.result["failover_leaders_s"] = time.time() - ctime
        self.log(f"  new controller after {self.result['session_expiry_s']:.2f} s, every partition led "
                 f"{self.result['failover_leaders_s']:.2f} s later")
        return old

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
        self.cluster.stop()


# ---------------------------------------------------------------- output

def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"


def table(results: list[dict[str, Any]]) -> str:
    head = ["", *[f"{r['partitions']:,} partitions" for r in results]]
    rows = [head, ["topics / RF / brokers", *[f"{r['topics']} / {r['replication_factor']} / {r['brokers']}"
                                              for r in results]]]
    rows += [[f"{label} ({unit})", *[_fmt(r.get(key)) for r in results]] for key, label, unit in FIGURES]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in rows]
    return "\n".join(lines)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    counts = [int(c) for c in args.growth.split(",")] if args.growth else [args.partitions]
    if any(c < 1 for c in counts) or args.batch < 1 or args.replication_factor > args.brokers:
        print("Error: partition counts and --batch must be positive, --replication-factor <= --brokers",
              file=sys.stderr)
        return 1
    base = Path(args.data_dir).resolve() if args.data_dir else Path(tempfile.mkdtemp(prefix="odradek-scale-"))
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if args.json else (lambda s: print(s, flush=True))
    results = []
    try:
        for count in counts:
            run_dir = base / f"p{count}-{int(time.time())}"
            if run_dir.exists():
                print(f"Error: {run_dir} exists", file=sys.stderr)
                return 1
            before = load()
            run = Run(args, count, run_dir, log)
            try:
                result = run.run()
            except (ScaleError, OSError) as exc:  # OSError: a broker stopped answering
                print(f"Error: {exc}", file=sys.stderr)
                return 1
            finally:
                run.close()
            result["loadavg_before"], result["loadavg_after"] = before, load()
            results.append(result)
    finally:
        if not args.data_dir:
            shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(results if args.growth else results[0], indent=2))
    else:
        print(table(results))
        print("load average (1/5/15 min) before/after each run: " +
              "; ".join(f"{r['loadavg_before']} / {r['loadavg_after']}" for r in results))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
