"""The connector interface: what a connector author implements (Kafka Connect's names).

Invariant: this module is pure interface and value types; it does no I/O and
imports nothing of the worker. A connector is configured with a flat
``dict[str, str]`` (the connector properties), splits its work into at most
``tasks.max`` task configurations with ``task_configs(max_tasks)``, and each
task runs in its own thread on some worker:

- ``SourceTask.poll() -> list[SourceRecord]`` (empty list or None when idle; it
  may block briefly). Each record carries ``source_partition`` and
  ``source_offset`` dicts (JSON-able); the worker persists the latest offset per
  partition only after the producer acknowledged the record, and a restarted task
  reads it back through ``self.context.offset_storage_reader``.
- ``SinkTask.put(records)`` receives converted, transformed records;
  ``flush(offsets)`` must make everything put so far durable; the worker commits
  the consumer offsets only after ``flush`` returned.

Schemas are Kafka Connect's JSON schema dicts (``{"type": "struct", "fields":
[{"field": "id", "type": "int64", "optional": False}], "optional": False}``) or
None; struct values are plain dicts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

Schema = dict  # Kafka Connect's JSON schema (see the module doc)


class ConnectException(Exception):
    """A connector or task failed (Kafka's ConnectException)."""


class RetriableException(ConnectException):
    """A transient failure: the worker retries the same call (put/poll) after a back-off."""


class DataException(ConnectException):
    """A record could not be converted or transformed."""


class ConfigException(ConnectException):
    """A connector configuration is invalid."""


# -- records -------------------------------------------------------------------------------

@dataclass
class ConnectRecord:
    """What every record has: topic, partition, key/value with their schemas, timestamp, headers."""
    topic: str
    kafka_partition: int | None
    key_schema: Schema | None
    key: Any
    value_schema: Schema | None
    value: Any
    timestamp: int | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)

    def new_record(self, **changes: Any) -> "ConnectRecord":
        """A copy with ``changes`` applied (what SMTs return)."""
        d = dict(self.__dict__)
        d.update(changes)
        return type(self)(**d)


@dataclass
class SourceRecord(ConnectRecord):
    """A record produced by a SourceTask; ``source_partition``/``source_offset`` locate it in the source."""
    source_partition: dict | None = None
    source_offset: dict | None = None

    def __init__(self, source_partition: dict | None, source_offset: dict | None, topic: str,
                 kafka_partition: int | None = None, key_schema: Schema | None = None, key: Any = None,
                 value_schema: Schema | None = None, value: Any = None, timestamp: int | None = None,
                 headers: list | None = None) -> None:
        super().__init__(topic, kafka_partition, key_schema, key, value_schema, value, timestamp,
                         list(headers or []))
        self.source_partition = source_partition
        self.source_offset = source_offset


@dataclass
class SinkRecord(ConnectRecord):
    """A record consumed for a SinkTask; ``kafka_offset`` is its offset in ``topic``/``kafka_partition``."""
    kafka_offset: int = -1
    timestamp_type: int = 0


# -- configuration definitions -------------------------------------------------------------

@dataclass
class ConfigKey:
    """One declared setting: name, type (string|int|long|boolean|list|password|class), default, doc."""
    name: str
    type: str = "string"
    default: Any = None
    required: bool = False
    doc: str = ""
    validator: Callable[[Any], str | None] | None = None  # returns an error message or None


