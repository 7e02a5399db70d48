"""Helpers of the docker tier (imported by conftest.py and the tests as ``compose_cluster``).

The docker tier: docker/docker-compose.yml (3 ZooKeeper nodes + 3 brokers) on a real engine,
driven by testcontainers' ``DockerCompose``.

Invariant: one compose project per test session, named ``odradek-test-<hex>``, with the
brokers' EXTERNAL listeners on free host ports (127.0.0.1 only) and
``zookeeper.session.timeout.ms=6000``; it is brought up once (``up --wait``: every
container healthy) and always torn down with ``down --volumes``, also when a test fails
(the logs of every service are printed then). The image is (re)built first by
docker/build-image, which does nothing when it is up to date. Tests that break the cluster
(kill, disconnect) heal it before they return, so the next test starts from six healthy
containers and all replicas in sync. The tier fails, with the reason, when no Docker
engine, Compose v2 or testcontainers is at hand (`bash docker/start-dockerd`, which
tests/run calls, provides the first two, the test extra the last).

The ``cluster`` fixture (session, conftest.py) is a ``ComposeCluster``: bootstrap servers,
container ids per service, compose and docker commands, metadata and wait helpers.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek import testing
from odradek.zk.ensemble import free_ports

ROOT = Path(__file__).resolve().parents[2]
DOCKER_DIR = ROOT / "docker"
IMAGE = os.environ.get("ODRADEK_IMAGE", "odradek:latest")
ZK_SESSION_TIMEOUT_MS = 6000
BROKERS = (1, 2, 3)
ZOOKEEPERS = (1, 2, 3)


def _run(cmd: list[str], timeout: float = 120, check: bool = True, **kw: Any) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def _unavailable() -> str | None:
    """None if the docker tier can run here, else why not."""
    try:
        import testcontainers.compose  # noqa: F401
    except ImportError:
        return "testcontainers is not installed (pip install -e '.[test]')"
    if shutil.which("docker") is None:
        return "no docker CLI (bash docker/start-dockerd installs and starts Docker)"
    try:
        if _run(["docker", "info"], timeout=30, check=False).returncode != 0:
            return "no Docker engine answers (bash docker/start-dockerd)"
        if _run(["docker", "compose", "version"], timeout=30, check=False).returncode != 0:
            return "no Compose v2 (`docker compose`): bash docker/start-dockerd installs it"
    except subprocess.TimeoutExpired:
        return "the Docker engine does not answer"
    return None


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    """odradek.testing's wait, where any error counts as "not yet" (containers come and go)."""
    return testing.wait_until(condition, timeout, what, interval=interval, retry_on=(Exception,))


