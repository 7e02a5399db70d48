"""Options of the ``odradek`` Spark data source, parsed once, the way Spark's Kafka source reads them.

Invariant: pure functions of the option map, no I/O and no Spark import, so
the driver and every executor derive the same settings from the same options;
``ReadOptions``/``WriteOptions`` are plain picklable values. Option names are
Spark's Kafka source names (``kafka.bootstrap.servers``, ``subscribe``,
``subscribePattern``, ``assign``, ``startingOffsets``, ``endingOffsets``,
``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``includeHeaders``,
``kafkaConsumer.pollTimeoutMs``, ``topic``); keys are case-insensitive, like Spark's.
Other ``kafka.<name>`` options go to our client when it knows ``<name>``. The sink's
own ``exactlyOnce`` and ``transactionalIdPrefix`` select the transactional sink.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from odradek.client.config import COMMON, KINDS, normalize_key

EARLIEST = -2
LATEST = -1

# Offsets as kept in Spark's checkpoint: {"topic": {"0": 23, "1": 5}}.
OffsetMap = dict[str, dict[str, int]]


class OptionError(ValueError):
    """An option the user has to fix (one clear line)."""


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): v for k, v in options.items()}


def _bool(options: dict[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, got {raw!r}")
    return value == "true"


def client_settings(options: Mapping[str, str], kind: str) -> dict[str, Any]:
    """``kafka.<name>`` options our ``kind`` client knows (bootstrap.servers included)."""
    known = {**COMMON, **KINDS[kind]}
    out: dict[str, Any] = {}
    for key, value in options.items():
        k = str(key)
        if k.lower().startswith("kafka."):
            name = normalize_key(k[len("kafka."):])
            if name in known:
                out[name] = value
    if "bootstrap.servers" not in out:
        raise OptionError("option kafka.bootstrap.servers is required")
    return out


def parse_offset_spec(raw: str | None, name: str, default: str) -> str | OffsetMap:
    """``earliest`` / ``latest`` or a per-partition JSON map ``{"t": {"0": 23, "1": -2}}``."""
    value = (raw if raw is not None else default).strip()
    if value.lower() in ("earliest", "latest"):
        return value.lower()
    try:
        parsed = json.loads(value)
    except ValueError:
        raise OptionError(f"option {name} must be earliest, latest or JSON like "
                          f'{{"topic":{{"0":23}}}}, got {value!r}') from None
    if not isinstance(parsed, dict):
        raise OptionError(f"option {name}: expected a JSON object, got {value!r}")
    out: OffsetMap = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {name}: topic {topic!r} must map partitions to offsets")
        out[topic] = {}
        for p, off in parts.items():
            try:
                pi, oi = int(p), int(off)
            except (TypeError, ValueError):
                raise OptionError(f"option {name}: bad entry {topic}/{p}: {off!r}") from None
            if oi < EARLIEST:
                raise OptionError(f"option {name}: offset {oi} for {topic}-{pi} (use -2 earliest, -1 latest)")
            out[topic][str(pi)] = oi
    return out


@dataclass(frozen=True)
class Subscription:
    """Exactly one of ``subscribe`` (topics), ``subscribePattern`` (regex), ``assign`` (partitions)."""
    kind: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            return re.fullmatch(self.pattern or "", topic) is not None
        return any(t == topic for t, _ in self.assigned)

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return f"assign={len(self.assigned)} partitions"


def parse_subscription(options: dict[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if options.get(k)]
    if len(given) != 1:
        raise OptionError("exactly one of the options subscribe, subscribePattern, assign is required")
    kind = given[0]
    raw = options[kind].strip()
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("option subscribe names no topic")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(f"option subscribePattern is not a valid regex: {exc}") from None
        return Subscription("subscribePattern", pattern=raw)
    try:
        parsed = json.loads(raw)
        assigned = tuple(sorted({(str(t), int(p)) for t, ps in parsed.items() for p in ps}))
    except (ValueError, TypeError, AttributeError):
        raise OptionError(f'option assign must be JSON like {{"topic":[0,1]}}, got {raw!r}') from None
    if not assigned:
        raise OptionError("option assign names no partition")
    return Subscription("assign", assigned=assigned)


@dataclass(frozen=True)
class ReadOptions:
    """Everything a reader needs, on the driver and on executors."""
    consumer: dict[str, Any] = field(hash=False)
    subscription: Subscription
    starting: str | OffsetMap = field(hash=False)
    ending: str | OffsetMap = field(hash=False)
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int

    @property
    def bootstrap(self) -> str:
        return str(self.consumer["bootstrap.servers"])


def parse_read_options(options: Mapping[str, str], streaming: bool) -> ReadOptions:
    low = _lower(options)
    starting = parse_offset_spec(low.get("startingoffsets"), "startingOffsets",
                                 "latest" if streaming else "earliest")
    if streaming and "endingoffsets" in low:
        raise OptionError("option endingOffsets is for batch queries only")
    ending = parse_offset_spec(low.get("endingoffsets"), "endingOffsets", "latest")
    if ending == "earliest":
        raise OptionError("option endingOffsets cannot be earliest")
    if isinstance(ending, dict) and any(o == EARLIEST for ps in ending.values() for o in ps.values()):
        raise OptionError("option endingOffsets cannot use -2 (earliest)")
    if not streaming and isinstance(starting, dict) and any(
            o == LATEST for ps in starting.values() for o in ps.values()):
        raise OptionError("option startingOffsets cannot use -1 (latest) in a batch query")
    if not streaming and starting == "latest":
        raise OptionError("option startingOffsets cannot be latest in a batch query")
    max_per_trigger = low.get("maxoffsetspertrigger")
    try:
        mpt = int(max_per_trigger) if max_per_trigger is not None else None
        poll_timeout = int(low.get("kafkaconsumer.polltimeoutms", "120000"))
    except ValueError:
        raise OptionError("options maxOffsetsPerTrigger and kafkaConsumer.pollTimeoutMs must be integers") from None
    if mpt is not None and mpt < 1:
        raise OptionError("option maxOffsetsPerTrigger must be >= 1")
    return ReadOptions(
        consumer=client_settings(options, "consumer"),
        subscription=parse_subscription(low),
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=mpt,
        fail_on_data_loss=_bool(low, "failOnDataLoss", True),
        include_headers=_bool(low, "includeHeaders", False),
        poll_timeout_ms=poll_timeout,
    )


@dataclass(frozen=True)
class WriteOptions:
    producer: dict[str, Any] = field(hash=False)
    topic: str | None
    exactly_once: bool = False
    # transactional.id of write task p is f"{prefix}-{p}"; None: derived from the query id
    transactional_id_prefix: str | None = None

    @property
    def bootstrap(self) -> str:
        return str(self.producer["bootstrap.servers"])


def parse_write_options(options: Mapping[str, str], streaming: bool = False) -> WriteOptions:
    """Producer settings and sink options; ``exactlyOnce=true`` is for streaming writes only."""
    low = _lower(options)
    producer = client_settings(options, "producer")
    if "transactional.id" in producer:
        raise OptionError("option kafka.transactional.id cannot be set: the sink gives each write task its "
                          "own (use exactlyOnce=true and transactionalIdPrefix)")
    exactly_once = _bool(low, "exactlyOnce", False)
    prefix = low.get("transactionalidprefix")
    if prefix is not None:
        prefix = str(prefix).strip()
        if not prefix:
            raise OptionError("option transactionalIdPrefix must not be empty")
        if not exactly_once:
            raise OptionError("option transactionalIdPrefix needs exactlyOnce=true")
    if exactly_once and not streaming:
        raise OptionError("option exactlyOnce is for streaming writes (writeStream) only: a batch write "
                          "has no batch id to replay against")
    if exactly_once:
        for name, bad in (("enable.idempotence", ("false",)), ("acks", ("0", "1"))):
            if str(producer.get(name, "")).strip().lower() in bad:
                raise OptionError(f"option kafka.{name}={producer[name]} conflicts with exactlyOnce=true "
                                  "(transactions need the idempotent producer and acks=all)")
    producer.setdefault("acks", "all")
    producer.setdefault("linger.ms", 5)
    producer.setdefault("batch.size", 65536)
    return WriteOptions(producer=producer, topic=(low.get("topic") or None), exactly_once=exactly_once,
                        transactional_id_prefix=prefix)
