"""``odradek connect-standalone`` and ``odradek connect-distributed``: start a worker, serve
the REST API, run until SIGTERM/SIGINT.

Invariant: a clean shutdown (signal) stops the REST server first, then every
task (sources flush their producer and store their offsets, sinks flush and
commit), then the connectors; a bad configuration is one line on stderr and
exit code 1.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Any

from .api import ConfigException
from .config import WorkerConfig, read_properties

log = logging.getLogger("odradek.connect")


def _setup_logging(props: dict[str, str]) -> None:
    level = props.get("log.level", "INFO").upper()
    logging.basicConfig(level=getattr(logging, level, logging.INFO), stream=sys.stderr,
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")


def _cluster_id(wc: WorkerConfig) -> str | None:
    try:
        from odradek.client import AdminClient
        admin = AdminClient(wc.admin_props())
        try:
            return admin.describe_cluster().get("cluster_id")
        finally:
            admin.close()
    except Exception as exc:
        log.warning("could not read the Kafka cluster id: %s", exc)
        return None


def _wait_for_signal() -> None:
    done = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        log.info("received signal %d, shutting down", signum)
        done.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    while not done.wait(1.0):
        pass


def standalone_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="odradek connect-standalone",
                                 description="A Kafka Connect worker in standalone mode.")
    ap.add_argument("worker_properties")
    ap.add_argument("connector_properties", nargs="*")
    args = ap.parse_args(argv)
    from .herder import RestError, StandaloneHerder
    from .rest import RestServer
    try:
        props = read_properties(args.worker_properties)
        _setup_logging(props)
        wc = WorkerConfig(props, distributed=False)
        connectors = [read_properties(p) for p in args.connector_properties]
    except ConfigException as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    herder = StandaloneHerder(wc)
    herder.kafka_cluster_id = _cluster_id(wc)
    herder.start()
    try:
        rest = RestServer(wc.rest_host, wc.rest_port, herder)
    except OSError as exc:
        print(f"Error: cannot listen on {wc.rest_host or '0.0.0.0'}:{wc.rest_port}: {exc.strerror}", file=sys.stderr)
        herder.stop()
        return 1
    rest.start()
    log.info("Kafka Connect standalone worker %s started, REST at %s", wc.worker_id, wc.advertised_url)
    try:
        for cprops in connectors:
            name = cprops.get("name", "")
            try:
                herder.put_connector_config(name, cprops, allow_replace=False)
                log.info("created connector %s", name)
            except RestError as exc:
                print(f"Error: connector {name!r}: {exc.message}", file=sys.stderr)
                return 1
        _wait_for_signal()
    finally:
        rest.stop()
        herder.stop()
        log.info("Kafka Connect stopped")
    return 0


def distributed_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="odradek connect-distributed",
                                 description="A Kafka Connect worker in distributed mode.")
    ap.add_argument("worker_properties")
    args = ap.parse_args(argv)
    from .distributed import DistributedHerder
    from .rest import RestServer
    try:
        props = read_properties(args.worker_properties)
        _setup_logging(props)
        wc = WorkerConfig(props, distributed=True)
    except ConfigException as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    herder = DistributedHerder(wc)
    herder.kafka_cluster_id = _cluster_id(wc)
    try:
        rest = RestServer(wc.rest_host, wc.rest_port, herder)
    except OSError as exc:
        print(f"Error: cannot listen on {wc.rest_host or '0.0.0.0'}:{wc.rest_port}: {exc.strerror}", file=sys.stderr)
        return 1
    rest.start()
    herder.start()
    log.info("Kafka Connect distributed worker %s started, REST at %s", wc.worker_id, wc.advertised_url)
    try:
        _wait_for_signal()
    finally:
        rest.stop()
        herder.stop()
        log.info("Kafka Connect stopped")
    return 0
