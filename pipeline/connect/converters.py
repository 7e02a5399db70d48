"""Converters: Connect data (schema, value) <-> the bytes stored in Kafka.

Invariant: ``to_connect_data(topic, from_connect_data(topic, schema, value))``
returns the same value (and, for JsonConverter with ``schemas.enable=true``, the
same schema) for every value the schema admits; null bytes are always
(None, None) and a None value without schema becomes null bytes (a
tombstone). JsonConverter's envelope is Kafka Connect's
``{"schema": {...}, "payload": ...}``: bytes travel base64-encoded, logical
Timestamp/Date/Time as int epoch milliseconds/days, Decimal as a JSON number
(our simplification of Kafka's base64 unscaled bytes, documented).
"""
from __future__ import annotations

import base64
import json
from typing import Any, Mapping

from .api import DataException, Schema

OPTIONAL_STRING: Schema = {"type": "string", "optional": True}
OPTIONAL_BYTES: Schema = {"type": "bytes", "optional": True}


def _bool(v: Any, default: bool) -> bool:
    if v is None:
        return default
    return v if isinstance(v, bool) else str(v).strip().lower() == "true"


class Converter:
    """Base: ``configure(props, is_key)``, ``from_connect_data``, ``to_connect_data``."""

    def configure(self, props: Mapping[str, Any], is_key: bool) -> None:
        self.is_key = is_key

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        raise NotImplementedError

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        raise NotImplementedError


class StringConverter(Converter):
    """UTF-8 text (``converter.encoding`` may name another codec); other values go through str()."""

    encoding = "utf-8"

    def configure(self, props: Mapping[str, Any], is_key: bool) -> None:
        super().configure(props, is_key)
        self.encoding = props.get("converter.encoding") or props.get("encoding") or "utf-8"

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        if isinstance(value, (dict, list)):
            value = json.dumps(value, separators=(",", ":"))
        return str(value).encode(self.encoding)

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return OPTIONAL_STRING, None
        try:
            return OPTIONAL_STRING, bytes(data).decode(self.encoding)
        except UnicodeDecodeError as exc:
            raise DataException(f"StringConverter: {exc}") from None


class ByteArrayConverter(Converter):
    """Bytes as they are."""

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise DataException(f"ByteArrayConverter is not compatible with objects of type {type(value).__name__}")

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        return OPTIONAL_BYTES, None if data is None else bytes(data)


_INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _to_json(schema: Schema | None, value: Any) -> Any:
    """A Connect value as JSON-able data (per its schema when given)."""
    if value is None:
        if schema is not None and not schema.get("optional", False) and schema.get("default") is None:
            raise DataException(f"conversion error: null value for a required {schema.get('type')} field")
        return None
    if schema is None:
        return _schemaless_to_json(value)
    t = schema.get("type")
    if t in _INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            if schema.get("name") == "org.apache.kafka.connect.data.Timestamp" and hasattr(value, "timestamp"):
                return int(value.timestamp() * 1000)
            raise DataException(f"conversion error: {t} field got {type(value).__name__}")
        return value
    if t in ("float32", "float64"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DataException(f"conversion error: {t} field got {type(value).__name__}")
        return float(value)
    if t == "boolean":
        if not isinstance(value, bool):
            raise DataException(f"conversion error: boolean field got {type(value).__name__}")
        return value
    if t == "string":
        if not isinstance(value, str):
            raise DataException(f"conversion error: string field got {type(value).__name__}")
        return value
    if t == "bytes":
        if schema.get("name") == "org.apache.kafka.connect.data.Decimal":
            return float(value)
        if not isinstance(value, (bytes, bytearray)):
            raise DataException(f"conversion error: bytes field got {type(value).__name__}")
        return base64.b64encode(bytes(value)).decode("ascii")
    if t == "array":
        return [_to_json(schema.get("items"), v) for v in value]
    if t == "map":
        ks, vs = schema.get("keys"), schema.get("values")
        if ks is not None and ks.get("type") != "string":
            return [[_to_json(ks, k), _to_json(vs, v)] for k, v in value.items()]
        return {str(k): _to_json(vs, v) for k, v in value.items()}
    if t == "struct":
        if not isinstance(value, Mapping):
            raise DataException(f"conversion error: struct field got {type(value).__name__}")
        return {f["field"]: _to_json(f, value.get(f["field"])) for f in schema.get("fields", [])}
    raise DataException(f"unknown schema type {t!r}")


def _schemaless_to_json(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): _schemaless_to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_schemaless_to_json(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def _from_json(schema: Schema | None, data: Any) -> Any:
    """JSON data as a Connect value of ``schema``."""
    if schema is None:
        return data
    if data is None:
        if schema.get("default") is not None:
            return schema["default"]
        if not schema.get("optional", False):
            raise DataException(f"conversion error: null for a required {schema.get('type')} field")
        return None
    t = schema.get("type")
    try:
        if t in _INT_RANGES:
            if isinstance(data, bool) or not isinstance(data, int):
                raise DataException(f"conversion error: {t} field got {data!r}")
            return data
        if t in ("float32", "float64"):
            return float(data)
        if t == "boolean":
            if not isinstance(data, bool):
                raise DataException(f"conversion error: boolean field got {data!r}")
            return data
        if t == "string":
            if not isinstance(data, str):
                raise DataException(f"conversion error: string field got {data!r}")
            return data
        if t == "bytes":
            if schema.get("name") == "org.apache.kafka.connect.data.Decimal":
                return float(data)
            return base64.b64decode(data)
        if t == "array":
            return [_from_json(schema.get("items"), v) for v in data]
        if t == "map":
            if isinstance(data, list):
                return {_from_json(schema.get("keys"), k): _from_json(schema.get("values"), v) for k, v in data}
            return {k: _from_json(schema.get("values"), v) for k, v in data.items()}
        if t == "struct":
            if not isinstance(data, dict):
                raise DataException(f"conversion error: struct field got {data!r}")
            return {f["field"]: _from_json(f, data.get(f["field"])) for f in schema.get("fields", [])}
    except (TypeError, ValueError) as exc:
        raise DataException(f"conversion error for {t}: {exc}") from None
    raise DataException(f"unknown schema type {t!r}")


def _clean_schema(schema: Schema) -> Schema:
    """The schema as JsonConverter writes it (``field`` kept for struct members, no None entries)."""
    return {k: v for k, v in schema.items() if v is not None}


class JsonConverter(Converter):
    """JSON, with Kafka Connect's ``{"schema", "payload"}`` envelope when ``schemas.enable`` (default true)."""

    schemas_enable = True

    def configure(self, props: Mapping[str, Any], is_key: bool) -> None:
        super().configure(props, is_key)
        self.schemas_enable = _bool(props.get("schemas.enable"), True)

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is None and value is None:
            return None
        payload = _to_json(schema, value)
        doc = {"schema": _clean_schema(schema) if schema else None, "payload": payload} \
            if self.schemas_enable else payload
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None or len(data) == 0:
            return None, None
        try:
            doc = json.loads(bytes(data))
        except (ValueError, UnicodeDecodeError) as exc:
            raise DataException(f"Converting byte[] to Kafka Connect data failed due to serialization error: {exc}") \
                from None
        if not self.schemas_enable:
            return None, doc
        if not (isinstance(doc, dict) and set(doc) == {"schema", "payload"}):
            raise DataException('JsonConverter with schemas.enable requires "schema" and "payload" fields and may '
                                'not contain additional fields. If you are trying to deserialize plain JSON data, '
                                'set schemas.enable=false in your converter configuration.')
        schema = doc["schema"]
        return schema, _from_json(schema, doc["payload"])


def infer_schema(value: Any) -> Schema | None:
    """A Connect schema describing a plain Python value (for connectors that build records from dicts)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return {"type": "boolean", "optional": True}
    if isinstance(value, int):
        return {"type": "int64", "optional": True}
    if isinstance(value, float):
        return {"type": "float64", "optional": True}
    if isinstance(value, str):
        return {"type": "string", "optional": True}
    if isinstance(value, (bytes, bytearray)):
        return {"type": "bytes", "optional": True}
    if isinstance(value, Mapping):
        return {"type": "struct", "optional": True, "fields": [
            {**(infer_schema(v) or {"type": "string", "optional": True}), "field": str(k)}
            for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        first = next((v for v in value if v is not None), None)
        return {"type": "array", "optional": True, "items": infer_schema(first) or {"type": "string", "optional": True}}
    raise DataException(f"cannot infer a schema for {type(value).__name__}")
