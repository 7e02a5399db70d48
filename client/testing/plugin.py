"""The ``odradek`` pytest plugin (a ``pytest11`` entry point): real Kafka clusters as fixtures.

Invariant: a cluster lives under pytest's tmp path (per xdist worker, so each worker has its
own clusters, ports and files), on free loopback ports, and every process it started is ended
by PID: at the end of the session, at interpreter exit, and — for a run that was killed before
it could — by the next session, which stops the processes of clusters whose pytest process is
gone (``OwnerRegistry``). ``kafka_cluster`` is shared by every test asking for the same
configuration (marker ``@pytest.mark.kafka_cluster(brokers=3, zookeepers=1, properties={...},
disk=None)``) and is repaired (faults undone, stopped processes restarted) before each test
that uses it.
"""
from __future__ import annotations

import atexit
import os
import re
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import pytest

from odradek.zk.cluster import LocalCluster

from .cluster import KafkaCluster
from .reaper import OwnerRegistry

C = TypeVar("C", bound=LocalCluster)

DEFAULTS: dict[str, Any] = {"brokers": 3, "zookeepers": 1, "properties": None, "disk": None}


def worker_id() -> str:
    """The pytest-xdist worker ("gw0", ...) or "main"."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka_cluster(brokers=3, zookeepers=1, properties=None, disk=None): "
                                       "the cluster the kafka_* fixtures of this test use")
    config.addinivalue_line("markers", "kafka_topic(partitions=1, replication_factor=None, configs=None): "
                                       "the topic kafka_topic creates")


def _runs_root(base: Path) -> Path:
    """pytest's per-user tmp root ("pytest-of-<user>"), shared by every run; else ``base``'s parent."""
    for parent in [base, *base.parents]:
        if parent.name.startswith("pytest-of-"):
            return parent
    return base.parent


class ClusterPool:
    """Started clusters by configuration; stops them all on ``close()`` (and at exit)."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory):
        self.tmp = tmp_path_factory
        self.clusters: dict[str, KafkaCluster] = {}
        self.owned: list[LocalCluster] = []
        self.entries: dict[int, Path] = {}
        self.registry = OwnerRegistry(_runs_root(tmp_path_factory.getbasetemp()) / "odradek-cluster-owners")
        self.registry.reap()
        atexit.register(self.close)

    def new_dir(self, prefix: str) -> Path:
        """A fresh directory under pytest's tmp path (per xdist worker)."""
        return self.tmp.mktemp(f"{prefix}-{worker_id()}")

    def launch(self, cluster: C) -> C:
        """Start ``cluster`` (any LocalCluster), owned by this pool until ``stop``/``close``."""
        self.entries[id(cluster)] = self.registry.register(cluster.data_dir)
        self.owned.append(cluster)
        try:
            cluster.start()
        except BaseException:
            self.owned.remove(cluster)
            self.registry.release(self.entries.pop(id(cluster)))
            raise
        return cluster

    def start(self, brokers: int = 3, zookeepers: int = 1, properties: dict[str, object] | None = None,
              disk: str | None = None, timeout: float = 90.0) -> KafkaCluster:
        """A new started KafkaCluster (stopped by ``close()``)."""
        return self.launch(KafkaCluster(self.new_dir("odradek-kafka") / "cluster", zookeepers=zookeepers,
                                        brokers=brokers, overrides=properties, disk=disk, timeout=timeout,
                                        startup_timeout=timeout))

    def shared(self, **config: Any) -> KafkaCluster:
        key = repr(sorted({**DEFAULTS, **config}.items()))
        if key not in self.clusters:
            self.clusters[key] = self.start(**{**DEFAULTS, **config})
        return self.clusters[key]

    def stop(self, cluster: LocalCluster) -> None:
        if cluster in self.owned:
            self.owned.remove(cluster)
            cluster.stop()
            self.registry.release(self.entries.pop(id(cluster)))

    def close(self) -> None:
        while self.owned:
            cluster = self.owned.pop()
            try:
                cluster.stop()
                self.registry.release(self.entries.pop(id(cluster)))
            except Exception as exc:  # keep stopping the others (the entry stays: reaped later)
                print(f"error stopping the cluster in {cluster.data_dir}: {exc!r}")
        self.clusters.clear()


