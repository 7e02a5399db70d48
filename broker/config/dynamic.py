"""Dynamic broker configs: what running brokers take from /config/brokers/<id> and /<default>.

Invariant: declared once here, as Kafka 2.8's DynamicBrokerConfig allows them: the per-broker
replication throttle rates and the log dir move rate (DynamicConfig.Broker, KIP-73/KIP-113; for
one broker id only), the log defaults (DynamicLogConfig: the broker settings topic configs fall
back to, but not log.message.format.version), the connection limits (DynamicConnectionQuota), the log cleaner's
backoff, and each listener's keystore and truststore (DynamicListenerConfig's SSL part; for one
broker id only, as ``ssl.*`` or ``listener.name.<l>.ssl.*``). Values are parsed by the same
``_parse`` as every other config; a name not declared here cannot be updated dynamically. The
config a broker runs with is its server.properties under the cluster-wide dynamic defaults under
its own dynamic configs (``effective_config``); a rejected change changes nothing. Password
values are stored encoded with ``password.encoder.secret`` (``encode_passwords``) and decoded
when read (``decode_passwords``); without a secret a password config cannot be set dynamically.
"""
from __future__ import annotations

from typing import Any, Mapping

from odradek.zk.password_encoder import PasswordEncoder, PasswordEncoderError

from .kafka_config import BROKER_CONFIG, BROKER_SYNONYM, KafkaConfig
from .types import LONG, LONG_MAX, PASSWORD, ConfigError, ConfigKey, _parse, _table, at_least

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
CONNECTION_LIMITS = frozenset({"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides"})
CLEANER_CONFIGS = frozenset({"log.cleaner.backoff.ms"})
SSL_STORES = frozenset({"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
                        "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type",
                        "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates"})
DEFAULT_LEVEL = "<default>"


def split_listener(name: str) -> tuple[str | None, str]:
    """``listener.name.<l>.<key>`` -> (``<l>``, ``<key>``); any other name -> (None, name)."""
    if name.startswith("listener.name."):
        listener, _, key = name[len("listener.name."):].partition(".")
        if listener and key:
            return listener, key
    return None, name


def key_of(name: str) -> ConfigKey | None:
    """The declaration a dynamic config's value is parsed by (None: not dynamically updatable)."""
    listener, base = split_listener(name)
    if listener is not None:
        if base == "max.connections":
            return ConfigKey(name, "int", None, at_least(0), "Connections this listener accepts.")
        return BROKER_CONFIG[base]._replace(name=name) if base in SSL_STORES else None
    if name in PER_BROKER_CONFIG:
        return PER_BROKER_CONFIG[name]
    if name in LOG_DEFAULTS or name in CONNECTION_LIMITS or name in CLEANER_CONFIGS or name in SSL_STORES:
        return BROKER_CONFIG[name]
    return None


def per_broker_only(name: str) -> bool:
    return name in PER_BROKER_CONFIG or split_listener(name)[1] in SSL_STORES


def is_password(name: str) -> bool:
    key = key_of(name)
    return key is not None and key.type == PASSWORD


def validate(overrides: Mapping[str, Any], broker_level: bool) -> dict[str, Any]:
    """The typed values of ``overrides`` for one broker (``broker_level``) or the cluster default;
    ConfigError with Kafka's message for a name that cannot be set there or a bad value."""
    fixed = sorted(n for n in overrides if key_of(n) is None)
    if fixed:
        raise ConfigError(f"Cannot update these configs dynamically: {', '.join(fixed)}")
    if not broker_level:
        per_broker = sorted(n for n in overrides if per_broker_only(n))
        if per_broker:
            raise ConfigError("Cannot update these configs at default cluster level, broker id must be specified: "
                              + ", ".join(per_broker))
    out = {}
    for name, raw in overrides.items():
        out[name] = _parse(key_of(name), raw)  # type: ignore[arg-type]
    return out


def password_encoder(config: KafkaConfig, old: bool = False) -> PasswordEncoder | None:
    """The encoder of ``password.encoder.secret`` (``old``: of ``password.encoder.old.secret``)."""
    secret = config["password.encoder.old.secret" if old else "password.encoder.secret"]
    if not secret:
        return None
    try:
        return PasswordEncoder(str(secret), config["password.encoder.keyfactory.algorithm"],
                               config["password.encoder.cipher.algorithm"], config["password.encoder.key.length"],
                               config["password.encoder.iterations"])
    except PasswordEncoderError as e:
        raise ConfigError(str(e)) from None


def encode_passwords(config: KafkaConfig, overrides: Mapping[str, str]) -> dict[str, str]:
    """``overrides`` as stored in ZooKeeper: password values encoded (ConfigError without a secret)."""
    names = [n for n, v in overrides.items() if is_password(n) and v is not None]
    if not names:
        return dict(overrides)
    encoder = password_encoder(config)
    if encoder is None:
        raise ConfigError(f"Password encoder secret not configured: password.encoder.secret must be set in "
                          f"server.properties to update {', '.join(sorted(names))} dynamically")
    return {n: (encoder.encode(v) if n in names else v) for n, v in overrides.items()}


def decode_passwords(config: KafkaConfig, stored: Mapping[str, str]) -> dict[str, str]:
    """``stored`` (as read from ZooKeeper) with password values decoded, by the current secret or
    the old one; ConfigError when neither decodes one."""
    names = [n for n in stored if is_password(n)]
    if not names:
        return dict(stored)
    encoders = [e for e in (password_encoder(config), password_encoder(config, old=True)) if e is not None]
    if not encoders:
        raise ConfigError(f"{', '.join(sorted(names))} cannot be decoded: password.encoder.secret is not set")
    out = dict(stored)
    for name in names:
        for i, encoder in enumerate(encoders):
            try:
                out[name] = encoder.decode(stored[name])
                break
            except PasswordEncoderError:
                if i == len(encoders) - 1:
                    raise ConfigError(f"{name}: the stored value could not be decoded with password.encoder.secret "
                                      f"or password.encoder.old.secret") from None
    return out


def throttle_rates(broker_overrides: Mapping[str, Any]) -> tuple[int, int, int]:
    """(leader, follower, log dir move) throttle rates of a broker's dynamic overrides."""
    values = validate({k: v for k, v in broker_overrides.items() if k in PER_BROKER_CONFIG}, True)
    return tuple(values.get(n, key.default) for n, key in PER_BROKER_CONFIG.items())  # type: ignore[return-value]


def effective_config(static: KafkaConfig, default: Mapping[str, str], broker: Mapping[str, str]) -> KafkaConfig:
    """server.properties, then the cluster-wide dynamic defaults, then this broker's own (decoded)."""
    props = dict(static.originals)
    props.update({k: v for k, v in default.items() if key_of(k) is not None and k not in PER_BROKER_CONFIG})
    props.update({k: v for k, v in broker.items() if key_of(k) is not None and k not in PER_BROKER_CONFIG})
    return KafkaConfig(props) if props != static.originals else static
