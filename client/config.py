"""Client configuration: Kafka's names and defaults, validated in one place.

Invariant: a ``ClientConfig`` only ever holds known keys (Kafka's dotted names),
each converted to its declared type and checked against its range or choices;
``linger_ms=5`` and ``**{"linger.ms": 5}`` are the same setting. Anything else
raises ``ConfigError`` with one clear line, at construction time.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from odradek.protocol.compression import CODEC_IDS

MAX_INT = 2**31 - 1


class ConfigError(ValueError):
    """A bad client configuration (unknown key, wrong type, out of range)."""


def _int(lo: int = 0, hi: int = 2**63 - 1) -> Callable[[str, Any], int]:
    def conv(name: str, v: Any) -> int:
        if isinstance(v, bool):
            raise ConfigError(f"{name} must be an integer, got {v!r}")
        try:
            n = int(v)
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be an integer, got {v!r}") from None
        if not lo <= n <= hi:
            raise ConfigError(f"{name} must be between {lo} and {hi}, got {n}")
        return n
    return conv


def _float_or_inf(name: str, v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number, got {v!r}") from None


def _bool(name: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    raise ConfigError(f"{name} must be true or false, got {v!r}")


def _str(name: str, v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    raise ConfigError(f"{name} must be a string, got {v!r}")


def _choice(*choices: str) -> Callable[[str, Any], str]:
    """One of ``choices``, matched in any case and given back as written there."""
    canonical = {c.lower(): c for c in choices}

    def conv(name: str, v: Any) -> str:
        s = canonical.get(str(v).lower())
        if s is None:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {v!r}")
        return s
    return conv


def _servers(name: str, v: Any) -> list[tuple[str, int]]:
    items = v.split(",") if isinstance(v, str) else list(v)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = item, "9092"
        host = host.strip("[]") or "localhost"
        try:
            out.append((host, int(port)))
        except ValueError:
            raise ConfigError(f"{name}: bad address {item!r} (expected host:port)") from None
    if not out:
        raise ConfigError(f"{name} must list at least one host:port")
    return out


def _acks(name: str, v: Any) -> int:
    if isinstance(v, str) and v.lower() == "all":
        return -1
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be all, -1, 0 or 1, got {v!r}") from None
    if n not in (-1, 0, 1):
        raise ConfigError(f"{name} must be all, -1, 0 or 1, got {v!r}")
    return n


def _compression(name: str, v: Any) -> int:
    if v is None:
        return 0
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 4:
        return v
    s = str(v).lower()
    if s not in CODEC_IDS:
        raise ConfigError(f"{name} must be one of {', '.join(CODEC_IDS)}, got {v!r}")
    return CODEC_IDS[s]


def _callable_or_none(name: str, v: Any) -> Any:
    if v is None or callable(v):
        return v
    raise ConfigError(f"{name} must be callable, got {v!r}")


def _any(name: str, v: Any) -> Any:
    return v


def _strategies(name: str, v: Any) -> tuple[Any, ...]:
    """Assignor names (``range``, ``roundrobin``, ``sticky``, Java class names) or assignor objects."""
    items = [x.strip() for x in v.split(",")] if isinstance(v, str) else list(v if isinstance(v, (list, tuple)) else [v])
    items = [x for x in items if x != ""]
    if not items:
        raise ConfigError(f"{name} must name at least one assignor")
    return tuple(items)


_Spec = tuple[Any, Callable[[str, Any], Any]]

COMMON: dict[str, _Spec] = {
    "bootstrap.servers": ("localhost:9092", _servers),
    "client.id": (None, _str),
    "request.timeout.ms": (30000, _int(1, MAX_INT)),
    "retry.backoff.ms": (100, _int(0, MAX_INT)),
    "reconnect.backoff.ms": (50, _int(0, MAX_INT)),
    "metadata.max.age.ms": (300000, _int(0, MAX_INT)),
    "socket.connection.setup.timeout.ms": (10000, _int(1, MAX_INT)),
    "connections.max.idle.ms": (540000, _int(-1, MAX_INT)),
    "send.buffer.bytes": (131072, _int(-1, MAX_INT)),
    "receive.buffer.bytes": (65536, _int(-1, MAX_INT)),
    "security.protocol": ("PLAINTEXT", _choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    # TLS: PEM files (Kafka's ssl.keystore.type=PEM layout, or librdkafka's separate files)
    "ssl.truststore.location": (None, _str),
    "ssl.truststore.type": ("PEM", _choice("PEM")),
    "ssl.keystore.location": (None, _str),
    "ssl.keystore.type": ("PEM", _choice("PEM")),
    "ssl.certificate.location": (None, _str),
    "ssl.key.location": (None, _str),
    "ssl.key.password": (None, _str),
    "ssl.endpoint.identification.algorithm": ("https", _str),
    # SASL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    "sasl.mechanism": ("PLAIN", _str),
    "sasl.username": (None, _str),
    "sasl.password": (None, _str),
    "sasl.jaas.config": (None, _str),
}

# Other clients' names for the same settings (kafka-python's and librdkafka's), so their
# configuration files and keyword arguments work unchanged.
ALIASES: dict[str, str] = {
    "ssl.cafile": "ssl.truststore.location", "ssl.ca.location": "ssl.truststore.location",
    "ssl.certfile": "ssl.certificate.location", "ssl.keyfile": "ssl.key.location",
    "ssl.password": "ssl.key.password", "ssl.key.passphrase": "ssl.key.password",
    "sasl.mechanisms": "sasl.mechanism",
    "sasl.plain.username": "sasl.username", "sasl.plain.password": "sasl.password",
}

PRODUCER: dict[str, _Spec] = {
    "acks": (1, _acks),  # Kafka 2.8's default
    "linger.ms": (0, _int(0, MAX_INT)),
    "batch.size": (16384, _int(0, MAX_INT)),
    "compression.type": (0, _compression),
    "retries": (MAX_INT, _int(0, MAX_INT)),
    "delivery.timeout.ms": (120000, _int(0, MAX_INT)),
    "max.in.flight.requests.per.connection": (5, _int(1, MAX_INT)),
    "buffer.memory": (33554432, _int(0)),
    "max.request.size": (1048576, _int(1, MAX_INT)),
    "max.block.ms": (60000, _int(0)),
    "partitioner": ("murmur2", _any),  # "murmur2" (Java default) or a callable(key, all, available) -> int
    "enable.idempotence": (False, _bool),
    "transactional.id": (None, _str),
    "transaction.timeout.ms": (60000, _int(1, MAX_INT)),
    "key.serializer": (None, _callable_or_none),
    "value.serializer": (None, _callable_or_none),
}

CONSUMER: dict[str, _Spec] = {
    "fetch.min.bytes": (1, _int(0, MAX_INT)),
    "fetch.max.wait.ms": (500, _int(0, MAX_INT)),
    "fetch.max.bytes": (52428800, _int(0, MAX_INT)),
    "max.partition.fetch.bytes": (1048576, _int(0, MAX_INT)),
    "auto.offset.reset": ("latest", _choice("latest", "earliest", "none")),
    "max.poll.records": (500, _int(1, MAX_INT)),
    "isolation.level": ("read_uncommitted", _choice("read_uncommitted", "read_committed")),
    "check.crcs": (True, _bool),
    "consumer.timeout.ms": (float("inf"), _float_or_inf),  # kafka-python: iteration stops after this idle time
    "client.rack": ("", _str),
    "group.id": (None, _str),
    "group.instance.id": (None, _str),
    "enable.auto.commit": (True, _bool),
    "auto.commit.interval.ms": (5000, _int(0, MAX_INT)),
    "session.timeout.ms": (10000, _int(1, MAX_INT)),
    "heartbeat.interval.ms": (3000, _int(1, MAX_INT)),
    "max.poll.interval.ms": (300000, _int(1, MAX_INT)),
    "partition.assignment.strategy": (("range",), _strategies),
    "exclude.internal.topics": (True, _bool),
    "allow.auto.create.topics": (True, _bool),
    "default.api.timeout.ms": (60000, _int(0, MAX_INT)),
    "key.deserializer": (None, _callable_or_none),
    "value.deserializer": (None, _callable_or_none),
}

ADMIN: dict[str, _Spec] = {}

KINDS: dict[str, dict[str, _Spec]] = {"producer": PRODUCER, "consumer": CONSUMER, "admin": ADMIN}


def normalize_key(key: str) -> str:
    """``linger_ms`` -> ``linger.ms`` (Kafka's names never contain underscores); other clients'
    names for a setting (``ssl_cafile``, ``sasl.mechanisms``) -> Kafka's."""
    key = key.replace("_", ".").lower()
    return ALIASES.get(key, key)


class ClientConfig(Mapping[str, Any]):
    """Validated settings for one client; read as ``cfg["linger.ms"]`` or ``cfg.linger_ms``."""

    def __init__(self, kind: str, settings: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        specs = {**COMMON, **KINDS[kind]}
        self.kind = kind
        values = {k: spec[0] for k, spec in specs.items()}
        given = {**(settings or {}), **kwargs}
        for raw_key, value in given.items():
            key = normalize_key(raw_key)
            if key not in specs:
                raise ConfigError(f"unknown {kind} configuration {raw_key!r}")
            values[key] = specs[key][1](key, value)
        if isinstance(values["bootstrap.servers"], str):
            values["bootstrap.servers"] = _servers("bootstrap.servers", values["bootstrap.servers"])
        if kind == "consumer":
            _check_consumer(values)
        if kind == "producer":
            values["compression.type"] = _compression("compression.type", values["compression.type"])
            _check_producer(values, given_keys={normalize_key(k) for k in given})
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[normalize_key(key)]

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[normalize_key(name)]
        except KeyError:
            raise AttributeError(name) from None

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"ClientConfig({self.kind!r}, {self._values!r})"


def _check_consumer(values: dict[str, Any]) -> None:
    if values["heartbeat.interval.ms"] >= values["session.timeout.ms"]:
        raise ConfigError("heartbeat.interval.ms must be lower than session.timeout.ms")
    if values["group.instance.id"] is not None and not values["group.instance.id"]:
        raise ConfigError("group.instance.id must be a non-empty string")


def _check_producer(values: dict[str, Any], given_keys: set[str]) -> None:
    # Kafka's ProducerConfig: a transactional.id implies idempotence, which needs acks=all,
    # retries > 0 and at most 5 requests in flight per connection.
    if values["transactional.id"] is not None:
        if not values["transactional.id"]:
            raise ConfigError("transactional.id must be a non-empty string")
        if not values["enable.idempotence"]:
            if "enable.idempotence" in given_keys:
                raise ConfigError("cannot set a transactional.id without also enabling idempotence "
                                  "(enable.idempotence=true)")
            values["enable.idempotence"] = True
    if values["enable.idempotence"]:
        if values["acks"] != -1:
            if "acks" in given_keys:
                raise ConfigError("enable.idempotence requires acks=all (the idempotent producer "
                                  "cannot guarantee idempotence otherwise)")
            values["acks"] = -1
        if values["max.in.flight.requests.per.connection"] > 5:
            raise ConfigError("enable.idempotence requires max.in.flight.requests.per.connection <= 5")
        if values["retries"] == 0:
            raise ConfigError("enable.idempotence requires retries > 0")
    p = values["partitioner"]
    if not (p == "murmur2" or callable(p)):
        raise ConfigError(f"partitioner must be 'murmur2' or a callable, got {p!r}")
    if values["delivery.timeout.ms"] < values["linger.ms"] + values["request.timeout.ms"]:
        # Java raises here unless the user left delivery.timeout.ms at its default.
        if "delivery.timeout.ms" in given_keys:
            raise ConfigError("delivery.timeout.ms must be >= linger.ms + request.timeout.ms")
        values["delivery.timeout.ms"] = values["linger.ms"] + values["request.timeout.ms"]


def parse_properties(lines: list[str] | str) -> dict[str, str]:
    """``k=v`` pairs from a .properties text or a list of ``k=v`` strings (comments skipped)."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    out: dict[str, str] = {}
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ConfigError(f"expected key=value, got {line!r}")
        out[key.strip()] = value.strip()
    return out
