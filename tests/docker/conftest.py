"""Fixtures of the docker tier; see compose_cluster.py for what the cluster guarantees.

- ``image`` (session): the image, built by docker/build-image.
- ``cluster`` (session): docker/docker-compose.yml up, as a ``compose_cluster.ComposeCluster``;
  ``down --volumes`` at the end whatever happened, with every service's log tail printed when a
  test failed. ``compose_project`` does the same for other compose files (the secured variant).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compose_cluster import BROKERS, DOCKER_DIR, IMAGE, ComposeCluster, _unavailable, compose_project, wait_until


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "docker: docker compose cluster on a real Docker engine (testcontainers)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def image() -> str:
    """The odradek image, (re)built by docker/build-image (a no-op when up to date)."""
    reason = _unavailable()
    if reason:  # tests/run starts an engine (docker/start-dockerd); without one this tier fails
        pytest.fail(f"docker tier needs a Docker engine and Compose v2: {reason}")
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    t0 = time.monotonic()
    build = subprocess.run(["bash", str(DOCKER_DIR / "build-image")], capture_output=True, text=True,
                           timeout=1800, env={**os.environ, "ODRADEK_IMAGE": IMAGE})
    if build.returncode != 0:
        pytest.fail(f"docker/build-image failed:\n{build.stdout}\n{build.stderr}")
    sys.stderr.write(f"\n[docker] image {IMAGE} ready in {time.monotonic() - t0:.0f} s\n")
    return IMAGE


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            image: str) -> Iterator[ComposeCluster]:
    with compose_project(request, tmp_path_factory, ["docker-compose.yml"]) as c:
        # Healthy brokers answer ApiVersions; wait until they also know each other.
        wait_until(lambda: c.broker_count() == len(BROKERS), 60, "all three brokers in the cluster metadata")
        yield c


@pytest.fixture
def healthy_cluster(cluster: ComposeCluster) -> ComposeCluster:
    """The session cluster, healed first if an earlier test left it broken."""
    cluster.heal()
    return cluster
