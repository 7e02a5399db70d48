"""``odradek cluster up|down|status``: a local ZooKeeper ensemble and brokers for development.

Invariant: ``up`` starts a ``LocalCluster`` detached (its processes outlive the command) and
records every PID in the data dir's state file; ``down`` and ``status`` act only on what that
file records, each PID checked against its command line before it is signalled (never a process
found by name); usage errors are one-line CommandErrors (exit code 1).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from odradek.zk.cluster import (HOST, POLL, STATE_FILE, ClusterError, LocalCluster, _port_open, live_processes,
                                read_state, stop_recorded)
from odradek.zk.ensemble import ZooKeeperError, log_tail, stop_process


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one-line CommandErrors (exit code 1)."""

    def error(self, message: str):  # type: ignore[override]
        from odradek.zk.cli import CommandError
        raise CommandError(message)


def main(argv: list[str]) -> int:
    """``odradek cluster up|down|status [--data-dir ./data] [--brokers N] [--zookeepers N]``."""
    from odradek.zk.cli import CommandError

    parser = _Parser(prog="odradek cluster", description="a local ZooKeeper ensemble + brokers")
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--data-dir", default=os.environ.get("ODRADEK_DATA_DIR", "data"))
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--zookeepers", type=int, default=3)
    parser.add_argument("--base-port", type=int, default=None,
                        help="ZooKeeper client ports from here (peer +100, election +200), brokers from +300; "
                             "default: free ports")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="broker config for every broker (repeatable)")
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--ui-port", type=int, default=None,
                        help="also start 'odradek ui' on 127.0.0.1:PORT (stopped by 'cluster down')")
    parser.add_argument("--no-metrics", action="store_true",
                        help="no Prometheus endpoint on the brokers (default: one each, metrics.port)")
    args = parser.parse_args(argv)
    data_dir = Path(args.data_dir).resolve()

    if args.action == "up":
        return _up(args, data_dir, CommandError)
    if args.action == "down":
        return _down(data_dir)
    return _status(data_dir, CommandError)


def _up(args: argparse.Namespace, data_dir: Path, CommandError: type[Exception]) -> int:
    state = read_state(data_dir)
    if state and live_processes(state):
        raise CommandError(f"a cluster is already up in {data_dir} (bootstrap servers {state['bootstrap_servers']}, "
                           f"ZooKeeper {state['zookeeper_connect']}); stop it with 'odradek cluster down'")
    overrides = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"bad --override {item!r}: expected KEY=VALUE")
        overrides[key.strip()] = value.strip()
    try:
        cluster = LocalCluster(data_dir, zookeepers=args.zookeepers, brokers=args.brokers,
                               base_port=args.base_port, overrides=overrides, detached=True,
                               startup_timeout=args.timeout, metrics=not args.no_metrics)
    except ClusterError as exc:   # a JAAS file named by KAFKA_OPTS that cannot be used
        raise CommandError(str(exc)) from None
    print(f"Starting {args.zookeepers} ZooKeeper node(s) and {args.brokers} broker(s) in {data_dir} ...",
          flush=True)
    try:
        cluster.start()
    except (ClusterError, ZooKeeperError) as exc:
        raise CommandError(str(exc)) from None
    finally:
        if cluster._zk is not None:  # keep the processes, drop our session
            cluster._zk.stop()
            cluster._zk.close()
            cluster._zk = None
    print(f"Cluster is up.\n  bootstrap servers: {cluster.bootstrap_servers}\n"
          f"  zookeeper connect: {cluster.zookeeper_connect}\n  data dir:          {data_dir}")
    if args.ui_port is not None:
        print(f"  web view:          {_start_ui(cluster, args.ui_port, CommandError)}")
    for broker_id, url in cluster.metrics_urls.items():
        print(f"  metrics broker {broker_id}: {url}")
    return 0


