"""odradek.pipeline: stream processing on Apache Spark over odradek topics.

Invariant: imports nothing of odradek but ``odradek.client`` and
``odradek.protocol``, and nothing of Spark until used, so ``odradek pipeline
--help`` and the client-only tools work without a JVM.

    from odradek.pipeline import build_session
    spark = build_session("my-job")          # registers format("odradek")
    df = spark.readStream.format("odradek").option("kafka.bootstrap.servers", bs) \\
        .option("subscribe", "page-views").load()

or, with a session of your own: ``from odradek.pipeline import register; register(spark)``.
"""
from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the ``odradek`` data source in ``spark`` (a SparkSession)."""
    from .source import register as _register
    _register(spark)


def build_session(*args: Any, **kwargs: Any) -> Any:
    """See ``odradek.pipeline.session.build_session``."""
    from .session import build_session as _build
    return _build(*args, **kwargs)


__all__ = ["register", "build_session"]
