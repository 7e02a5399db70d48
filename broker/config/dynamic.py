"""Dynamic broker configs: what running brokers take from /config/brokers/<id> and /<default>.

Invariant: declared once here, as Kafka 2.8's DynamicBrokerConfig allows them: the per-broker
replication throttle rates and the log dir move rate (DynamicConfig.Broker, KIP-73/KIP-113; for
one broker id only), and the log
defaults (DynamicLogConfig: the broker settings topic configs fall back to, but not
log.message.format.version), for one broker or the whole cluster. Values are parsed by the same
``_parse`` as every other config; a name not declared here cannot be updated dynamically. The
config a broker runs with is its server.properties under the cluster-wide dynamic defaults under
its own dynamic configs (``effective_config``); a rejected change changes nothing.
"""
from __future__ import annotations

from typing import Any, Mapping

from .kafka_config import BROKER_CONFIG, BROKER_SYNONYM, KafkaConfig
from .types import LONG, LONG_MAX, ConfigError, ConfigKey, _parse, _table, at_least

PER_BROKER_CONFIG: dict[str, ConfigKey] = _table([
    ("leader.replication.throttled.rate", LONG, LONG_MAX, at_least(0),
     "Bytes/s of replication traffic this broker serves as leader to the replicas listed in topics' "
     "leader.replication.throttled.replicas."),
    ("follower.replication.throttled.rate", LONG, LONG_MAX, at_least(0),
     "Bytes/s of replication traffic this broker fetches as follower for the replicas listed in topics' "
     "follower.replication.throttled.replicas."),
    ("replica.alter.log.dirs.io.max.bytes.per.second", LONG, LONG_MAX, at_least(0),
     "Bytes/s this broker copies between its log dirs to move replicas (AlterReplicaLogDirs)."),
])
# the derived ones (segment.ms, retention.ms...) fall back to their *.ms setting, which is dynamic
_DERIVED = {"segment.ms": "log.roll.ms", "segment.jitter.ms": "log.roll.jitter.ms",
            "flush.ms": "log.flush.interval.ms", "retention.ms": "log.retention.ms"}
LOG_DEFAULTS: frozenset[str] = frozenset(
    (v if isinstance(v, str) else _DERIVED[k]) for k, v in BROKER_SYNONYM.items()) - {"log.message.format.version"}
DEFAULT_LEVEL = "<default>"


def validate(overrides: Mapping[str, Any], broker_level: bool) -> dict[str, Any]:
    """The typed values of ``overrides`` for one broker (``broker_level``) or the cluster default;
    ConfigError with Kafka's message for a name that cannot be set there or a bad value."""
    fixed = sorted(n for n in overrides if n not in PER_BROKER_CONFIG and n not in LOG_DEFAULTS)
    if fixed:
        raise ConfigError(f"Cannot update these configs dynamically: {', '.join(fixed)}")
    if not broker_level:
        per_broker = sorted(n for n in overrides if n in PER_BROKER_CONFIG)
        if per_broker:
            raise ConfigError("Cannot update these configs at default cluster level, broker id must be specified: "
                              + ", ".join(per_broker))
    out = {}
    for name, raw in overrides.items():
        key = PER_BROKER_CONFIG.get(name) or BROKER_CONFIG[name]
        out[name] = _parse(key, raw)
    return out


def throttle_rates(broker_overrides: Mapping[str, Any]) -> tuple[int, int, int]:
    """(leader, follower, log dir move) throttle rates of a broker's dynamic overrides."""
    values = validate({k: v for k, v in broker_overrides.items() if k in PER_BROKER_CONFIG}, True)
    return tuple(values.get(n, key.default) for n, key in PER_BROKER_CONFIG.items())  # type: ignore[return-value]


def effective_config(static: KafkaConfig, default: Mapping[str, str], broker: Mapping[str, str]) -> KafkaConfig:
    """server.properties, then the cluster-wide dynamic log defaults, then this broker's own."""
    props = dict(static.originals)
    props.update({k: v for k, v in default.items() if k in LOG_DEFAULTS})
    props.update({k: v for k, v in broker.items() if k in LOG_DEFAULTS})
    return KafkaConfig(props) if props != static.originals else static
