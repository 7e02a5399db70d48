"""What DescribeConfigs shows of a topic's or this broker's configuration: each config's value,
source, synonyms, sensitivity and type, by Kafka 2.8's rules (its ConfigHelper).

Invariant: sans-IO and read-only — entries are computed from a KafkaConfig and a topic's
overrides (as read from /config/topics/<t>) alone. A sensitive value (a PASSWORD config, or a
broker property odradek does not know: it may hold a secret) is never shown, not even in a
synonym. Sources follow Kafka: a topic override is DYNAMIC_TOPIC_CONFIG; a broker setting
from server.properties STATIC_BROKER_CONFIG; a default DEFAULT_CONFIG. The synonyms of a
config are the broker settings it falls back to, most specific first, cut before the first
one whose name is not the config's own broker name (so ``retention.ms`` lists
``log.retention.ms`` entries but not a ``log.retention.hours`` default, as Kafka does).
The dynamic broker configs (``broker/config/dynamic.py``) are layers above server.properties:
this broker's own (/config/brokers/<id>) are DYNAMIC_BROKER_CONFIG, the cluster's defaults
(/config/brokers/<default>) DYNAMIC_DEFAULT_BROKER_CONFIG, both in synonyms in that order before
the static and default entries; the dynamically updatable configs are not read-only, every other
broker config is. The default-broker resource (empty name) shows the cluster's dynamic defaults.
"""
from __future__ import annotations

import logging
from typing import Any, Mapping, NamedTuple

from . import dynamic
from .kafka_config import BROKER_CONFIG, BROKER_SYNONYM, TOPIC_CONFIG, KafkaConfig, LogConfig
from .types import BOOLEAN, DOUBLE, INT, LIST, LONG, PASSWORD, REQUIRED, SHORT, STRING, ConfigKey

# ConfigSource ids (DescribeConfigsResponse.config_source / synonyms.source)
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, DYNAMIC_BROKER_LOGGER_CONFIG = 4, 5, 6
# ConfigType ids (config_type, v3+)
TYPE_IDS = {BOOLEAN: 1, STRING: 2, INT: 3, SHORT: 4, LONG: 5, DOUBLE: 6, LIST: 7, PASSWORD: 9}

# topic configs whose broker default is derived from several settings: the primary one
_DERIVED_SYNONYM = {"segment.ms": "log.roll.ms", "segment.jitter.ms": "log.roll.jitter.ms",
                    "flush.ms": "log.flush.interval.ms", "retention.ms": "log.retention.ms"}
# Kafka's broker synonym groups (DynamicBrokerConfig.brokerConfigSynonyms), most specific first
_SYNONYM_GROUPS = (("log.roll.ms", "log.roll.hours"), ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                   ("log.retention.ms", "log.retention.minutes", "log.retention.hours"))


class Synonym(NamedTuple):
    name: str
    value: str | None
    source: int


class DescribedConfig(NamedTuple):
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    synonyms: list[Synonym]
    type_id: int
    documentation: str | None


