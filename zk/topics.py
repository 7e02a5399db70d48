"""Topic names and topic-level config names, as Kafka 2.8 checks them.

Invariant: a name accepted by ``validate_topic_name`` is one Kafka's
``Topic.validate`` accepts, and a config accepted by ``validate_topic_config``
only uses Kafka 2.8's topic config names with values of the right type (and a
``message.format.version`` odradek can honour: 0.11.0 or later, ``message_format_problem``); every
rejection is a ``KafkaError`` (INVALID_TOPIC_EXCEPTION / INVALID_CONFIG) whose
message is one clear line. A topic whose znodes would not fit ZooKeeper's ``jute.maxbuffer``
is refused (``check_partition_count``, ``check_znode_size``) before anything is built or
written. Pure data and functions: the broker may reuse them.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from odradek.protocol.errors import ErrorCode, KafkaError

MAX_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")

# ZooKeeper's default jute.maxbuffer, the largest znode it accepts; the smallest entry a partition
# takes in the topic znode is '"0":[1],' (8 bytes), which bounds the partitions a topic can have.
ZNODE_MAX_BYTES = 0xFFFFF
MAX_PARTITIONS = ZNODE_MAX_BYTES // 8

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME})

# Kafka 2.8's ApiVersion names (KAFKA_0_8_0 .. KAFKA_2_8_IV1): short versions and their IVs
_API_VERSIONS = frozenset(
    ["0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0-IV0", "0.10.0-IV1", "0.10.0", "0.10.1-IV0", "0.10.1-IV1",
     "0.10.1-IV2", "0.10.1", "0.10.2-IV0", "0.10.2", "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "0.11.0",
     "1.0-IV0", "1.0", "1.1-IV0", "1.1", "2.0-IV0", "2.0-IV1", "2.0", "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.1",
     "2.2-IV0", "2.2-IV1", "2.2", "2.3-IV0", "2.3-IV1", "2.3", "2.4-IV0", "2.4-IV1", "2.4", "2.5-IV0", "2.5",
     "2.6-IV0", "2.6", "2.7-IV0", "2.7-IV1", "2.7-IV2", "2.7", "2.8-IV0", "2.8-IV1", "2.8"])

COLLISION_WARNING = ("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
                     "could collide. To avoid issues it is best to use either, but not both.")


def message_format_problem(version: str) -> str | None:
    """Why a (log.)message.format.version is refused, or None: Kafka's ApiVersion.apply reads
    "2.8.1" as "2.8" and "0.10.2.1" as "0.10.2"; odradek stores message format v2 only, so a
    version before 0.11.0 (magic 0 or 1) is refused too (old clients' messages are converted)."""
    key = ".".join(version.split(".")[:3 if version.startswith("0.") else 2])
    if key not in _API_VERSIONS:
        return f"Version `{version}` is not a valid version"
    if key.startswith(("0.8", "0.9", "0.10")):
        return ("odradek stores only message format v2 (0.11.0 and later); old clients' messages are "
                "converted on produce and fetch")
    return None


def validate_topic_name(topic: str) -> None:
    """Kafka's ``Topic.validate``: raise KafkaError(INVALID_TOPIC_EXCEPTION) for an illegal name."""
    if not topic:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if topic in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(topic) > MAX_NAME_LENGTH:  # the name cut short: a 32767-char one would not fit the response
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
                         f"topic name: {topic[:MAX_NAME_LENGTH]}... ({len(topic)} characters)")
    if not _LEGAL_NAME.fullmatch(topic):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f'Topic name "{topic}" is illegal, it contains a character other than '
                         "ASCII alphanumerics, '.', '_' and '-'")


def check_partition_count(count: int) -> None:
    """Refuse (INVALID_PARTITIONS) a partition count whose topic znode could not fit ZooKeeper's
    ``jute.maxbuffer``, before any assignment is built (2**31-1 partitions would exhaust memory)."""
    if count > MAX_PARTITIONS:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                         f"Number of partitions {count} is more than a topic znode can hold ({MAX_PARTITIONS}).")


def check_znode_size(data: bytes, code: ErrorCode, what: str) -> None:
    """Refuse (``code``) a znode ZooKeeper would refuse: a write over ``jute.maxbuffer`` makes the
    server drop the writer's session (the controller's), so it is never sent."""
    if len(data) > ZNODE_MAX_BYTES:
        raise KafkaError(code, f"The {what} would take {len(data)} bytes in ZooKeeper, more than "
                               f"jute.maxbuffer ({ZNODE_MAX_BYTES}).")


def is_internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS


def has_collision_chars(topic: str) -> bool:
    """True if the name contains '.' or '_' (which collide in metric names)."""
    return "." in topic or "_" in topic