class ComposeCluster:
    def __init__(self, compose: Any, project: str, ports: dict[int, int]) -> None:
        self.compose = compose
        self.project = project
        self.ports = ports                       # broker id -> host port of its EXTERNAL listener
        self.metrics_ports: dict[int, int] = {}  # broker id -> host port of its /metrics endpoint
        self.network = f"{project}_cluster"
        self._ids: dict[str, str] = {}

    # -- addresses and containers
    @property
    def bootstrap(self) -> str:
        return ",".join(f"localhost:{self.ports[b]}" for b in BROKERS)

    @property
    def metrics_urls(self) -> dict[int, str]:
        return {b: f"http://localhost:{port}/metrics" for b, port in self.metrics_ports.items()}

    def container(self, service: str) -> str:
        """The container id of a service (stable across kill/start/restart)."""
        if service not in self._ids:
            self._ids[service] = self.compose.get_container(service_name=service, include_all=True).ID
        return self._ids[service]

    def broker(self, broker_id: int) -> str:
        return self.container(f"broker-{broker_id}")

    def compose_cmd(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return _run([*self.compose.compose_command_property, *args], timeout=timeout, cwd=DOCKER_DIR)

    def docker(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        return _run(["docker", *args], timeout=timeout, check=check)

    def exec_python(self, service: str, code: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run a Python snippet inside a service's container (the image's venv)."""
        return self.docker("exec", self.container(service), "python", "-c", code, timeout=timeout, check=False)

    def health(self, service: str) -> str:
        return self.docker("inspect", "-f", "{{if .State.Health}}{{.State.Health.Status}}{{else}}"
                           "{{.State.Status}}{{end}}", self.container(service), check=False).stdout.strip()

    def wait_healthy(self, services: list[str] | None = None, timeout: float = 120) -> None:
        services = services or [*(f"zookeeper-{i}" for i in ZOOKEEPERS), *(f"broker-{b}" for b in BROKERS)]
        wait_until(lambda: all(self.health(s) == "healthy" for s in services), timeout,
                   f"{', '.join(services)} to be healthy")

    # -- metadata, from the brokers themselves
    def admin(self, bootstrap: str | None = None):
        from odradek.client import AdminClient
        return AdminClient(bootstrap_servers=bootstrap or self.bootstrap, request_timeout_ms=5000,
                           socket_connection_setup_timeout_ms=2000)

    def broker_count(self, bootstrap: str | None = None) -> int:
        """How many brokers the cluster metadata lists."""
        admin = self.admin(bootstrap)
        try:
            return len(admin.describe_cluster()["brokers"])
        finally:
            admin.close()

    def partitions(self, topic: str, bootstrap: str | None = None) -> list[dict[str, Any]]:
        admin = self.admin(bootstrap)
        try:
            (desc,) = admin.describe_topics([topic])
        finally:
            admin.close()
        if desc["error_code"] != 0:
            raise AssertionError(f"{topic}: error {desc['error_code']}")
        return desc["partitions"]

    def partition(self, topic: str, partition: int = 0, bootstrap: str | None = None) -> dict[str, Any]:
        return next(p for p in self.partitions(topic, bootstrap) if p["partition"] == partition)

    def wait_in_sync(self, topic: str, timeout: float = 120) -> list[dict[str, Any]]:
        """Until every partition of ``topic`` has a leader and all its replicas in the ISR."""
        def check():
            parts = self.partitions(topic)
            ok = parts and all(p["leader"] >= 0 and sorted(p["isr"]) == sorted(p["replicas"]) for p in parts)
            return parts if ok else None
        return wait_until(check, timeout, f"every replica of {topic} in the ISR")

    def heal(self, timeout: float = 180) -> None:
        """Every container running, on the cluster network, healthy, and every broker registered
        (after a test broke something)."""
        import json
        for service in [*(f"zookeeper-{i}" for i in ZOOKEEPERS), *(f"broker-{b}" for b in BROKERS)]:
            cid = self.container(service)
            info = json.loads(self.docker("inspect", "-f", "{{json .State.Running}} {{json .NetworkSettings.Networks}}",
                                          cid).stdout.split(" ", 1)[1])
            if self.network not in info:
                self.docker("network", "connect", f"--alias={service}", self.network, cid)
            running = self.docker("inspect", "-f", "{{.State.Running}}", cid).stdout.strip()
            if running != "true":
                self.docker("start", cid)
        self.wait_healthy(timeout=timeout)
        # Each broker's own view (a broker cut off from ZooKeeper answers from a stale one).
        for b in BROKERS:
            wait_until(lambda: self.broker_count(f"localhost:{self.ports[b]}") == len(BROKERS), timeout,
                       f"broker {b} to see every broker registered")

    def logs(self, tail: str = "all") -> str:
        proc = _run([*self.compose.compose_command_property, "logs", "--no-color", "--timestamps",
                     "--tail", tail], timeout=120, check=False, cwd=DOCKER_DIR)
        return proc.stdout + proc.stderr




@contextlib.contextmanager
def compose_project(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                    files: list[str], env: dict[str, str] | None = None) -> Iterator[ComposeCluster]:
    """A compose project of ``files`` up (every container healthy, all brokers registered), and
    ``down --volumes`` afterwards whatever happened, with the logs kept when a test failed."""
    from testcontainers.compose import DockerCompose

    project = f"odradek-test-{uuid.uuid4().hex[:8]}"
    env_file = tmp_path_factory.mktemp("compose") / "test.env"
    compose = DockerCompose(context=str(DOCKER_DIR), compose_file_name=files,
                            env_file=str(env_file), wait=True, pull=False, build=False)
    c = ComposeCluster(compose, project, {})
    t1 = time.monotonic()
    try:
        for attempt in range(3):
            # Fresh ports each attempt: one may have been taken between picking and binding.
            ports = free_ports(2 * len(BROKERS))
            c.ports = dict(zip(BROKERS, ports))
            c.metrics_ports = dict(zip(BROKERS, ports[len(BROKERS):]))
            env_file.write_text("".join(f"{k}={v}\n" for k, v in {
                "COMPOSE_PROJECT_NAME": project,
                "ODRADEK_IMAGE": IMAGE,
                "ODRADEK_PUBLISH_ADDRESS": "127.0.0.1",
                "ODRADEK_ZK_SESSION_TIMEOUT_MS": ZK_SESSION_TIMEOUT_MS,
                **{f"ODRADEK_BROKER{b}_PORT": p for b, p in c.ports.items()},
                "ODRADEK_UI_PORT": free_ports(1)[0],   # the web view (ui service)
                **{f"ODRADEK_BROKER{b}_METRICS_PORT": p for b, p in c.metrics_ports.items()},
                **(env or {}),
            }.items()))
            try:
                compose.start()                   # up --wait: every container healthy
                break
            except subprocess.CalledProcessError as exc:
                sys.stderr.write(f"[docker] compose up failed (attempt {attempt + 1}):\n"
                                 f"{(exc.stderr or b'').decode(errors='replace')[-2000:]}\n")
                compose.stop(down=True)
                if attempt == 2:
                    raise
        sys.stderr.write(f"[docker] cluster {project} up in {time.monotonic() - t1:.0f} s "
                         f"(bootstrap {c.bootstrap})\n")
        yield c
    finally:
        if request.session.testsfailed:
            logs = c.logs()
            path = tmp_path_factory.getbasetemp() / f"{project}.log"
            path.write_text(logs)
            tail = "\n".join(logs.splitlines()[-60:])
            sys.stderr.write(f"\n--- docker compose logs of {project}: {path}; the last lines:\n{tail}\n")
        try:
            compose.stop(down=True)           # down --volumes
        finally:
            _run(["docker", "network", "rm", c.network], check=False)  # if a test left it attached


# ---------------------------------------------------------------- producing and reading

class BackgroundProducer:
    """An acks=all producer sending ``<prefix>-<n>`` to one partition from a thread, with at
    most ``window`` records unacknowledged, until ``stop()``; remembers what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, prefix: str, partition: int = 0, window: int = 20) -> None:
        import threading

        from odradek.client import Producer
        self.topic, self.prefix, self.partition = topic, prefix, partition
        self.producer = Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=0,
                                 request_timeout_ms=5000, delivery_timeout_ms=90000, retry_backoff_ms=200,
                                 socket_connection_setup_timeout_ms=2000, max_block_ms=90000)
        self.acked: dict[str, int] = {}          # value -> offset
        self.failed: dict[str, str] = {}         # value -> error
        self.sent = 0
        self._lock = threading.Lock()
        self._window = threading.Semaphore(window)
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"producer-{prefix}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            n = 0
            while not self._stop.is_set():
                if not self._window.acquire(timeout=0.5):
                    continue
                value = f"{self.prefix}-{n}"
                n += 1
                self.sent = n
                self.producer.send(self.topic, value=value.encode(), partition=self.partition,
                                   callback=lambda md, exc, v=value: self._done(v, md, exc))
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    def _done(self, value: str, md: Any, exc: BaseException | None) -> None:
        with self._lock:
            if exc is None:
                self.acked[value] = md.offset
            else:
                self.failed[value] = repr(exc)
        self._window.release()

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        try:
            self.producer.flush(120)
        finally:
            self.producer.close(10)
        if self.error is not None:
            raise AssertionError(f"the background producer died: {self.error!r}")