@pytest.fixture(scope="session")
def _kafka_cluster_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterPool]:
    pool = ClusterPool(tmp_path_factory)
    try:
        yield pool
    finally:
        pool.close()
        atexit.unregister(pool.close)


@pytest.fixture
def kafka_cluster_factory(_kafka_cluster_pool: ClusterPool) -> Iterator[Callable[..., KafkaCluster]]:
    """``kafka_cluster_factory(brokers=3, zookeepers=1, properties=None, disk=None)``: a cluster
    of this test's own, stopped when the test ends."""
    mine: list[KafkaCluster] = []

    def make(**config: Any) -> KafkaCluster:
        cluster = _kafka_cluster_pool.start(**{**DEFAULTS, **config})
        mine.append(cluster)
        return cluster

    try:
        yield make
    finally:
        for cluster in mine:
            _kafka_cluster_pool.stop(cluster)


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest, _kafka_cluster_pool: ClusterPool) -> KafkaCluster:
    """The session's cluster for this test's ``kafka_cluster`` marker (3 brokers, 1 ZooKeeper
    node by default), with any fault a previous test left undone."""
    marker = request.node.get_closest_marker("kafka_cluster")
    config = dict(marker.kwargs) if marker else {}
    unknown = set(config) - set(DEFAULTS) - {"timeout"}
    if unknown:
        raise pytest.UsageError(f"unknown kafka_cluster option(s): {', '.join(sorted(unknown))}")
    cluster = _kafka_cluster_pool.shared(**config)
    cluster.repair()
    return cluster


@pytest.fixture
def kafka_bootstrap(kafka_cluster: KafkaCluster) -> str:
    """The cluster's bootstrap servers, "127.0.0.1:p1,127.0.0.1:p2,..."."""
    return kafka_cluster.bootstrap_servers


def _unique(request: pytest.FixtureRequest, prefix: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:120]
    return f"{prefix}-{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kafka_topic(request: pytest.FixtureRequest, kafka_cluster: KafkaCluster) -> Iterator[str]:
    """A fresh topic (marker ``kafka_topic(partitions=1, replication_factor=min(3, brokers),
    configs=None)``), ready on every broker; deleted after the test."""
    from odradek.client import AdminClient
    from .topics import create_topic
    marker = request.node.get_closest_marker("kafka_topic")
    options = dict(marker.kwargs) if marker else {}
    name = _unique(request, "topic")
    create_topic(kafka_cluster.bootstrap_servers, name, options.get("partitions", 1),
                 options.get("replication_factor") or min(3, len(kafka_cluster.brokers)), options.get("configs"))
    yield name
    try:
        with AdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers) as admin:
            admin.delete_topics([name])
    except Exception as exc:  # a test that broke the cluster: the topic goes with it
        print(f"could not delete topic {name}: {exc!r}")


@pytest.fixture
def kafka_producer(kafka_bootstrap: str) -> Iterator[Any]:
    """odradek's Producer (acks=all, idempotent), closed after the test."""
    from odradek.client import Producer
    producer = Producer(bootstrap_servers=kafka_bootstrap, acks="all", enable_idempotence=True)
    try:
        yield producer
    finally:
        producer.close()


@pytest.fixture
def kafka_consumer(request: pytest.FixtureRequest, kafka_bootstrap: str, kafka_topic: str) -> Iterator[Any]:
    """odradek's Consumer in a fresh group, subscribed to ``kafka_topic`` from the earliest
    offset, closed after the test."""
    from odradek.client import Consumer
    consumer = Consumer(kafka_topic, bootstrap_servers=kafka_bootstrap, group_id=_unique(request, "group"),
                        auto_offset_reset="earliest")
    try:
        yield consumer
    finally:
        consumer.close()


@pytest.fixture
def kafka_admin(kafka_bootstrap: str) -> Iterator[Any]:
    """odradek's AdminClient, closed after the test."""
    from odradek.client import AdminClient
    admin = AdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        yield admin
    finally:
        admin.close()
