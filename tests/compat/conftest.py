"""A cluster shared by the compatibility tests: one ZooKeeper node, one broker, real processes."""
from __future__ import annotations

import pytest

from odradek.zk.cluster import LocalCluster


@pytest.fixture(scope="session")
def compat_cluster(tmp_path_factory):
    cluster = LocalCluster(tmp_path_factory.mktemp("compat-cluster"), zookeepers=1, brokers=1)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