def _start_ui(cluster: LocalCluster, port: int, CommandError: type[Exception]) -> str:
    """``odradek ui`` detached, recorded in the state file; its URL once it answers."""
    log = cluster.data_dir / "ui.log"
    cmd = [sys.executable, "-m", "odradek.zk.cli", "ui", "--zookeeper", cluster.zookeeper_connect,
           "--bootstrap-server", cluster.bootstrap_servers, "--port", str(port)]
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    url = f"http://{HOST}:{port}/"
    deadline = time.monotonic() + 30
    while not _port_open(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process(proc)
            raise CommandError(f"the web view did not start on {HOST}:{port}; tail of {log}:\n{log_tail(log)}")
        time.sleep(POLL)
    state = read_state(cluster.data_dir) or cluster.state()
    state["ui"] = {"pid": proc.pid, "port": port, "url": url, "marker": f"ui --zookeeper {cluster.zookeeper_connect}"}
    (cluster.data_dir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")
    return url


def _down(data_dir: Path) -> int:
    state = read_state(data_dir)
    if not state:
        print(f"No cluster state in {data_dir}; nothing to stop.")
        return 0
    procs = live_processes(state)
    ui = [p for p in procs if p[0] == "ui"]
    if ui:
        print("Stopping the web view ...", flush=True)
        stop_recorded(ui)
    brokers = [p for p in procs if p[0] == "broker"]
    zookeepers = [p for p in procs if p[0] == "zookeeper"]
    if brokers:
        print(f"Stopping {len(brokers)} broker(s) ...", flush=True)
        for broker in brokers:  # one at a time: each controlled shutdown then succeeds at once
            stop_recorded([broker])
    if zookeepers:
        print(f"Stopping {len(zookeepers)} ZooKeeper node(s) ...", flush=True)
        stop_recorded(zookeepers)
    (data_dir / STATE_FILE).unlink(missing_ok=True)
    print("Cluster is down." if procs else "Cluster was not running (stale state removed).")
    return 0


def _status(data_dir: Path, CommandError: type[Exception]) -> int:
    from odradek.protocol.errors import KafkaError
    from odradek.zk.admin import AdminOperationError, AdminZkClient, open_zk
    state = read_state(data_dir)
    if not state:
        raise CommandError(f"no cluster in {data_dir} (start one with 'odradek cluster up')")
    alive = {(k, p) for k, p, _ in live_processes(state)}
    print(f"data dir:          {state['data_dir']}\nzookeeper connect: {state['zookeeper_connect']}\n"
          f"bootstrap servers: {state['bootstrap_servers']}")
    for z in state["zookeepers"]:
        print(f"  zookeeper {z['id']}: pid {z['pid']} "
              f"{'running' if ('zookeeper', z['pid']) in alive else 'NOT RUNNING'}, client port {z['client_port']}")
    for b in state["brokers"]:
        print(f"  broker {b['id']}: pid {b['pid']} "
              f"{'running' if ('broker', b['pid']) in alive else 'NOT RUNNING'}, port {b['port']}"
              + (f", metrics http://{HOST}:{b['metrics_port']}/metrics" if b.get("metrics_port") else ""))
    if state.get("ui"):
        print(f"  web view: pid {state['ui']['pid']} "
              f"{'running' if ('ui', state['ui']['pid']) in alive else 'NOT RUNNING'}, {state['ui']['url']}")
    try:
        zk = open_zk(state["zookeeper_connect"], timeout=5.0)
    except AdminOperationError as exc:
        raise CommandError(str(exc)) from None
    try:
        admin = AdminZkClient(zk)
        live = admin.live_brokers()
        print(f"live brokers ({len(live)}):")
        for b in live:
            print(f"  {b.id}: {', '.join(e.uri() for e in b.endpoints)}")
        controller = admin.controller_id()
        print(f"controller: {controller if controller is not None else 'none'}")
        topics = admin.list_topics()
        print(f"topics ({len(topics)}):")
        for t in topics:
            try:
                n = len(admin.topic_assignment(t.name))
            except KafkaError:
                n = 0  # deleted meanwhile
            print(f"  {t.name}: {n} partition(s){' (marked for deletion)' if t.marked_for_deletion else ''}")
    finally:
        zk.stop()
        zk.close()
    return 0
