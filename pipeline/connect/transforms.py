"""Single message transforms (SMTs): InsertField, ReplaceField, RegexRouter, TimestampRouter,
ValueToKey, ExtractField — Kafka Connect's names and settings.

Invariant: a transformation is a pure function of one record (``apply(record)
-> record | None``; None drops it) configured once with its
``transforms.<alias>.*`` properties; it never mutates its input, and a record
whose value has a schema comes out with a schema describing the new value.
Field-changing SMTs come in ``$Key`` and ``$Value`` variants (Kafka's nested
classes), e.g. ``org.apache.kafka.connect.transforms.InsertField$Value``.
"""
from __future__ import annotations

import datetime as _dt
import re
from typing import Any, Mapping

from .api import ConfigException, ConnectRecord, DataException, Schema

TIMESTAMP_SCHEMA: Schema = {"type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp",
                            "version": 1}


class Transformation:
    """Base: ``configure(props)``, ``apply(record)``, ``close()``."""

    def configure(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _KeyOrValue(Transformation):
    """Operates on the record key ($Key) or value ($Value)."""

    on_key = False

    def _get(self, r: ConnectRecord) -> tuple[Schema | None, Any]:
        return (r.key_schema, r.key) if self.on_key else (r.value_schema, r.value)

    def _set(self, r: ConnectRecord, schema: Schema | None, value: Any) -> ConnectRecord:
        if self.on_key:
            return r.new_record(key_schema=schema, key=value)
        return r.new_record(value_schema=schema, value=value)

    def _require_map(self, schema: Schema | None, value: Any, purpose: str) -> None:
        if schema is not None and schema.get("type") != "struct":
            raise DataException(f"Only Struct objects supported for [{purpose}], found: {schema.get('type')}")
        if not isinstance(value, Mapping):
            raise DataException(f"Only Map objects supported in absence of schema for [{purpose}], "
                                f"found: {type(value).__name__}")


def _field_spec(spec: str | None) -> tuple[str | None, bool]:
    """``name``, ``name!`` (required) or ``name?`` (optional, the default) -> (name, optional)."""
    if not spec:
        return None, True
    if spec.endswith("!"):
        return spec[:-1], False
    if spec.endswith("?"):
        return spec[:-1], True
    return spec, True


class InsertField(_KeyOrValue):
    """Adds topic/partition/offset/timestamp fields and a static field (``static.field``/``static.value``)."""

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self.fields: list[tuple[str, bool, str, Schema]] = []  # (name, optional, source, schema)
        for key, source, ftype in (("topic.field", "topic", "string"), ("partition.field", "partition", "int32"),
                                   ("offset.field", "offset", "int64"), ("timestamp.field", "timestamp", None),
                                   ("static.field", "static", "string")):
            name, optional = _field_spec(props.get(key))
            if name:
                schema = dict(TIMESTAMP_SCHEMA) if ftype is None else {"type": ftype}
                schema["optional"] = optional
                self.fields.append((name, optional, source, schema))
        self.static_value = props.get("static.value")
        if not self.fields:
            raise ConfigException("InsertField needs at least one of topic.field, partition.field, offset.field, "
                                  "timestamp.field, static.field")

    def _value_of(self, source: str, r: ConnectRecord) -> Any:
        if source == "topic":
            return r.topic
        if source == "partition":
            return r.kafka_partition
        if source == "offset":
            off = getattr(r, "kafka_offset", None)
            if off is None or off < 0:
                raise DataException("Only SinkRecords have an offset (offset.field on a source record)")
            return off
        if source == "timestamp":
            return r.timestamp
        return self.static_value

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema, value = self._get(record)
        if value is None:  # tombstones pass through
            return record
        self._require_map(schema, value, "field insertion")
        out = dict(value)
        for name, optional, source, _ in self.fields:
            v = self._value_of(source, record)
            if v is None and not optional:
                raise DataException(f"InsertField: required field {name!r} has no value")
            out[name] = v
        new_schema = None
        if schema is not None:
            existing = {f["field"] for f in schema.get("fields", [])}
            fields = [f for f in schema.get("fields", [])]
            fields += [{**s, "field": n} for n, _, _, s in self.fields if n not in existing]
            new_schema = {**schema, "fields": fields}
        return self._set(record, new_schema, out)


class ReplaceField(_KeyOrValue):
    """Drops (``exclude``/``blacklist``), keeps (``include``/``whitelist``) and renames (``renames=a:b``) fields."""

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)

        def lst(*names: str) -> list[str]:
            for n in names:
                if props.get(n):
                    return [x.strip() for x in props[n].split(",") if x.strip()]
            return []

        self.exclude = set(lst("exclude", "blacklist"))
        self.include = set(lst("include", "whitelist"))
        self.renames: dict[str, str] = {}
        for pair in lst("renames"):
            old, sep, new = pair.partition(":")
            if not sep or not old or not new:
                raise ConfigException(f"ReplaceField renames: invalid rename mapping {pair!r} (expected old:new)")
            self.renames[old] = new

    def _keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema, value = self._get(record)
        if value is None:
            return record
        self._require_map(schema, value, "field replacement")
        out = {self.renames.get(k, k): v for k, v in value.items() if self._keep(k)}
        new_schema = None
        if schema is not None:
            fields = [{**f, "field": self.renames.get(f["field"], f["field"])}
                      for f in schema.get("fields", []) if self._keep(f["field"])]
            new_schema = {**schema, "fields": fields}
            out = {f["field"]: out.get(f["field"]) for f in fields}
        return self._set(record, new_schema, out)


