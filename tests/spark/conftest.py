"""Fixtures of the Spark tests: one SparkSession (local[2]) for the whole test session.

Invariant: the session is built once with ``odradek.pipeline.build_session`` (so the
tests run with the same environment handling as users) and stopped at the end;
brokers come from ``cluster_factory`` (real processes, stopped by PID). Tests here
are ``integration`` tests.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import pyarrow  # noqa: F401  (the test extra installs both; a missing one is a failure)
import pyspark  # noqa: F401


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def spark():
    from odradek.pipeline import build_session
    session = build_session("odradek-tests", master="local[2]", conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.sql.streaming.minBatchesToRetain": "10",
    })
    try:
        yield session
    finally:
        for q in session.streams.active:
            try:
                q.stop()
            except Exception:
                pass
        session.stop()

