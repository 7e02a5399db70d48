"""Worker and connector configuration: Kafka Connect's property names and defaults.

Invariant: a ``WorkerConfig``/``ConnectorConfig`` is built once from a flat
``dict[str, str]`` (a .properties file or a REST body), validated in its
constructor (``ConfigException`` with one clear line), and only read
afterwards. Client settings reach the Producer/Consumer/AdminClient through
``producer.*``/``consumer.*``/``admin.*`` prefixes, filtered to the keys
odradek's clients know.
"""
from __future__ import annotations

import os
import socket
from typing import Any, Mapping
from urllib.parse import urlparse

from odradek.client.config import ADMIN, COMMON, CONSUMER, PRODUCER

from .api import ConfigException

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"


def read_properties(path: str) -> dict[str, str]:
    """``k=v`` / ``k: v`` lines of a Java .properties file (comments, blank lines and ``\\`` continuations)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigException(f"cannot read {path}: {exc.strerror}") from None
    return parse_properties(text)


def parse_properties(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        line, logical = logical + line, ""
        idx = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if idx < 0:
            key, value = line, ""
        else:
            key, value = line[:idx], line[idx + 1:]
        out[key.strip()] = value.strip()
    return out


def _int(props: Mapping[str, str], key: str, default: int) -> int:
    raw = props.get(key)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigException(f"Invalid value {raw} for configuration {key}: Not a number of type INT") from None


def _bool(props: Mapping[str, str], key: str, default: bool) -> bool:
    raw = props.get(key)
    if raw is None or raw == "":
        return default
    s = str(raw).strip().lower()
    if s not in ("true", "false"):
        raise ConfigException(f"Invalid value {raw} for configuration {key}: Expected value to be either true or false")
    return s == "true"


def _client_props(props: Mapping[str, str], prefix: str, specs: dict) -> dict[str, Any]:
    out: dict[str, Any] = {"bootstrap.servers": props.get("bootstrap.servers", "localhost:9092")}
    for key, value in props.items():
        if key.startswith(prefix):
            name = key[len(prefix):]
            if name in specs or name in COMMON:
                out[name] = value
    return out


class WorkerConfig:
    """A worker's settings (standalone or distributed)."""

    def __init__(self, props: Mapping[str, str], distributed: bool) -> None:
        self.props = dict(props)
        self.distributed = distributed
        p = self.props
        self.bootstrap_servers = p.get("bootstrap.servers", "localhost:9092")
        self.offset_flush_interval_ms = _int(p, "offset.flush.interval.ms", 60000)
        self.offset_flush_timeout_ms = _int(p, "offset.flush.timeout.ms", 5000)
        self.task_shutdown_timeout_ms = _int(p, "task.shutdown.graceful.timeout.ms", 5000)
        self.key_converter = p.get("key.converter", JSON_CONVERTER)
        self.value_converter = p.get("value.converter", JSON_CONVERTER)
        self.rest_host, self.rest_port = self._listener()
        adv_host = p.get("rest.advertised.host.name") or (self.rest_host if self.rest_host not in ("", "0.0.0.0")
                                                          else socket.gethostname())
        adv_port = _int(p, "rest.advertised.port", self.rest_port)
        self.advertised_url = f"http://{adv_host}:{adv_port}/"
        self.worker_id = f"{adv_host}:{adv_port}"
        if distributed:
            for key in ("group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic"):
                if not p.get(key):
                    raise ConfigException(f"Missing required configuration \"{key}\" which has no default value.")
            self.group_id = p["group.id"]
            self.config_topic = p["config.storage.topic"]
            self.offset_topic = p["offset.storage.topic"]
            self.status_topic = p["status.storage.topic"]
            self.config_rf = _int(p, "config.storage.replication.factor", 3)
            self.offset_rf = _int(p, "offset.storage.replication.factor", 3)
            self.status_rf = _int(p, "status.storage.replication.factor", 3)
            self.offset_partitions = _int(p, "offset.storage.partitions", 25)
            self.status_partitions = _int(p, "status.storage.partitions", 5)
            self.session_timeout_ms = _int(p, "session.timeout.ms", 10000)
            self.heartbeat_interval_ms = _int(p, "heartbeat.interval.ms", 3000)
            self.rebalance_timeout_ms = _int(p, "rebalance.timeout.ms", 60000)
            if self.heartbeat_interval_ms >= self.session_timeout_ms:
                raise ConfigException("heartbeat.interval.ms must be lower than session.timeout.ms")
        else:
            self.offset_file = p.get("offset.storage.file.filename")
            if not self.offset_file:
                raise ConfigException("Missing required configuration \"offset.storage.file.filename\" which has "
                                      "no default value.")
            self.offset_file = os.path.abspath(self.offset_file)

    def _listener(self) -> tuple[str, int]:
        listeners = self.props.get("listeners")
        if listeners:
            first = listeners.split(",")[0].strip()
            u = urlparse(first if "://" in first else "http://" + first)
            if u.scheme != "http":
                raise ConfigException(f"listeners: only http is supported, got {first!r}")
            return u.hostname or "", u.port or 8083
        return self.props.get("rest.host.name", ""), _int(self.props, "rest.port", 8083)

    def producer_props(self) -> dict[str, Any]:
        base = {"acks": "all", "linger.ms": "5", "max.in.flight.requests.per.connection": "1",
                "batch.size": "262144"}
        return {**base, **_client_props(self.props, "producer.", PRODUCER)}

    def consumer_props(self) -> dict[str, Any]:
        base = {"enable.auto.commit": "false", "auto.offset.reset": "earliest"}
        return {**base, **_client_props(self.props, "consumer.", CONSUMER)}

    def admin_props(self) -> dict[str, Any]:
        return _client_props(self.props, "admin.", ADMIN)

    def converter_props(self, which: str) -> dict[str, str]:
        """Settings under ``key.converter.`` / ``value.converter.``."""
        prefix = which + "."
        return {k[len(prefix):]: v for k, v in self.props.items() if k.startswith(prefix)}