def read_partition(bootstrap: str, topic: str, partition: int = 0, timeout: float = 60) -> dict[int, str]:
    """offset -> value of every record of a partition, from its leader, up to its end offset."""
    from odradek.client import Consumer, TopicPartition
    tp = TopicPartition(topic, partition)
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", request_timeout_ms=10000)
    out: dict[int, str] = {}
    try:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise AssertionError(f"read only up to {consumer.position(tp)} of {end} in {topic}-{partition}")
            for records in consumer.poll(timeout_ms=500).values():
                out.update((r.offset, r.value.decode()) for r in records)
    finally:
        consumer.close()
    return out


# Runs inside a broker container: the records of a partition as stored in its log dir.
LOG_SCAN = """
import glob, json, sys
from odradek.protocol.records import iter_batches
out = []
for path in sorted(glob.glob('/var/lib/odradek/kafka/%(topic)s-%(partition)d/*.log')):
    with open(path, 'rb') as f:
        data = f.read()
    try:
        for header, records in iter_batches(data):
            if not header.is_control:
                out += [[r.offset, r.value.decode()] for r in records]
    except Exception as exc:  # a batch still being written at the tail
        pass
print(json.dumps(out))
"""


def stored_records(cluster: "ComposeCluster", broker_id: int, topic: str, partition: int = 0) -> dict[int, str]:
    import json
    proc = cluster.exec_python(f"broker-{broker_id}", LOG_SCAN % {"topic": topic, "partition": partition})
    if proc.returncode != 0:
        raise AssertionError(f"log scan in broker-{broker_id} failed: {proc.stderr}")
    return {o: v for o, v in json.loads(proc.stdout)}


# Runs inside an isolated broker container: produce to it through its own EXTERNAL listener.
ISOLATED_PRODUCE = """
import json
from odradek.client import Producer
out = {}
for acks in ('all', 1):
    p = Producer(bootstrap_servers='localhost:%(port)d', acks=acks, retries=0, request_timeout_ms=8000,
                 delivery_timeout_ms=15000, max_block_ms=10000)
    try:
        md = p.send('%(topic)s', value=('isolated-acks-%%s' %% acks).encode(), partition=0).get(30)
        out[str(acks)] = ['ok', md.offset]
    except Exception as exc:
        out[str(acks)] = ['error', repr(exc)]
    finally:
        p.close(5)
print(json.dumps(out))
"""