class ConfigDef:
    """Declared settings of a connector; ``parse`` converts and validates a property dict."""

    def __init__(self) -> None:
        self.keys: dict[str, ConfigKey] = {}

    def define(self, name: str, type: str = "string", default: Any = None, required: bool = False,
               doc: str = "", validator: Callable[[Any], str | None] | None = None) -> "ConfigDef":
        self.keys[name] = ConfigKey(name, type, default, required, doc, validator)
        return self

    @staticmethod
    def convert(key: ConfigKey, raw: Any) -> Any:
        if raw is None:
            return None
        t = key.type
        if t in ("int", "long", "short"):
            return int(raw)
        if t == "double":
            return float(raw)
        if t == "boolean":
            if isinstance(raw, bool):
                return raw
            s = str(raw).strip().lower()
            if s not in ("true", "false"):
                raise ValueError(f"{raw!r} is not true or false")
            return s == "true"
        if t == "list":
            if isinstance(raw, (list, tuple)):
                return [str(x) for x in raw]
            return [x.strip() for x in str(raw).split(",") if x.strip()]
        return str(raw)

    def validate(self, props: Mapping[str, Any]) -> dict[str, list[str]]:
        """{name: [error, ...]} for every declared key (empty lists when fine)."""
        errors: dict[str, list[str]] = {}
        for name, key in self.keys.items():
            errs: list[str] = []
            raw = props.get(name)
            if raw is None or (raw == "" and key.required):
                if key.required:
                    errs.append(f"Missing required configuration \"{name}\" which has no default value.")
            else:
                try:
                    value = self.convert(key, raw)
                    if key.validator is not None and (msg := key.validator(value)):
                        errs.append(msg)
                except ValueError as exc:
                    errs.append(f"Invalid value {raw} for configuration {name}: {exc}")
            errors[name] = errs
        return errors

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Converted values (defaults filled in); raises ConfigException on the first error."""
        for name, errs in self.validate(props).items():
            if errs:
                raise ConfigException(errs[0])
        out: dict[str, Any] = {}
        for name, key in self.keys.items():
            raw = props.get(name)
            out[name] = self.convert(key, raw) if raw is not None else key.default
        return out


# -- connectors and tasks ------------------------------------------------------------------

class OffsetStorageReader:
    """Read access to committed source offsets (``offset(partition) -> dict | None``)."""

    def offset(self, partition: dict) -> dict | None:
        return self.offsets([partition]).get(_freeze(partition))

    def offsets(self, partitions: list[dict]) -> dict:
        raise NotImplementedError


def _freeze(obj: Any) -> Any:
    """A hashable form of a JSON-able dict (to key offsets by partition)."""
    if isinstance(obj, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in obj.items()))
    if isinstance(obj, list):
        return tuple(_freeze(v) for v in obj)
    return obj


class ConnectorContext:
    """What a Connector may ask of its worker."""

    def __init__(self, request_reconfiguration: Callable[[], None], raise_error: Callable[[Exception], None]):
        self.request_task_reconfiguration = request_reconfiguration
        self.raise_error = raise_error


class SourceTaskContext:
    def __init__(self, config: dict[str, str], offset_storage_reader: OffsetStorageReader) -> None:
        self.config = config
        self.offset_storage_reader = offset_storage_reader


class SinkTaskContext:
    """Sink tasks may rewind (``offset``), pause/resume partitions and ask for a commit."""

    def __init__(self, config: dict[str, str], consumer: Any) -> None:
        self.config = config
        self._consumer = consumer
        self.requested_offsets: dict[tuple[str, int], int] = {}
        self.commit_requested = False

    def offset(self, tp: tuple[str, int], offset: int) -> None:
        self.requested_offsets[(tp[0], tp[1])] = offset

    def assignment(self) -> set:
        return self._consumer.assignment()

    def pause(self, *tps: Any) -> None:
        self._consumer.pause(*tps)

    def resume(self, *tps: Any) -> None:
        self._consumer.resume(*tps)

    def request_commit(self) -> None:
        self.commit_requested = True


class Connector:
    """Base of SourceConnector and SinkConnector."""

    context: ConnectorContext | None = None

    def version(self) -> str:
        return "2.8.2"

    def initialize(self, context: ConnectorContext) -> None:
        self.context = context

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def validate(self, props: Mapping[str, str]) -> dict[str, list[str]]:
        return self.config_def().validate(props)

    def start(self, props: dict[str, str]) -> None:
        raise NotImplementedError

    def task_class(self) -> type:
        raise NotImplementedError

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        raise NotImplementedError

    def stop(self) -> None:
        pass


class SourceConnector(Connector):
    pass


class SinkConnector(Connector):
    pass


class Task:
    def version(self) -> str:
        return "2.8.2"

    def start(self, props: dict[str, str]) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        pass


class SourceTask(Task):
    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    def poll(self) -> list[SourceRecord] | None:
        raise NotImplementedError

    def commit(self) -> None:
        """Called after the worker persisted the offsets of the records returned so far."""

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        """Called when the producer acknowledged ``record``."""


class SinkTask(Task):
    context: SinkTaskContext

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    def put(self, records: list[SinkRecord]) -> None:
        raise NotImplementedError

    def flush(self, current_offsets: dict[tuple[str, int], int]) -> None:
        """Make every record put so far durable (the worker commits the offsets afterwards)."""

    def pre_commit(self, current_offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        self.flush(current_offsets)
        return current_offsets

    def open(self, partitions: list[tuple[str, int]]) -> None:
        pass

    def close(self, partitions: list[tuple[str, int]]) -> None:
        pass