def to_string(key: ConfigKey | None, value: Any) -> str | None:
    """A typed value as Kafka's ConfigDef.convertToString writes it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def broker_synonym_names(name: str) -> list[str]:
    """The broker settings ``name`` falls back to, itself first."""
    if name == "log.flush.interval.ms":
        return [name, "log.flush.scheduler.interval.ms"]
    for group in _SYNONYM_GROUPS:
        if name in group:
            return list(group)
    return [name]


class BrokerLayers(NamedTuple):
    """A broker's configuration as layers: server.properties, then the dynamic cluster defaults
    and its own dynamic configs (each a name -> value mapping as stored in ZooKeeper)."""
    static: KafkaConfig
    broker: Mapping[str, str] = {}
    default: Mapping[str, str] = {}

    @property
    def effective(self) -> KafkaConfig:
        return dynamic.effective_config(self.static, self.default, self.broker)


def _synonyms(layers: BrokerLayers, name: str, sensitive: bool) -> list[Synonym]:
    names = broker_synonym_names(name)

    def shown(v: Any) -> str | None:
        return None if sensitive else str(v)
    found = [Synonym(n, shown(layers.broker[n]), DYNAMIC_BROKER_CONFIG) for n in names if n in layers.broker]
    found += [Synonym(n, shown(layers.default[n]), DYNAMIC_DEFAULT_BROKER_CONFIG) for n in names if n in layers.default]
    found += [Synonym(n, shown(layers.static.originals[n]), STATIC_BROKER_CONFIG)
              for n in names if layers.static.originals.get(n) is not None]
    for n in names:
        key = BROKER_CONFIG.get(n)
        if key is not None and key.default is not None and key.default is not REQUIRED:
            found.append(Synonym(n, None if sensitive else to_string(key, key.default), DEFAULT_CONFIG))
    while found and found[0].name != name:
        found.pop(0)
    return found


def topic_configs(layers: BrokerLayers, overrides: Mapping[str, str], include_synonyms: bool,
                  include_documentation: bool) -> list[DescribedConfig]:
    """Every topic config of a topic with ``overrides`` (unknown names ignored, as the log does)."""
    known = {k: v for k, v in overrides.items() if k in TOPIC_CONFIG}
    log_config = LogConfig.from_broker(layers.effective, known)
    out = []
    for name, key in TOPIC_CONFIG.items():
        value = to_string(key, log_config[name])
        broker_name = BROKER_SYNONYM.get(name)
        primary = broker_name if isinstance(broker_name, str) else _DERIVED_SYNONYM.get(name)
        synonyms = [] if primary is None else _synonyms(layers, primary, False)
        if name in known:
            synonyms.insert(0, Synonym(name, value, DYNAMIC_TOPIC_CONFIG))
        out.append(DescribedConfig(name, value, synonyms[0].source if synonyms else DEFAULT_CONFIG, False, False,
                                   synonyms if include_synonyms else [], TYPE_IDS.get(key.type, 0),
                                   key.doc if include_documentation else None))
    return out


def broker_configs(layers: BrokerLayers, include_synonyms: bool, include_documentation: bool) -> list[DescribedConfig]:
    """Every config of this broker: its known settings, whatever else server.properties holds, and
    its per-broker dynamic configs (the replication throttle rates) where set."""
    effective = layers.effective
    names = ({n for n in BROKER_CONFIG} | {n for n, v in layers.static.originals.items() if v is not None}
             | {n for n in (*layers.broker, *layers.default) if dynamic.key_of(n) is not None})
    out = []
    for name in sorted(names):
        key = BROKER_CONFIG.get(name) or dynamic.key_of(name)
        sensitive = key is None or key.type == PASSWORD
        if name in dynamic.PER_BROKER_CONFIG:
            value = None if sensitive else layers.broker.get(name)
        elif name not in BROKER_CONFIG:   # listener.name.<l>.*: as set, in server.properties or dynamically
            raw = layers.broker.get(name, layers.default.get(name, layers.static.originals.get(name)))
            value = None if sensitive or raw is None else str(raw)
        else:
            value = None if sensitive else to_string(key, effective[name] if key is not None else None)
        synonyms = _synonyms(layers, name, sensitive)
        updatable = dynamic.key_of(name) is not None
        out.append(DescribedConfig(name, value, synonyms[0].source if synonyms else DEFAULT_CONFIG, not updatable,
                                   sensitive, synonyms if include_synonyms else [],
                                   TYPE_IDS.get(key.type, 0) if key else 0,
                                   key.doc if key is not None and include_documentation else None))
    return out


def default_broker_configs(layers: BrokerLayers, include_synonyms: bool,
                           include_documentation: bool) -> list[DescribedConfig]:
    """The cluster-wide dynamic defaults (the default-broker resource)."""
    out = []
    for name, value in sorted(layers.default.items()):
        key = dynamic.key_of(name) or BROKER_CONFIG[name]
        synonyms = [Synonym(name, value, DYNAMIC_DEFAULT_BROKER_CONFIG)]
        out.append(DescribedConfig(name, value, DYNAMIC_DEFAULT_BROKER_CONFIG, False, False,
                                   synonyms if include_synonyms else [], TYPE_IDS.get(key.type, 0),
                                   key.doc if include_documentation else None))
    return out


def _level_name(level: int) -> str:
    """log4j's name for a Python logging level (WARNING is log4j's WARN, CRITICAL its FATAL)."""
    name = logging.getLevelName(level)
    return {"WARNING": "WARN", "CRITICAL": "FATAL"}.get(name, name)


def logger_configs() -> list[DescribedConfig]:
    """The broker's loggers and their levels (the BROKER_LOGGER resource; Python logging's
    loggers stand for Kafka's log4j ones): a logger without a level of its own shows the root's."""
    root = _level_name(logging.getLogger().level)
    levels = {"root": root}
    for name, logger in sorted(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            levels[name] = _level_name(logger.level) if logger.level else root
    return [DescribedConfig(name, level, DYNAMIC_BROKER_LOGGER_CONFIG, False, False, [], 0, None)
            for name, level in levels.items()]
