"""A local Kafka cluster: a ZooKeeper ensemble plus N broker processes under one data dir.

Invariant: every process is started by this module, recorded by PID in
``<data_dir>/cluster.json`` with a marker (its config file path) that must
appear in ``/proc/<pid>/cmdline`` before we signal it, and stopped by PID
(SIGTERM, then SIGKILL after a timeout). ``start()`` returns only when every
broker is registered under /brokers/ids by its NEW session, accepts TCP
connections, a controller from a live broker session holds /controller, and
each broker's Metadata (from the controller's UpdateMetadata) lists every live
broker, so a topic can be created at once. Everything listens on 127.0.0.1.
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from odradek.zk.ensemble import ZooKeeperEnsemble, free_ports, log_tail, stop_process

STATE_FILE = "cluster.json"
HOST = "127.0.0.1"
POLL = 0.1  # seconds between checks of a condition being waited on


class ClusterError(RuntimeError):
    """The local cluster failed to start or stop; the message says why (with a log tail)."""


@dataclass
class BrokerProcess:
    id: int
    port: int
    dir: Path
    proc: subprocess.Popen | None = None
    metrics_port: int | None = None    # its Prometheus endpoint (metrics.port), when metrics are on

    @property
    def properties_path(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.dir / "broker.log"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None


def metadata_broker_ids(port: int, host: str = HOST) -> set[int] | None:
    """The broker ids a broker's Metadata response lists, or None if it can't answer yet."""
    from odradek.protocol.apis import metadata
    from odradek.protocol.header import decode_response, encode_request
    version = 1
    try:
        with socket.create_connection((host, port), timeout=2.0) as sock:
            frame = encode_request(metadata, version, 1, "odradek-cluster", {"topics": []})
            sock.sendall(len(frame).to_bytes(4, "big") + frame)
            size = int.from_bytes(_recv_exactly(sock, 4), "big")
            _, body = decode_response(metadata, version, _recv_exactly(sock, size))
    except (OSError, ValueError):
        return None
    return {b.node_id for b in body.brokers}


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise OSError("connection closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _port_open(port: int, host: str = HOST) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class LocalCluster:
    """ZooKeeper ensemble of ``zookeepers`` nodes + brokers with ids 1..``brokers``.

    ``base_port``: ZooKeeper client ports from base_port (peer +100, election +200),
    brokers from base_port+300; None picks free ports. ``overrides`` go into every
    broker's server.properties. ``detached`` starts processes in their own sessions
    (they outlive this Python process; used by ``odradek cluster up``).
    ``broker_command`` is the command a broker is started with, followed by its
    server.properties path (default: ``$ODRADEK_BROKER_COMMAND`` split by shlex,
    else ``python -m odradek.zk.cli broker start``). ``extra_listeners[id]`` are listeners
    (``NAME://host:port``) broker ``id`` has besides its PLAINTEXT one, which the readiness
    checks use. ``env`` is added to the brokers'
    environment and to this object's own ZooKeeper session's, e.g. ``KAFKA_OPTS`` naming a
    JAAS file: its ``Client`` section is the ZooKeeper login, and a ``Server`` section makes
    the ensemble authenticate clients with SASL (users from that section). ``metrics`` gives
    every broker a Prometheus endpoint (``metrics.port``: base_port+400+i, or a free port).
    """

    def __init__(self, data_dir: str | os.PathLike, zookeepers: int = 3, brokers: int = 3,
                 base_port: int | None = None, overrides: dict[str, object] | None = None,
                 detached: bool = False, startup_timeout: float = 90.0,
                 broker_command: list[str] | None = None, env: dict[str, str] | None = None,
                 extra_listeners: dict[int, list[str]] | None = None, metrics: bool = False):
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self.data_dir = Path(data_dir).resolve()
        self.detached = detached
        self.startup_timeout = startup_timeout
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        self.extra_listeners = dict(extra_listeners or {})
        env_command = os.environ.get("ODRADEK_BROKER_COMMAND")
        self.broker_command = list(broker_command or (shlex.split(env_command) if env_command else
                                                      [sys.executable, "-m", "odradek.zk.cli", "broker", "start"]))
        self.env = {**os.environ, **(env or {})}
        self.ensemble = ZooKeeperEnsemble(self.data_dir / "zookeeper", zookeepers, base_port, detached=detached,
                                          sasl_jaas_file=_sasl_server_jaas_file(self.env))
        ports = ([base_port + 300 + i for i in range(brokers)] if base_port is not None else free_ports(brokers))
        self.brokers: dict[int, BrokerProcess] = {
            i + 1: BrokerProcess(i + 1, port, self.data_dir / f"broker-{i + 1}") for i, port in enumerate(ports)}
        if metrics:
            mports = [base_port + 400 + i for i in range(brokers)] if base_port is not None else free_ports(brokers)
            for b, mport in zip(self.brokers.values(), mports):
                b.metrics_port = mport
        self._zk = None
        self._start_zxid = 0

    # ------------------------------------------------------------ properties
    @property
    def zookeeper_connect(self) -> str:
        return self.ensemble.connect_string

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{HOST}:{b.port}" for b in self.brokers.values())

    @property
    def broker_pids(self) -> dict[int, int | None]:
        return {i: b.pid for i, b in self.brokers.items()}

    @property
    def zk(self):
        """A kazoo client on the ensemble (opened on first use, closed by ``stop()``)."""
        if self._zk is None:
            from odradek.zk.admin import open_zk
            self._zk = open_zk(self.zookeeper_connect, timeout=30.0, environ=self.env)
        return self._zk

    def broker_address(self, broker_id: int) -> str:
        return f"{HOST}:{self._broker(broker_id).port}"

    @property
    def metrics_urls(self) -> dict[int, str]:
        """Broker id -> its /metrics URL (brokers with metrics on)."""
        return {b.id: f"http://{HOST}:{b.metrics_port}/metrics" for b in self.brokers.values()
                if b.metrics_port is not None}

    # ------------------------------------------------------------ lifecycle
    def start(self, before_brokers: Callable[[], object] | None = None) -> "LocalCluster":
        """Start the ensemble, then every broker; wait until all are ready (else stop all and raise).
        ``before_brokers()`` runs once ZooKeeper serves, before any broker starts (e.g. to create
        the SCRAM user the brokers log in to each other with)."""
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self.ensemble.start(timeout=self.startup_timeout)
            if before_brokers is not None:
                before_brokers()
            old = {i: self._registration_czxid(i) for i in self.brokers}
            self._start_zxid = self.zk.last_zxid  # znodes created later belong to this run
            for broker in self.brokers.values():
                self._spawn(broker)
            self._wait_ready(list(self.brokers), old, self.startup_timeout)
            self.write_state()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the brokers one at a time, the controller last (SIGTERM, SIGKILL after
        ``timeout``), then the ensemble.

        One at a time, because a broker's SIGTERM is a controlled shutdown: it asks the
        controller to move its leaderships away, which succeeds at once while a controller and
        another live broker exist. Signalled all together, the brokers ask a controller that is
        itself stopping and wait out ``controlled.shutdown.retry.backoff.ms`` (5 s) per retry."""
        for broker in self._stop_order():
            if broker.proc is not None and broker.proc.poll() is None:
                broker.proc.send_signal(signal.SIGTERM)
                stop_process(broker.proc, timeout)
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            finally:
                self._zk = None
        self.ensemble.stop()
        (self.data_dir / STATE_FILE).unlink(missing_ok=True)

    def _stop_order(self) -> list[BrokerProcess]:
        """The brokers, the controller (if ZooKeeper still names a live one) last."""
        controller = None
        if self._zk is not None:
            from odradek.zk.admin import AdminZkClient
            try:  # bounded: ZooKeeper may be down
                controller = AdminZkClient(self._zk, read_timeout=5.0).controller_id()
            except Exception:  # ZooKeeper gone or unreadable: any order will do
                controller = None
        return sorted(self.brokers.values(), key=lambda b: b.id == controller)

    def kill_broker(self, broker_id: int, sig: int = signal.SIGKILL, timeout: float = 30.0) -> None:
        """Send ``sig`` to a broker and wait for it to exit (SIGKILL after ``timeout``)."""
        broker = self._broker(broker_id)
        if broker.proc is None or broker.proc.poll() is not None:
            return
        broker.proc.send_signal(sig)
        try:
            broker.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            broker.proc.kill()
            broker.proc.wait(timeout)

    def start_broker(self, broker_id: int, timeout: float | None = None) -> None:
        """(Re)start a broker with its server.properties; wait until it registers anew."""
        broker = self._broker(broker_id)
        if broker.pid is not None:
            raise ClusterError(f"broker {broker_id} is already running (pid {broker.pid})")
        old = {broker_id: self._registration_czxid(broker_id)}
        self._spawn(broker)
        self._wait_ready([broker_id], old, timeout or self.startup_timeout, need_controller=False)
        self.write_state()

    def add_broker(self, timeout: float | None = None) -> int:
        """Start one more broker, with the next free id, and wait until it registers (the first
        step of growing a cluster: it holds no partition until a reassignment moves some to it)."""
        broker_id = max(self.brokers) + 1
        metrics = any(b.metrics_port is not None for b in self.brokers.values())
        port, mport = free_ports(2)
        self.brokers[broker_id] = BrokerProcess(broker_id, port, self.data_dir / f"broker-{broker_id}",
                                                metrics_port=mport if metrics else None)
        self.start_broker(broker_id, timeout)
        return broker_id

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ state file
    def state(self) -> dict:
        return {
            "version": 1,
            "data_dir": str(self.data_dir),
            "zookeeper_connect": self.zookeeper_connect,
            "bootstrap_servers": self.bootstrap_servers,
            "zookeepers": [{"id": n.id, "pid": n.pid, "client_port": n.client_port, "peer_port": n.peer_port,
                            "election_port": n.election_port, "marker": str(n.cfg_path)}
                           for n in self.ensemble.nodes.values()],
            "brokers": [{"id": b.id, "pid": b.pid, "port": b.port, "marker": str(b.properties_path),
                         "log": str(b.log_path), "metrics_port": b.metrics_port} for b in self.brokers.values()],
        }

    def write_state(self) -> None:
        path = self.data_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state(), indent=2) + "\n")
        tmp.replace(path)

    # ------------------------------------------------------------ internals
    def _broker(self, broker_id: int) -> BrokerProcess:
        if broker_id not in self.brokers:
            raise ValueError(f"no broker {broker_id} (ids are {', '.join(map(str, sorted(self.brokers)))})")
        return self.brokers[broker_id]

    def server_properties(self, broker: BrokerProcess) -> dict[str, str]:
        n = len(self.brokers)
        props = {
            "broker.id": str(broker.id),
            "listeners": f"PLAINTEXT://{HOST}:{broker.port}",
            "log.dirs": str(broker.dir / "logs"),
            "zookeeper.connect": self.zookeeper_connect,
            # as Kafka's sample config/server.properties does for small dev clusters:
            "offsets.topic.replication.factor": str(min(3, n)),
            "transaction.state.log.replication.factor": str(min(3, n)),
            "transaction.state.log.min.isr": str(min(2, n)),
            "group.initial.rebalance.delay.ms": "0",
        }
        if broker.metrics_port is not None:
            props.update({"metrics.port": str(broker.metrics_port), "metrics.host": HOST})
        props.update(self.overrides)
        if self.extra_listeners.get(broker.id):
            props["listeners"] = ",".join([f"PLAINTEXT://{HOST}:{broker.port}", *self.extra_listeners[broker.id]])
        return props

    def _spawn(self, broker: BrokerProcess) -> None:
        broker.dir.mkdir(parents=True, exist_ok=True)
        lines = [f"{k}={v}" for k, v in self.server_properties(broker).items()]
        broker.properties_path.write_text("# written by odradek LocalCluster\n" + "\n".join(lines) + "\n")
        cmd = [*self.broker_command, str(broker.properties_path)]
        env = {**self.env, "PYTHONUNBUFFERED": "1"}
        with open(broker.log_path, "ab") as log:
            broker.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                           cwd=broker.dir, env=env, start_new_session=self.detached,
                                           close_fds=True)

    def _registration_czxid(self, broker_id: int) -> int | None:
        from odradek.zk.znodes import BrokerIdZNode
        stat = self.zk.exists(BrokerIdZNode.path(broker_id))
        return None if stat is None else stat.czxid

    def _wait_ready(self, ids: list[int], old_czxid: dict[int, int | None], timeout: float,
                    need_controller: bool = True) -> None:
        """Wait until the brokers ``ids`` registered anew (czxid differs from ``old_czxid``) and listen."""
        from odradek.zk.znodes import BrokerIdZNode, ControllerZNode
        start_zxid = self._start_zxid
        deadline = time.monotonic() + timeout
        while True:
            waiting = []
            for i in ids:
                broker = self.brokers[i]
                if broker.proc is None or broker.proc.poll() is not None:
                    code = None if broker.proc is None else broker.proc.returncode
                    raise ClusterError(f"broker {i} exited (code {code}); tail of {broker.log_path}:\n"
                                       f"{log_tail(broker.log_path)}")
                stat = self.zk.exists(BrokerIdZNode.path(i))
                if stat is None or stat.czxid == old_czxid.get(i):
                    waiting.append(f"broker {i} not registered in /brokers/ids")
                elif not _port_open(broker.port):
                    waiting.append(f"broker {i} not accepting connections on {HOST}:{broker.port}")
            if need_controller and not waiting:
                # a controller of this run: held by a live broker session, or created after we spawned
                stat = self.zk.exists(ControllerZNode.path)
                if stat is None or (stat.czxid <= start_zxid
                                    and stat.ephemeralOwner not in self._live_broker_sessions()):
                    waiting.append("no controller elected (/controller)")
            if not waiting:
                live = {b.id for b in self.brokers.values() if b.pid is not None}
                for i in ids:
                    known = metadata_broker_ids(self.brokers[i].port)
                    if known is None or not live <= known:
                        waiting.append(f"broker {i} has no metadata for every live broker yet")
            if not waiting:
                return
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- tail of {self.brokers[i].log_path}:\n{log_tail(self.brokers[i].log_path)}"
                                  for i in ids)
                raise ClusterError(f"cluster not ready after {timeout:g}s: {'; '.join(waiting)}\n{tails}")
            time.sleep(POLL)

    def _live_broker_sessions(self) -> set[int]:
        from kazoo.exceptions import NoNodeError
        from odradek.zk.znodes import BrokerIdsZNode, BrokerIdZNode
        try:
            children = self.zk.get_children(BrokerIdsZNode.path)
        except NoNodeError:
            return set()
        sessions = set()
        for c in children:
            stat = self.zk.exists(BrokerIdZNode.path(int(c)))
            if stat is not None:
                sessions.add(stat.ephemeralOwner)
        return sessions


