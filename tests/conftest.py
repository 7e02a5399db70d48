"""Shared pytest fixtures: real ZooKeeper ensembles and local clusters.

Invariant: every process a fixture starts is stopped by PID in its teardown,
also when the test fails; temp dirs come from pytest's tmp_path machinery;
ports are picked free, never assumed. Tests under tests/integration are marked
``integration`` automatically; they fail (not skip) when Java or ZooKeeper is missing.

Fixtures:
- ``zk_ensemble`` (session): one 3-node ensemble shared by the session. Do NOT
  stop its nodes; fault tests start their own ``ZooKeeperEnsemble``.
- ``zk_connect`` (function): a connect string with a fresh chroot on that
  ensemble (``127.0.0.1:p1,...:p3/t-<hex>``), so tests never see each other's znodes.
- ``zk`` (function): a started kazoo client on ``zk_connect``.
- ``register_brokers`` (function): ``register_brokers([1, 2, 3])`` writes fake
  ephemeral /brokers/ids/<id> znodes (v5 JSON) through ``zk``.
- ``cluster_factory`` (function): ``cluster_factory(brokers=3, zookeepers=1,
  overrides={...}, extra_listeners={id: [...]})`` -> a started ``LocalCluster`` (an
  ``odradek.testing.ObservedCluster``: the plugin's observers) with its OWN ensemble (1 node
  by default for speed; pass zookeepers=3 for ZooKeeper fault tests). All are
  stopped at teardown; on failure the tail of every broker log is printed. A thin wrapper
  over the odradek pytest plugin's cluster pool (its ``kafka_cluster``, ``kafka_topic``, ...
  fixtures are available here too: odradek.testing.plugin).
- ``free_port`` (function): ``free_port()`` -> a free loopback TCP port.
"""
from __future__ import annotations

import faulthandler
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from odradek_test_support import _failed, free_port


def _zookeeper_available() -> str | None:
    """None if a ZooKeeper ensemble can be launched here, else the reason."""
    from odradek.zk.ensemble import ZooKeeperError, find_classpath, find_java
    try:
        find_java()
        find_classpath()
    except ZooKeeperError as exc:
        return str(exc)
    return None


# ---------------------------------------------------------------- hooks

TEARDOWN_STACKS_AFTER = 300.0  # s
_TERMINAL = pytest.StashKey[int]()  # the terminal's stderr, kept from before output capture


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: real ZooKeeper ensemble and broker processes")
    config.addinivalue_line("markers", "compat: third-party Kafka clients against real brokers")
    config.stash[_TERMINAL] = os.dup(2)  # pytest's output capture is suspended here


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = None
    checked = False
    for item in items:
        if "integration" in Path(str(item.fspath)).parts:
            item.add_marker(pytest.mark.integration)
        if item.get_closest_marker("integration") or item.get_closest_marker("compat"):
            if not checked:
                reason, checked = _zookeeper_available(), True
            if reason:  # .ci/bootstrap installs Java and ZooKeeper: without them these tests fail
                item.add_marker(pytest.mark.usefixtures("_zookeeper_required"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item):
    """Print every thread's stack to the terminal if a teardown runs past
    ``TEARDOWN_STACKS_AFTER``: pytest-timeout (and ``faulthandler_timeout``) stop watching a
    test once it has failed, so a hung teardown after a failure would stall the run silently."""
    faulthandler.dump_traceback_later(TEARDOWN_STACKS_AFTER, file=item.config.stash[_TERMINAL])
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def pytest_unconfigure(config: pytest.Config) -> None:
    os.close(config.stash[_TERMINAL])


# ---------------------------------------------------------------- fixtures

@pytest.fixture
def _zookeeper_required() -> None:
    reason = _zookeeper_available()
    if reason:
        pytest.fail(f"needs Java and ZooKeeper (bash .ci/bootstrap installs them): {reason}")


@pytest.fixture(name="free_port")
def free_port_fixture() -> Callable[[], int]:
    return free_port


@pytest.fixture(scope="session")
def zk_ensemble(tmp_path_factory: pytest.TempPathFactory):
    from odradek.zk.ensemble import ZooKeeperEnsemble
    reason = _zookeeper_available()
    if reason:
        pytest.fail(f"needs Java and ZooKeeper (bash .ci/bootstrap installs them): {reason}")
    ensemble = ZooKeeperEnsemble(tmp_path_factory.mktemp("zk-ensemble"), size=3)
    ensemble.start(timeout=60)
    try:
        yield ensemble
    finally:
        ensemble.stop()


@pytest.fixture
def zk_connect(zk_ensemble) -> Iterator[str]:
    from odradek.zk.admin import open_zk
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    root = open_zk(zk_ensemble.connect_string, timeout=30)
    try:
        root.ensure_path(chroot)
        yield zk_ensemble.connect_string + chroot
        root.delete(chroot, recursive=True)
    finally:
        root.stop()
        root.close()


@pytest.fixture
def zk(zk_connect: str):
    from odradek.zk.admin import open_zk
    client = open_zk(zk_connect, timeout=30)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def register_brokers(zk) -> Callable[[list[int]], None]:
    from odradek.zk.znodes import BrokerIdZNode, BrokerInfo, Endpoint

    def register(ids: list[int]) -> None:
        for broker_id in ids:
            info = BrokerInfo(broker_id, [Endpoint("PLAINTEXT", "127.0.0.1", free_port())])
            zk.create(BrokerIdZNode.path(broker_id), BrokerIdZNode.encode(info), ephemeral=True, makepath=True)

    return register


@pytest.fixture
def cluster_factory(_kafka_cluster_pool, request: pytest.FixtureRequest):
    """A thin wrapper over the odradek pytest plugin's cluster pool (odradek.testing.plugin: dirs
    under pytest's tmp path per xdist worker, processes ended by PID, also after a crashed run),
    serving LocalClusters with the plugin's observers (odradek.testing.ObservedCluster: leader,
    isr, controller, live_brokers, ...): Kafka's defaults, no proxies."""
    from odradek.testing.observers import ObservedCluster
    from odradek.zk.ensemble import log_tail
    clusters: list[ObservedCluster] = []

    def make(brokers: int = 1, zookeepers: int = 1, overrides: dict[str, object] | None = None,
             startup_timeout: float = 90.0, extra_listeners: dict[int, list[str]] | None = None) -> ObservedCluster:
        cluster = ObservedCluster(_kafka_cluster_pool.new_dir("cluster"), zookeepers=zookeepers, brokers=brokers,
                                  overrides=overrides, startup_timeout=startup_timeout, extra_listeners=extra_listeners)
        clusters.append(cluster)
        return _kafka_cluster_pool.launch(cluster)

    try:
        yield make
    finally:
        failed = _failed(request)
        for cluster in clusters:
            if failed:
                for broker in cluster.brokers.values():
                    print(f"\n--- tail of {broker.log_path}:\n{log_tail(broker.log_path, 50)}")
            try:
                _kafka_cluster_pool.stop(cluster)
            except Exception as exc:  # keep stopping the others
                print(f"error stopping cluster in {cluster.data_dir}: {exc!r}")
        if not failed:
            for cluster in clusters:
                shutil.rmtree(cluster.data_dir, ignore_errors=True)


@pytest.fixture
def odradek_env(zk_connect: str, tmp_path: Path) -> dict[str, str]:
    """Environment for running ``odradek`` subprocesses against the per-test chroot."""
    return {**os.environ, "ODRADEK_ZOOKEEPER": zk_connect, "ODRADEK_DATA_DIR": str(tmp_path / "no-cluster")}