def java_replacement(replacement: str) -> str:
    """Java's ``$1`` / ``${name}`` group references as Python's ``\\g<1>`` / ``\\g<name>``."""
    out = re.sub(r"\\(.)", lambda m: "\\\\" if m.group(1) == "\\" else m.group(1), replacement)
    out = re.sub(r"\$\{(\w+)\}", r"\\g<\1>", out)
    return re.sub(r"\$(\d+)", r"\\g<\1>", out)


class RegexRouter(Transformation):
    """Renames the topic: when ``regex`` matches the whole topic it becomes ``replacement``."""

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        if "regex" not in props or "replacement" not in props:
            raise ConfigException("RegexRouter needs regex and replacement")
        self.regex = re.compile(props["regex"])
        self.replacement = java_replacement(props["replacement"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        m = self.regex.fullmatch(record.topic)
        if not m:
            return record
        return record.new_record(topic=m.expand(self.replacement))


_JAVA_DATE = [("yyyy", "%Y"), ("yy", "%y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"),
              ("ss", "%S"), ("SSS", "%f")]


def java_date_format(fmt: str) -> str:
    """A SimpleDateFormat pattern (yyyy MM dd HH mm ss, quoted literals) as a strftime format."""
    out, i = [], 0
    while i < len(fmt):
        if fmt[i] == "'":
            j = fmt.find("'", i + 1)
            j = len(fmt) if j < 0 else j
            out.append(fmt[i + 1:j].replace("%", "%%") or "'")
            i = j + 1
            continue
        for java, py in _JAVA_DATE:
            if fmt.startswith(java, i):
                out.append(py)
                i += len(java)
                break
        else:
            out.append(fmt[i].replace("%", "%%"))
            i += 1
    return "".join(out)


class TimestampRouter(Transformation):
    """Topic from ``topic.format`` (``${topic}``, ``${timestamp}``) and the record timestamp (UTC)."""

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self.topic_format = props.get("topic.format", "${topic}-${timestamp}")
        self.ts_format = java_date_format(props.get("timestamp.format", "yyyyMMdd"))

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.timestamp is None:
            raise DataException(f"Timestamp missing on record: {record}")
        when = _dt.datetime.fromtimestamp(record.timestamp / 1000.0, tz=_dt.timezone.utc)
        stamp = when.strftime(self.ts_format)
        if "%f" in self.ts_format:  # SSS is milliseconds, strftime's %f microseconds
            stamp = stamp.replace(when.strftime("%f"), when.strftime("%f")[:3])
        topic = self.topic_format.replace("${topic}", record.topic).replace("${timestamp}", stamp)
        return record.new_record(topic=topic)


class ValueToKey(Transformation):
    """The key becomes a struct/map of the value's ``fields``."""

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self.fields = [x.strip() for x in props.get("fields", "").split(",") if x.strip()]
        if not self.fields:
            raise ConfigException("ValueToKey needs fields")

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value, schema = record.value, record.value_schema
        if not isinstance(value, Mapping):
            raise DataException("ValueToKey needs a struct or map value")
        key = {f: value.get(f) for f in self.fields}
        key_schema = None
        if schema is not None:
            by_name = {f["field"]: f for f in schema.get("fields", [])}
            missing = [f for f in self.fields if f not in by_name]
            if missing:
                raise DataException(f"ValueToKey: fields {missing} are not in the value schema")
            key_schema = {"type": "struct", "optional": False, "fields": [by_name[f] for f in self.fields]}
        return record.new_record(key_schema=key_schema, key=key)


class ExtractField(_KeyOrValue):
    """The key/value becomes one of its fields (``field``)."""

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self.field = props.get("field")
        if not self.field:
            raise ConfigException("ExtractField needs field")

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema, value = self._get(record)
        if value is None:
            return record
        self._require_map(schema, value, "field extraction")
        new_schema = None
        if schema is not None:
            new_schema = next((f for f in schema.get("fields", []) if f["field"] == self.field), None)
            if new_schema is None:
                raise DataException(f"Unknown field: {self.field}")
            new_schema = {k: v for k, v in new_schema.items() if k != "field"}
        return self._set(record, new_schema, value.get(self.field))


def _variant(base: type, on_key: bool) -> type:
    return type(f"{base.__name__}${'Key' if on_key else 'Value'}", (base,), {"on_key": on_key})


VARIANTS: dict[str, type] = {}
for _cls in (InsertField, ReplaceField, ExtractField):
    VARIANTS[f"{_cls.__name__}$Key"] = _variant(_cls, True)
    VARIANTS[f"{_cls.__name__}$Value"] = _variant(_cls, False)
for _router in (RegexRouter, TimestampRouter, ValueToKey):
    VARIANTS[_router.__name__] = _router