def _sasl_server_jaas_file(env: dict[str, str]) -> str | None:
    """The JAAS file KAFKA_OPTS names if it has a ZooKeeper ``Server`` section, else None."""
    from odradek.protocol.jaas import JaasError, kafka_opts_properties, load_jaas_file, login_config_file
    try:
        path = login_config_file(kafka_opts_properties(env))
        return path if path is not None and "Server" in load_jaas_file(path) else None
    except JaasError as exc:
        raise ClusterError(str(exc)) from None


# ---------------------------------------------------------------- state of a detached cluster

def read_state(data_dir: str | os.PathLike) -> dict | None:
    try:
        return json.loads((Path(data_dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def saved_zookeeper_connect(data_dir: str | os.PathLike = "data") -> str | None:
    """The ZooKeeper connect string of a cluster started by ``odradek cluster up`` in ``data_dir``."""
    state = read_state(data_dir)
    return state.get("zookeeper_connect") if state else None


def pid_matches(pid: int | None, marker: str) -> bool:
    """True if ``pid`` is alive (not a zombie) and its command line mentions ``marker``."""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if status.rsplit(")", 1)[-1].split()[0] == "Z":
        return False
    return marker in cmdline


def live_processes(state: dict) -> list[tuple[str, int, str]]:
    """(kind, pid, marker) of the recorded processes that are still ours and running."""
    procs = [("broker", b.get("pid"), b["marker"]) for b in state.get("brokers", [])]
    procs += [("zookeeper", z.get("pid"), z["marker"]) for z in state.get("zookeepers", [])]
    if state.get("ui"):
        procs.append(("ui", state["ui"].get("pid"), state["ui"]["marker"]))
    return [(k, p, m) for k, p, m in procs if pid_matches(p, m)]


def stop_recorded(procs: list[tuple[str, int, str]], timeout: float = 30.0) -> None:
    """SIGTERM the processes (verified by marker), wait, SIGKILL the stragglers."""
    for _, pid, marker in procs:
        if pid_matches(pid, marker):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(pid_matches(p, m) for _, p, m in procs) and time.monotonic() < deadline:
        time.sleep(POLL)
    for _, pid, marker in procs:
        if pid_matches(pid, marker):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(pid_matches(p, m) for _, p, m in procs) and time.monotonic() < deadline:
        time.sleep(POLL)


# ---------------------------------------------------------------- CLI
