"""Fixtures of the docker tier; see compose_cluster.py for what the cluster guarantees.

- ``cluster`` (session): docker/docker-compose.yml up (image built first by
  docker/build-image), as a ``compose_cluster.ComposeCluster``; ``down --volumes`` at the
  end whatever happened, with every service's log tail printed when a test failed.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from compose_cluster import (BROKERS, DOCKER_DIR, IMAGE, ZK_SESSION_TIMEOUT_MS, ComposeCluster, _run,
                             _unavailable, free_ports, wait_until)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "docker: docker compose cluster on a real Docker engine (testcontainers)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeCluster]:
    reason = _unavailable()
    if reason:  # tests/run starts an engine (docker/start-dockerd); without one this tier fails
        pytest.fail(f"docker tier needs a Docker engine and Compose v2: {reason}")
    from testcontainers.compose import DockerCompose

    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    t0 = time.monotonic()
    build = subprocess.run(["bash", str(DOCKER_DIR / "build-image")], capture_output=True, text=True,
                           timeout=1800, env={**os.environ, "ODRADEK_IMAGE": IMAGE})
    if build.returncode != 0:
        pytest.fail(f"docker/build-image failed:\n{build.stdout}\n{build.stderr}")
    sys.stderr.write(f"\n[docker] image {IMAGE} ready in {time.monotonic() - t0:.0f} s\n")

    project = f"odradek-test-{uuid.uuid4().hex[:8]}"
    env_file = tmp_path_factory.mktemp("compose") / "test.env"
    compose = DockerCompose(context=str(DOCKER_DIR), compose_file_name="docker-compose.yml",
                            env_file=str(env_file), wait=True, pull=False, build=False)
    c = ComposeCluster(compose, project, {})
    t1 = time.monotonic()
    try:
        for attempt in range(3):
            # Fresh ports each attempt: one may have been taken between picking and binding.
            c.ports = dict(zip(BROKERS, free_ports(len(BROKERS))))
            env_file.write_text("".join(f"{k}={v}\n" for k, v in {
                "COMPOSE_PROJECT_NAME": project,
                "ODRADEK_IMAGE": IMAGE,
                "ODRADEK_PUBLISH_ADDRESS": "127.0.0.1",
                "ODRADEK_ZK_SESSION_TIMEOUT_MS": ZK_SESSION_TIMEOUT_MS,
                **{f"ODRADEK_BROKER{b}_PORT": p for b, p in c.ports.items()},
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
        # Healthy brokers answer ApiVersions; wait until they also know each other.
        wait_until(lambda: c.broker_count() == len(BROKERS), 60, "all three brokers in the cluster metadata")
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


@pytest.fixture
def healthy_cluster(cluster: ComposeCluster) -> ComposeCluster:
    """The session cluster, healed first if an earlier test left it broken."""
    cluster.heal()
    return cluster
