"""A local ZooKeeper ensemble of real Java ZooKeeper processes on loopback.

Invariant: every process this module starts is a child whose PID it keeps and
ends by that PID (SIGTERM, then SIGKILL after a timeout); nodes listen on
127.0.0.1 only; ``start()`` returns only once every node serves requests (its
``srvr`` four-letter word reports a mode), and raises with the node's log tail
otherwise. Node ids are ZooKeeper's ``myid``: 1..size.
"""
from __future__ import annotations

import argparse
import glob
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
DEBIAN_JAR = "/usr/share/java/zookeeper.jar"
# slf4j binding so the server's log is not silent (the Debian jar's manifest lists slf4j-api only).
DEBIAN_LOG_BINDINGS = ("/usr/share/java/slf4j-simple.jar",)
JVM_OPTS = ["-Xms16m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true", "-Dzookeeper.admin.enableServer=false",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss,SSS"]


class ZooKeeperError(RuntimeError):
    """ZooKeeper could not be found, started or reached."""


# ---------------------------------------------------------------- helpers

def find_java() -> str:
    """The java binary: $JAVA_HOME/bin/java, else java on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    java = shutil.which("java")
    if not java:
        raise ZooKeeperError("java not found: install a JRE or set JAVA_HOME")
    return java


def find_classpath() -> str:
    """ZooKeeper's classpath: $ODRADEK_ZOOKEEPER_CLASSPATH, Debian's package, or pyspark's jars."""
    env = os.environ.get("ODRADEK_ZOOKEEPER_CLASSPATH")
    if env:
        return env
    if os.path.exists(DEBIAN_JAR):
        # The Debian jar's manifest Class-Path names its dependency jars (jute, netty, slf4j-api...).
        return os.pathsep.join([DEBIAN_JAR, *(j for j in DEBIAN_LOG_BINDINGS if os.path.exists(j))])
    try:
        import pyspark  # type: ignore[import-not-found]
        jars = Path(pyspark.__file__).parent / "jars"
    except ImportError:
        jars = None
    if jars is not None and glob.glob(str(jars / "zookeeper-*.jar")):
        return str(jars / "*")
    raise ZooKeeperError("ZooKeeper not found: install Debian's 'zookeeper' package, pyspark, "
                         "or set ODRADEK_ZOOKEEPER_CLASSPATH")


_handed_out: set[int] = set()


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """n distinct TCP ports free on ``host`` now, chosen below the kernel's ephemeral range.

    A port from the ephemeral range (what binding port 0 gives) can be taken by any outgoing
    connection between this check and the server's bind, or while a killed server restarts
    on it; a port below that range is only ever taken by an explicit bind. Ports are drawn at
    random (so concurrent test processes rarely draw the same one), checked with a bind without
    SO_REUSEADDR (so a port with connections in TIME_WAIT is passed over too), and never handed
    out twice by this process."""
    low = _ephemeral_low()
    top = max(20001, low - 1)
    ports: list[int] = []
    while len(ports) < n:
        port = random.randint(20000, top)
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _handed_out.add(port)
        ports.append(port)
    return ports


def four_letter_word(host: str, port: int, cmd: str = "srvr", timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter word; return the reply ('' on any connection error)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(cmd.encode())
            chunks = []
            while True:
                data = s.recv(4096)
                if not data:
                    break
                chunks.append(data)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def server_mode(host: str, port: int) -> str | None:
    """'leader', 'follower', 'standalone'... if the node serves requests, else None."""
    for line in four_letter_word(host, port, "srvr").splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM the process by its PID, SIGKILL it after ``timeout``; reap it."""
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)
    except ProcessLookupError:
        pass


def render_zoo_cfg(data_dir: Path, client_port: int, servers: dict[int, tuple[str, int, int]],
                   client_address: str = "127.0.0.1", tick_time: int = 2000,
                   extra: dict[str, str] | None = None) -> str:
    """zoo.cfg text; ``servers`` maps myid -> (host, peer port, election port) (empty: standalone)."""
    cfg = {
        "tickTime": str(tick_time), "initLimit": "10", "syncLimit": "5",
        "dataDir": str(data_dir), "clientPort": str(client_port), "clientPortAddress": client_address,
        "maxClientCnxns": "0", "4lw.commands.whitelist": "*", "admin.enableServer": "false",
        "preAllocSize": "4096",
    }
    cfg.update(extra or {})
    lines = [f"{k}={v}" for k, v in cfg.items()]
    lines += [f"server.{i}={h}:{p}:{e}" for i, (h, p, e) in sorted(servers.items())] if len(servers) > 1 else []
    return "\n".join(lines) + "\n"


def java_command(cfg_path: Path | str, jvm_flags: list[str] | None = None) -> list[str]:
    """The JVM command line of one node; ``jvm_flags`` come after odradek's own (so they win)."""
    return [find_java(), *JVM_OPTS, *(jvm_flags or []), "-cp", find_classpath(), MAIN_CLASS, str(cfg_path)]


def sasl_server_settings(jaas_file: str | os.PathLike) -> tuple[dict[str, str], list[str]]:
    """(zoo.cfg lines, JVM flags) of a node whose clients log in with SASL: ZooKeeper's SASL
    authentication provider, and the JAAS file whose ``Server`` section lists the users
    (``org.apache.zookeeper.server.auth.DigestLoginModule required user_kafka="...";``)."""
    from odradek.zk.security import SASL_AUTH_PROVIDER
    return ({"authProvider.1": SASL_AUTH_PROVIDER},
            [f"-Djava.security.auth.login.config={Path(jaas_file).resolve()}"])


def env_jvm_flags(environ: dict[str, str] | os._Environ) -> list[str]:
    """JVM flags from the environment, as Kafka's zookeeper-server-start.sh (KAFKA_OPTS) and
    ZooKeeper's zkServer.sh (SERVER_JVMFLAGS) take them."""
    flags: list[str] = []
    for name in ("SERVER_JVMFLAGS", "KAFKA_OPTS"):
        try:
            flags += shlex.split(environ.get(name, ""))
        except ValueError as exc:
            raise ZooKeeperError(f"{name} cannot be split into words: {exc}") from None
    return flags


# ---------------------------------------------------------------- ensemble

@dataclass
class ZooKeeperNode:
    id: int
    client_port: int
    peer_port: int
    election_port: int
    dir: Path
    proc: subprocess.Popen | None = None

    @property
    def cfg_path(self) -> Path:
        return self.dir / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.dir / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None


class ZooKeeperEnsemble:
    """``size`` ZooKeeper nodes under ``data_dir/zk-<id>``.

    With ``base_port`` node i (1-based) uses client port base+i-1, peer port
    base+100+i-1 and election port base+200+i-1; without it, free ports are picked.
    ``detached=True`` starts the JVMs in their own session so they outlive this process.
    ``sasl_jaas_file``: the nodes authenticate clients with SASL, users from that JAAS file's
    ``Server`` section (``sasl_server_settings``); ``jvm_flags`` are added to every JVM.
    """

    host = "127.0.0.1"

    def __init__(self, data_dir: str | os.PathLike, size: int = 3, base_port: int | None = None,
                 tick_time: int = 2000, detached: bool = False, extra_config: dict[str, str] | None = None,
                 sasl_jaas_file: str | os.PathLike | None = None, jvm_flags: list[str] | None = None):
        if size < 1:
            raise ValueError("an ensemble needs at least one node")
        self.data_dir = Path(data_dir).resolve()
        self.size = size
        self.tick_time = tick_time
        self.detached = detached
        self.extra_config = dict(extra_config or {})
        self.jvm_flags = list(jvm_flags or [])
        if sasl_jaas_file is not None:
            cfg, flags = sasl_server_settings(sasl_jaas_file)
            self.extra_config.update(cfg)
            self.jvm_flags += flags
        if base_port is None:
            ports = free_ports(3 * size)
            triples = [tuple(ports[3 * i:3 * i + 3]) for i in range(size)]
        else:
            triples = [(base_port + i, base_port + 100 + i, base_port + 200 + i) for i in range(size)]
        self.nodes: dict[int, ZooKeeperNode] = {
            i + 1: ZooKeeperNode(i + 1, c, p, e, self.data_dir / f"zk-{i + 1}")
            for i, (c, p, e) in enumerate(triples)}

    # -- properties
    @property
    def connect_string(self) -> str:
        return ",".join(f"{self.host}:{n.client_port}" for n in self.nodes.values())

    @property
    def pids(self) -> dict[int, int | None]:
        return {i: n.pid for i, n in self.nodes.items()}

    def node_connect_string(self, node_id: int) -> str:
        return f"{self.host}:{self._node(node_id).client_port}"

    # -- lifecycle
    def start(self, timeout: float = 60.0) -> "ZooKeeperEnsemble":
        """Start every node and wait until all of them serve; on failure stop what started."""
        try:
            for node in self.nodes.values():
                self._spawn(node)
            self.wait_serving(list(self.nodes), timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        for node in self.nodes.values():
            if node.proc is not None:
                stop_process(node.proc, timeout)

    def stop_node(self, node_id: int, timeout: float = 10.0, sig: int = signal.SIGTERM) -> None:
        """Stop one node (SIGTERM, then SIGKILL after ``timeout``; or SIGKILL at once)."""
        node = self._node(node_id)
        if node.proc is None:
            return
        if sig == signal.SIGKILL and node.proc.poll() is None:
            node.proc.kill()
            node.proc.wait(timeout)
        stop_process(node.proc, timeout)

    def start_node(self, node_id: int, timeout: float = 60.0, wait: bool = True) -> None:
        """(Re)start one node; wait until it serves (needs a quorum of running nodes)."""
        node = self._node(node_id)
        if node.pid is not None:
            raise ZooKeeperError(f"ZooKeeper node {node_id} is already running (pid {node.pid})")
        self._spawn(node)
        if wait:
            self.wait_serving([node_id], timeout)

    def wait_serving(self, node_ids: list[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pending = set(node_ids)
        while pending:
            for i in sorted(pending):
                node = self.nodes[i]
                if node.proc is None or node.proc.poll() is not None:
                    code = None if node.proc is None else node.proc.returncode
                    raise ZooKeeperError(f"ZooKeeper node {i} exited (code {code}); log {node.log_path}:\n"
                                         f"{log_tail(node.log_path)}")
                if server_mode(self.host, node.client_port):
                    pending.discard(i)
            if not pending:
                return
            if time.monotonic() > deadline:
                i = min(pending)
                raise ZooKeeperError(f"ZooKeeper node {i} not serving on {self.host}:{self.nodes[i].client_port} "
                                     f"after {timeout:g}s; log {self.nodes[i].log_path}:\n"
                                     f"{log_tail(self.nodes[i].log_path)}")
            time.sleep(0.1)  # poll interval while waiting on the condition above

    def mode(self, node_id: int) -> str | None:
        return server_mode(self.host, self._node(node_id).client_port)

    def __enter__(self) -> "ZooKeeperEnsemble":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals
    def _node(self, node_id: int) -> ZooKeeperNode:
        if node_id not in self.nodes:
            raise ValueError(f"no ZooKeeper node {node_id} (ids are 1..{self.size})")
        return self.nodes[node_id]

    def write_config(self, node: ZooKeeperNode) -> None:
        node.dir.mkdir(parents=True, exist_ok=True)
        servers = {n.id: (self.host, n.peer_port, n.election_port) for n in self.nodes.values()}
        node.cfg_path.write_text(render_zoo_cfg(node.dir, node.client_port, servers, self.host,
                                                self.tick_time, self.extra_config))
        (node.dir / "myid").write_text(f"{node.id}\n")

    def _spawn(self, node: ZooKeeperNode) -> None:
        self.write_config(node)
        cmd = java_command(node.cfg_path, self.jvm_flags)
        log = open(node.log_path, "ab")
        try:
            node.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=node.dir, start_new_session=self.detached, close_fds=True)
        finally:
            log.close()


# ---------------------------------------------------------------- CLI: one node

def _parse_servers(spec: str) -> dict[int, tuple[str, int, int]]:
    """'h:p:e,h:p:e' (ids 1..n in order) or '1=h:p:e,2=h:p:e'."""
    servers: dict[int, tuple[str, int, int]] = {}
    for i, item in enumerate(filter(None, (s.strip() for s in spec.split(","))), start=1):
        sid, _, addr = item.rpartition("=")
        parts = addr.split(":")
        if len(parts) != 3:
            raise ValueError(f"bad server {item!r}: expected host:peerPort:electionPort")
        servers[int(sid) if sid else i] = (parts[0], int(parts[1]), int(parts[2]))
    return servers


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one-line CommandErrors (exit code 1)."""

    def error(self, message: str):  # type: ignore[override]
        from odradek.zk.cli import CommandError
        raise CommandError(message)


def _jaas_has_server_section(jvm_flags: list[str]) -> bool:
    """True if the flags name a JAAS file with a ``Server`` section (the SASL users); a named
    file that is missing or unparsable is a CommandError naming it."""
    from odradek.zk.cli import CommandError
    from odradek.protocol.jaas import JaasError, java_system_properties, load_jaas_file, login_config_file

    props = java_system_properties(shlex.join(jvm_flags))
    jaas_file = login_config_file(props)
    if jaas_file is None:
        return False
    section = props.get("zookeeper.sasl.serverconfig") or "Server"
    try:
        return section in load_jaas_file(jaas_file)
    except JaasError as exc:
        raise CommandError(str(exc)) from None


def main(argv: list[str]) -> int:
    """``odradek zookeeper start (zoo.cfg | data-dir | --id N --data-dir D --client-port P [--servers ...])``.

    Runs ONE node in the foreground: this process becomes the JVM (exec).
    """
    from odradek.zk.cli import CommandError

    parser = _Parser(prog="odradek zookeeper", description="run one ZooKeeper node (foreground)")
    parser.add_argument("action", choices=["start"])
    parser.add_argument("config", nargs="?", help="a zoo.cfg, or a data dir holding one")
    parser.add_argument("--id", type=int, default=1, help="this node's myid (default 1)")
    parser.add_argument("--data-dir", help="data directory (zoo.cfg and myid are written there)")
    parser.add_argument("--client-port", type=int, default=2181)
    parser.add_argument("--client-address", default="127.0.0.1", help="address clients connect to")
    parser.add_argument("--servers", default="",
                        help="ensemble: host:peerPort:electionPort,... in id order (or id=host:p:e,...)")
    parser.add_argument("--tick-time", type=int, default=2000)
    parser.add_argument("--quorum-listen-on-all-ips", action="store_true",
                        help="bind peer/election ports on all interfaces (containers)")
    args = parser.parse_args(argv)
    try:
        jvm_flags = env_jvm_flags(os.environ)
    except ZooKeeperError as exc:
        raise CommandError(str(exc)) from None
    sasl_server = _jaas_has_server_section(jvm_flags)

    if args.config and not args.data_dir:
        path = Path(args.config)
        cfg = path / "zoo.cfg" if path.is_dir() else path
        if not cfg.is_file():
            raise CommandError(f"no ZooKeeper config at {cfg}")
        if sasl_server and "authProvider." not in cfg.read_text(errors="replace"):
            print(f"warning: the JAAS file has a Server section but {cfg} sets no authProvider.N "
                  "(authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider): "
                  "sasl ACLs will not match", file=sys.stderr)
    else:
        if not args.data_dir:
            raise CommandError("give a zoo.cfg (or a data dir holding one), or --data-dir with --client-port")
        try:
            servers = _parse_servers(args.servers)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if len(servers) > 1 and args.id not in servers:
            raise CommandError(f"--id {args.id} is not one of the --servers ids {sorted(servers)}")
        data_dir = Path(args.data_dir).resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        extra = {"quorumListenOnAllIPs": "true"} if args.quorum_listen_on_all_ips else {}
        if sasl_server:
            from odradek.zk.security import SASL_AUTH_PROVIDER
            extra["authProvider.1"] = SASL_AUTH_PROVIDER
        cfg = data_dir / "zoo.cfg"
        cfg.write_text(render_zoo_cfg(data_dir, args.client_port, servers, args.client_address,
                                      args.tick_time, extra))
        (data_dir / "myid").write_text(f"{args.id}\n")
    try:
        cmd = java_command(cfg.resolve(), jvm_flags)
    except ZooKeeperError as exc:
        raise CommandError(str(exc)) from None
    sys.stdout.flush()
    os.execv(cmd[0], cmd)
    return 0  # not reached
