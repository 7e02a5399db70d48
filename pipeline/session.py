"""SparkSession builder for odradek pipelines, with the environment traps handled in one place.

Invariant: a session built here runs its Python workers with this very
interpreter (``PYSPARK_PYTHON`` from ``sys.executable`` unless the user set it),
binds to loopback when the host name resolves to loopback (``SPARK_LOCAL_IP``),
uses UTC for timestamps, logs at WARN, and has the ``odradek`` data source
registered. It never overrides a master given by ``spark-submit``.
"""
from __future__ import annotations

import os
import socket
import sys
from typing import Any, Mapping

QUIET_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.netty.name = io.netty
logger.netty.level = error
logger.nativecode.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativecode.level = error
logger.aqe.name = org.apache.spark.sql.execution.streaming.runtime.ResolveWriteToStream
logger.aqe.level = error
logger.mbe.name = org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution
logger.mbe.level = error
logger.pyds.name = org.apache.spark.sql.execution.python
logger.pyds.level = error
"""


def _resolves_to_loopback(name: str) -> bool:
    try:
        return all(str(info[4][0]).startswith("127.") or info[4][0] == "::1"
                   for info in socket.getaddrinfo(name, None))
    except OSError:
        return True  # unresolvable: loopback is the only safe choice


def prepare_environment() -> None:
    """Set the environment variables Spark reads at JVM and worker start (only those not set)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if "SPARK_LOCAL_IP" not in os.environ and _resolves_to_loopback(socket.gethostname()):
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")


def _log4j_file() -> str:
    import tempfile
    path = os.path.join(tempfile.gettempdir(), f"odradek-spark-log4j2-{os.getuid()}.properties")
    try:
        with open(path, encoding="utf-8") as fh:
            if fh.read() == QUIET_LOG4J:
                return path
    except OSError:
        pass
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(QUIET_LOG4J)
    os.replace(tmp, path)
    return path


def build_session(app_name: str = "odradek-pipeline", master: str | None = None,
                  conf: Mapping[str, Any] | None = None, quiet: bool = True):
    """A registered SparkSession; ``master`` None means spark-submit's, else ``local[*]``."""
    prepare_environment()
    from pyspark.sql import SparkSession

    from .source import register

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not _in_spark_submit():
        builder = builder.master("local[*]")
    settings: dict[str, Any] = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.stateStore.maintenanceInterval": "60s",
        "spark.executorEnv.PYSPARK_PYTHON": os.environ["PYSPARK_PYTHON"],
    }
    if quiet:
        opt = f"-Dlog4j2.configurationFile=file:{_log4j_file()}"
        settings["spark.driver.extraJavaOptions"] = opt
        settings["spark.executor.extraJavaOptions"] = opt
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    if quiet:
        spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


def _in_spark_submit() -> bool:
    """True when this driver was started by spark-submit (it passes the master to the JVM itself)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or "SPARK_ENV_LOADED" in os.environ