class ConnectorConfig:
    """The settings every connector has (name, class, tasks, converters, transforms, errors)."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self.props = {str(k): str(v) for k, v in props.items() if v is not None}
        p = self.props
        self.name = p.get("name", "")
        if not self.name:
            raise ConfigException("Missing required configuration \"name\" which has no default value.")
        if "/" in self.name:
            raise ConfigException(f"connector name {self.name!r} may not contain '/'")
        self.connector_class = p.get("connector.class", "")
        if not self.connector_class:
            raise ConfigException("Missing required configuration \"connector.class\" which has no default value.")
        self.tasks_max = _int(p, "tasks.max", 1)
        if self.tasks_max < 1:
            raise ConfigException(f"Invalid value {self.tasks_max} for configuration tasks.max: Value must be at "
                                  "least 1")
        self.transforms = [t.strip() for t in p.get("transforms", "").split(",") if t.strip()]
        for alias in self.transforms:
            if not p.get(f"transforms.{alias}.type"):
                raise ConfigException(f"Missing required configuration \"transforms.{alias}.type\"")
        tol = p.get("errors.tolerance", "none").lower()
        if tol not in ("none", "all"):
            raise ConfigException(f"Invalid value {tol} for configuration errors.tolerance: String must be one "
                                  "of: none, all")
        self.errors_tolerance_all = tol == "all"
        self.errors_log_enable = _bool(p, "errors.log.enable", False)
        self.errors_retry_timeout_ms = _int(p, "errors.retry.timeout", 0)
        self.errors_retry_max_delay_ms = _int(p, "errors.retry.delay.max.ms", 60000)
        self.dlq_topic = p.get("errors.deadletterqueue.topic.name", "").strip()
        self.dlq_rf = _int(p, "errors.deadletterqueue.topic.replication.factor", 3)
        self.dlq_headers = _bool(p, "errors.deadletterqueue.context.headers.enable", False)

    def converter(self, which: str) -> str | None:
        return self.props.get(which)

    def converter_props(self, which: str) -> dict[str, str]:
        prefix = which + "."
        return {k[len(prefix):]: v for k, v in self.props.items() if k.startswith(prefix)}

    def transform_props(self, alias: str) -> dict[str, str]:
        prefix = f"transforms.{alias}."
        return {k[len(prefix):]: v for k, v in self.props.items() if k.startswith(prefix) and k != prefix + "type"}
