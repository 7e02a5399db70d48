"""Dynamic per-broker configs: what a running broker takes from /config/brokers/<id>.

Invariant: declared once here (Kafka's DynamicConfig.Broker names, types and defaults: the
replication throttle rates of KIP-73), parsed by the same ``_parse`` as every other config;
none has a cluster-wide default, and a name not declared here cannot be updated dynamically.
"""
from __future__ import annotations

from typing import Any, Mapping

from .types import LONG, LONG_MAX, ConfigError, ConfigKey, _parse, _table, at_least

DYNAMIC_BROKER_CONFIG: dict[str, ConfigKey] = _table([
    ("leader.replication.throttled.rate", LONG, LONG_MAX, at_least(0),
     "Bytes/s of replication traffic this broker serves as leader to the replicas listed in topics' "
     "leader.replication.throttled.replicas."),
    ("follower.replication.throttled.rate", LONG, LONG_MAX, at_least(0),
     "Bytes/s of replication traffic this broker fetches as follower for the replicas listed in topics' "
     "follower.replication.throttled.replicas."),
])


def dynamic_broker_values(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Every dynamic broker config's typed value under ``overrides`` (defaults for the rest); an
    unknown name or a bad value raises ConfigError."""
    unknown = sorted(set(overrides) - set(DYNAMIC_BROKER_CONFIG))
    if unknown:
        raise ConfigError(f"Cannot update these configs dynamically: {', '.join(unknown)}")
    return {name: key.default if overrides.get(name) is None else _parse(key, overrides[name])
            for name, key in DYNAMIC_BROKER_CONFIG.items()}
