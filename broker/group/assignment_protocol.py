"""ConsumerProtocol: the subscription and assignment bytes of the "consumer" protocol type.

Invariant: the coordinator treats member metadata and assignments as opaque bytes; this
module only reads them for DescribeGroups tooling and for offset expiry (the topics a
consumer group subscribes to). Each blob is an int16 version followed by the struct;
a version newer than 1 is read as version 1 and trailing bytes are ignored (Kafka reads
every newer version through the v0/v1 prefix). Malformed input raises ValueError.
"""
from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field

from odradek.protocol.schema import BYTES, INT32, STRING, ArrayOf, F, Message, Struct

PROTOCOL_TYPE = "consumer"

_TOPIC_PARTITIONS = [
    F("topic", STRING, "0+"),
    F("partitions", ArrayOf(INT32), "0+"),
]

Subscription = Message("ConsumerProtocolSubscription", "0-1", fields=[
    F("topics", ArrayOf(STRING), "0+"),
    F("user_data", BYTES, "0+", nullable="0+", default=None),
    F("owned_partitions", _TOPIC_PARTITIONS, "1+"),
])

Assignment = Message("ConsumerProtocolAssignment", "0-1", fields=[
    F("assigned_partitions", _TOPIC_PARTITIONS, "0+"),
    F("user_data", BYTES, "0+", nullable="0+", default=None),
])

_VERSION = struct.Struct(">h")


@dataclass(frozen=True)
class ConsumerSubscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = field(default_factory=dict)
    version: int = 0


@dataclass(frozen=True)
class ConsumerAssignment:
    partitions: dict[str, list[int]]
    user_data: bytes | None = None
    version: int = 0


def _parse_prefix(message: Message, data: bytes) -> tuple[int, Struct]:
    data = bytes(data)
    if len(data) < 2:
        raise ValueError(f"{message.name}: missing version")
    version = _VERSION.unpack_from(data)[0]
    if version < 0:
        raise ValueError(f"{message.name}: negative version {version}")
    read_as = min(version, message.max_version)
    stream = io.BytesIO(data)
    stream.seek(2)
    try:
        return version, message.construct(read_as)._parse(stream, None, message.name)
    except Exception as exc:  # construct/struct/unicode errors
        raise ValueError(f"malformed {message.name}: {exc}") from None


def _tp_map(items: list[Struct]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in items:
        out.setdefault(tp.topic, []).extend(tp.partitions)
    return out


def decode_subscription(data: bytes) -> ConsumerSubscription:
    version, s = _parse_prefix(Subscription, data)
    return ConsumerSubscription(list(s.topics), s.user_data, _tp_map(s.owned_partitions), version)


def decode_assignment(data: bytes) -> ConsumerAssignment:
    version, s = _parse_prefix(Assignment, data)
    return ConsumerAssignment(_tp_map(s.assigned_partitions), s.user_data, version)


def encode_subscription(topics: list[str], user_data: bytes | None = None,
                        owned_partitions: dict[str, list[int]] | None = None,
                        version: int = 0) -> bytes:
    owned = [{"topic": t, "partitions": p} for t, p in (owned_partitions or {}).items()]
    return _VERSION.pack(version) + Subscription.encode(
        {"topics": topics, "user_data": user_data, "owned_partitions": owned}, version)


def encode_assignment(partitions: dict[str, list[int]], user_data: bytes | None = None,
                      version: int = 0) -> bytes:
    assigned = [{"topic": t, "partitions": p} for t, p in partitions.items()]
    return _VERSION.pack(version) + Assignment.encode(
        {"assigned_partitions": assigned, "user_data": user_data}, version)


def subscribed_topics(subscriptions: list[bytes]) -> set[str] | None:
    """Union of the topics of every subscription, or None if one cannot be parsed."""
    topics: set[str] = set()
    try:
        for data in subscriptions:
            topics.update(decode_subscription(data).topics)
    except ValueError:
        return None
    return topics
