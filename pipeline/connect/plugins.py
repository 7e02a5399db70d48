"""Plugin lookup: connector, converter and transform classes by our short names, Kafka's Java
class names, or a Python path.

Invariant: ``resolve(kind, name)`` returns a class or raises ConfigException
naming what was asked; a Java class name resolves to our implementation of it
(``org.apache.kafka.connect.file.FileStreamSourceConnector`` ->
``FileStreamSourceConnector``), and anything containing ``:`` or a dotted
Python path that is not a known Java name is imported (``pkg.mod:Cls`` or
``pkg.mod.Cls``) so users can plug in their own classes.
"""
from __future__ import annotations

import importlib
from typing import Any

from .api import ConfigException, SinkConnector, SourceConnector

_PKG = "odradek.pipeline.connect"

# short name -> "module:attr" (module relative to this package)
CONNECTORS: dict[str, str] = {
    "FileStreamSourceConnector": "file:FileStreamSourceConnector",
    "FileStreamSinkConnector": "file:FileStreamSinkConnector",
    "JdbcSourceConnector": "jdbc_source:JdbcSourceConnector",
    "JdbcSinkConnector": "jdbc_sink:JdbcSinkConnector",
}
CONVERTERS: dict[str, str] = {
    "StringConverter": "converters:StringConverter",
    "JsonConverter": "converters:JsonConverter",
    "ByteArrayConverter": "converters:ByteArrayConverter",
}
TRANSFORMS: dict[str, str] = {name: f"transforms:VARIANTS[{name}]" for name in (
    "InsertField$Key", "InsertField$Value", "ReplaceField$Key", "ReplaceField$Value", "ExtractField$Key",
    "ExtractField$Value", "RegexRouter", "TimestampRouter", "ValueToKey")}

JAVA_PACKAGES = ("org.apache.kafka.connect.file.", "org.apache.kafka.connect.storage.",
                 "org.apache.kafka.connect.json.", "org.apache.kafka.connect.converters.",
                 "org.apache.kafka.connect.transforms.", "io.confluent.connect.jdbc.")
JAVA_NAMES: dict[str, str] = {
    "FileStreamSourceConnector": "org.apache.kafka.connect.file.FileStreamSourceConnector",
    "FileStreamSinkConnector": "org.apache.kafka.connect.file.FileStreamSinkConnector",
    "JdbcSourceConnector": "io.confluent.connect.jdbc.JdbcSourceConnector",
    "JdbcSinkConnector": "io.confluent.connect.jdbc.JdbcSinkConnector",
}
_TABLES = {"connector": CONNECTORS, "converter": CONVERTERS, "transform": TRANSFORMS}


def _load(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    mod = importlib.import_module(f"{_PKG}.{module}")
    if "[" in attr:
        table, key = attr[:-1].split("[")
        return getattr(mod, table)[key]
    return getattr(mod, attr)


def _short(name: str) -> str:
    for prefix in JAVA_PACKAGES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def resolve(kind: str, name: str) -> type:
    """The class for ``name`` (kind: connector | converter | transform)."""
    name = (name or "").strip()
    if not name:
        raise ConfigException(f"no {kind} class given")
    table = _TABLES[kind]
    short = _short(name)
    for candidate in (short, short + "Connector" if kind == "connector" else short):
        if candidate in table:
            return _load(table[candidate])
    if ":" in name or "." in name:
        module, sep, attr = name.partition(":") if ":" in name else name.rpartition(".")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ConfigException(f"Failed to find any class that implements {kind} and which name matches "
                                  f"{name}: {exc}") from None
    raise ConfigException(f"Failed to find any class that implements {kind} and which name matches {name}, "
                          f"available: {', '.join(sorted(table))}")


def connector_type(cls: type) -> str:
    if issubclass(cls, SourceConnector):
        return "source"
    if issubclass(cls, SinkConnector):
        return "sink"
    return "unknown"


def connector_plugins() -> list[dict[str, str]]:
    """``GET /connector-plugins``: [{class, type, version}] with Kafka's class names."""
    out = []
    for short in sorted(CONNECTORS):
        cls = _load(CONNECTORS[short])
        out.append({"class": JAVA_NAMES.get(short, short), "type": connector_type(cls), "version": "2.8.2"})
    return out