def has_collision(a: str, b: str) -> bool:
    """True if two names are equal once '.' is read as '_'."""
    return a.replace(".", "_") == b.replace(".", "_")


def colliding_topics(topic: str, existing: Iterable[str]) -> list[str]:
    """Existing topics (other than ``topic`` itself) that collide with ``topic``."""
    return sorted(t for t in existing if t != topic and has_collision(topic, t))


def collision_warning(topic: str) -> str | None:
    """kafka-topics' warning line for a name with '.' or '_', else None."""
    return COLLISION_WARNING if has_collision_chars(topic) else None


# ------------------------------------------------------------------ topic configs

# Kafka 2.8 topic configs (LogConfig): name -> (type, valid values or None, minimum or None).
# Types: "long", "int", "double", "boolean", "string", "list".
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TOPIC_CONFIGS: dict[str, tuple[str, tuple[str, ...] | None, float | None]] = {
    "cleanup.policy": ("list", ("compact", "delete"), None),
    "compression.type": ("string", _COMPRESSION, None),
    "delete.retention.ms": ("long", None, 0),
    "file.delete.delay.ms": ("long", None, 0),
    "flush.messages": ("long", None, 0),
    "flush.ms": ("long", None, 0),
    "follower.replication.throttled.replicas": ("list", None, None),
    "index.interval.bytes": ("int", None, 0),
    "leader.replication.throttled.replicas": ("list", None, None),
    "max.compaction.lag.ms": ("long", None, 1),
    "max.message.bytes": ("int", None, 0),
    "message.downconversion.enable": ("boolean", None, None),
    "message.format.version": ("string", None, None),
    "message.timestamp.difference.max.ms": ("long", None, 0),
    "message.timestamp.type": ("string", ("CreateTime", "LogAppendTime"), None),
    "min.cleanable.dirty.ratio": ("double", None, 0),
    "min.compaction.lag.ms": ("long", None, 0),
    "min.insync.replicas": ("int", None, 1),
    "preallocate": ("boolean", None, None),
    "retention.bytes": ("long", None, None),
    "retention.ms": ("long", None, -1),
    "segment.bytes": ("int", None, 14),
    "segment.index.bytes": ("int", None, 4),
    "segment.jitter.ms": ("long", None, 0),
    "segment.ms": ("long", None, 1),
    "unclean.leader.election.enable": ("boolean", None, None),
}
TOPIC_CONFIG_NAMES = frozenset(TOPIC_CONFIGS)

_INT_RANGE = {"int": (-2**31, 2**31 - 1), "long": (-2**63, 2**63 - 1)}


def _bad(name: str, value: str, reason: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {reason}")


def validate_topic_config(config: Mapping[str, str]) -> None:
    """Kafka's ``LogConfig.validate`` (names and value types): raise KafkaError(INVALID_CONFIG)."""
    for name, raw in config.items():
        if name not in TOPIC_CONFIGS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        kind, valid, minimum = TOPIC_CONFIGS[name]
        value = str(raw).strip()
        number: float | None = None
        if kind in _INT_RANGE:
            try:
                number = int(value)
            except ValueError:
                raise _bad(name, value, f"Not a number of type {kind.upper()}") from None
            lo, hi = _INT_RANGE[kind]
            if not lo <= number <= hi:
                raise _bad(name, value, f"Not a number of type {kind.upper()}")
        elif kind == "double":
            try:
                number = float(value)
            except ValueError:
                raise _bad(name, value, "Not a number of type DOUBLE") from None
            if name == "min.cleanable.dirty.ratio" and number > 1:
                raise _bad(name, value, "Value must be no more than 1")
        elif kind == "boolean":
            if value.lower() not in ("true", "false"):
                raise _bad(name, value, "Expected value to be either true or false")
        elif kind == "list" and valid:
            items = [v.strip() for v in value.split(",") if v.strip()]
            bad = [v for v in items if v not in valid]
            if bad or not items:
                raise _bad(name, value, f"String must be one of: {', '.join(valid)}")
        elif name.endswith(".replication.throttled.replicas"):
            items = [v.strip() for v in value.split(",")]
            if not (value == "*" or all(re.fullmatch(r"([0-9]+:[0-9]+)?", v) for v in items)):
                raise _bad(name, value, f"{name} must be the literal '*' or a list of replicas in the following "
                           "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
        elif name == "message.format.version" and message_format_problem(value):
            raise _bad(name, value, str(message_format_problem(value)))
        elif kind == "string" and valid and value not in valid:
            raise _bad(name, value, f"String must be one of: {', '.join(valid)}")
        if number is not None and minimum is not None and number < minimum:
            raise _bad(name, value, f"Value must be at least {minimum:g}")
