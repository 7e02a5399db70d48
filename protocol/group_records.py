"""The record keys and values of ``__consumer_offsets`` (Kafka 2.8's GroupMetadataManager).

Invariant: every key and every value is an int16 schema version followed by the struct
of that version; key versions 0-1 are offset commits {group, topic, partition}, key
version 2 is group metadata {group}; a null value is a tombstone. Encoding picks the
versions Kafka 2.8 writes (offset key v1; offset value v1 when an explicit expire
timestamp is present, else v3; group key v2; group value v3). Decoding raises only
``GroupRecordError`` (a ValueError) for unknown versions or malformed bytes.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple, Union

from .errors import KafkaError
from .schema import BYTES, INT32, INT64, STRING, F, Message, Struct

__all__ = [
    "OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue",
    "OffsetKey", "GroupKey", "OffsetValue", "GroupValue", "MemberValue", "GroupRecordError",
    "encode_offset_commit", "encode_group_metadata", "decode_key", "decode_offset_value",
    "decode_group_value", "decode_record", "is_offset_commit_key", "is_group_metadata_key",
]

# --- schemas (Kafka's "data" messages; versions are the record schema versions) -------

OffsetCommitKey = Message("OffsetCommitKey", "0-1", fields=[
    F("group", STRING, "0-1"),
    F("topic", STRING, "0-1"),
    F("partition", INT32, "0-1"),
])

OffsetCommitValue = Message("OffsetCommitValue", "0-3", fields=[
    F("offset", INT64, "0+"),
    F("leader_epoch", INT32, "3+", default=-1),
    F("metadata", STRING, "0+"),
    F("commit_timestamp", INT64, "0+"),
    F("expire_timestamp", INT64, "1", default=-1),
])

GroupMetadataKey = Message("GroupMetadataKey", "2", fields=[
    F("group", STRING, "2"),
])

GroupMetadataValue = Message("GroupMetadataValue", "0-3", fields=[
    F("protocol_type", STRING, "0+"),
    F("generation", INT32, "0+"),
    F("protocol", STRING, "0+", nullable="0+"),
    F("leader", STRING, "0+", nullable="0+"),
    F("current_state_timestamp", INT64, "2+", default=-1),
    F("members", [
        F("member_id", STRING, "0+"),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
        F("client_id", STRING, "0+"),
        F("client_host", STRING, "0+"),
        F("rebalance_timeout", INT32, "1+"),
        F("session_timeout", INT32, "0+"),
        F("subscription", BYTES, "0+"),
        F("assignment", BYTES, "0+"),
    ], "0+"),
])

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3
_VERSION = struct.Struct(">h")
_VALUE_V3 = struct.Struct(">hqih")   # version 3, offset, leader epoch, metadata's length
_VALUE_V1 = struct.Struct(">hqh")    # version 1, offset, metadata's length
_INT64 = struct.Struct(">q")
_TWO_INT64 = struct.Struct(">qq")
_MAX_INT16 = 2**15 - 1


class GroupRecordError(ValueError):
    """A ``__consumer_offsets`` record that cannot be decoded."""


# --- decoded forms -----------------------------------------------------------------

@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


class OffsetValue(NamedTuple):
    """An offset commit's value (a tuple: one is made per commit, on OffsetCommit's path)."""

    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1          # -1: none (written from value v3)
    expire_timestamp: int = -1      # -1: none (only value v1 carries it)


@dataclass(frozen=True)
class MemberValue:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberValue, ...] = field(default_factory=tuple)


Key = Union[OffsetKey, GroupKey]
Value = Union[OffsetValue, GroupValue]


# --- encoding ------------------------------------------------------------------------

def _with_version(message: Message, version: int, obj: dict[str, Any]) -> bytes:
    return _VERSION.pack(version) + message.encode(obj, version)


def offset_value_version(value: OffsetValue) -> int:
    """Kafka 2.8 (inter.broker.protocol >= 2.1): v1 with an explicit expiry, else v3."""
    return 1 if value.expire_timestamp != -1 else 3


@lru_cache(maxsize=16384)
def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    """An offset commit record's key (kept: a group commits the same partitions again and again)."""
    return _with_version(OffsetCommitKey, OFFSET_KEY_VERSION,
                         {"group": group, "topic": topic, "partition": partition})


def encode_group_key(group: str) -> bytes:
    return _with_version(GroupMetadataKey, GROUP_KEY_VERSION, {"group": group})


def encode_offset_commit(group: str, topic: str, partition: int, value: OffsetValue | None,
                         value_version: int | None = None) -> tuple[bytes, bytes | None]:
    """(key, value) of an offset commit record; ``value=None`` gives a tombstone."""
    key = encode_offset_key(group, topic, partition)
    if value is None:
        return key, None
    version = offset_value_version(value) if value_version is None else value_version
    metadata = value.metadata.encode()
    if len(metadata) <= _MAX_INT16:   # the versions Kafka 2.8 writes, packed in place (the schema's bytes)
        if version == 3:
            return key, b"".join((_VALUE_V3.pack(3, value.offset, value.leader_epoch, len(metadata)), metadata,
                                  _INT64.pack(value.commit_timestamp)))
        if version == 1:
            return key, b"".join((_VALUE_V1.pack(1, value.offset, len(metadata)), metadata,
                                  _TWO_INT64.pack(value.commit_timestamp, value.expire_timestamp)))
    return key, _with_version(OffsetCommitValue, version, {
        "offset": value.offset, "leader_epoch": value.leader_epoch,
        "metadata": value.metadata, "commit_timestamp": value.commit_timestamp,
        "expire_timestamp": value.expire_timestamp})


def encode_group_metadata(group: str, value: GroupValue | None,
                          value_version: int = GROUP_VALUE_VERSION) -> tuple[bytes, bytes | None]:
    """(key, value) of a group metadata record; ``value=None`` gives a tombstone."""
    key = encode_group_key(group)
    if value is None:
        return key, None
    return key, _with_version(GroupMetadataValue, value_version, {
        "protocol_type": value.protocol_type, "generation": value.generation,
        "protocol": value.protocol, "leader": value.leader,
        "current_state_timestamp": value.current_state_timestamp,
        "members": [{
            "member_id": m.member_id, "group_instance_id": m.group_instance_id,
            "client_id": m.client_id, "client_host": m.client_host,
            "rebalance_timeout": m.rebalance_timeout, "session_timeout": m.session_timeout,
            "subscription": m.subscription, "assignment": m.assignment,
        } for m in value.members]})


# --- decoding ------------------------------------------------------------------------

def _split(data: bytes | bytearray | memoryview, what: str) -> tuple[int, bytes]:
    data = bytes(data)
    if len(data) < 2:
        raise GroupRecordError(f"{what}: {len(data)} bytes, no schema version")
    return _VERSION.unpack_from(data)[0], data[2:]


def _decode(message: Message, version: int, body: bytes) -> Struct:
    if version not in message.versions:
        raise GroupRecordError(f"unknown {message.name} version {version}")
    try:
        return message.decode(body, version)
    except KafkaError as exc:
        raise GroupRecordError(f"{message.name} v{version}: {exc}") from None


def is_offset_commit_key(key: bytes | bytearray | memoryview | None) -> bool:
    return key is not None and len(key) >= 2 and _VERSION.unpack_from(bytes(key[:2]))[0] in (0, 1)


def is_group_metadata_key(key: bytes | bytearray | memoryview | None) -> bool:
    return key is not None and len(key) >= 2 and _VERSION.unpack_from(bytes(key[:2]))[0] == 2


def decode_key(key: bytes | bytearray | memoryview) -> Key:
    version, body = _split(key, "key")
    if version in (0, 1):
        s = _decode(OffsetCommitKey, version, body)
        return OffsetKey(s.group, s.topic, s.partition)
    if version == 2:
        return GroupKey(_decode(GroupMetadataKey, version, body).group)
    raise GroupRecordError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(value: bytes | bytearray | memoryview) -> OffsetValue:
    version, body = _split(value, "offset commit value")
    s = _decode(OffsetCommitValue, version, body)
    return OffsetValue(offset=s.offset, metadata=s.metadata, commit_timestamp=s.commit_timestamp,
                       leader_epoch=s.leader_epoch, expire_timestamp=s.expire_timestamp)


def decode_group_value(value: bytes | bytearray | memoryview) -> GroupValue:
    version, body = _split(value, "group metadata value")
    s = _decode(GroupMetadataValue, version, body)
    return GroupValue(
        protocol_type=s.protocol_type, generation=s.generation, protocol=s.protocol,
        leader=s.leader, current_state_timestamp=s.current_state_timestamp,
        members=tuple(MemberValue(
            member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
            # v0 had no rebalance timeout: Kafka then uses the session timeout
            rebalance_timeout=m.rebalance_timeout if version >= 1 else m.session_timeout,
            session_timeout=m.session_timeout, subscription=m.subscription,
            assignment=m.assignment, group_instance_id=m.group_instance_id) for m in s.members))


def decode_record(key: bytes | bytearray | memoryview,
                  value: bytes | bytearray | memoryview | None) -> tuple[Key, Value | None]:
    """Decode one record; the value is None for a tombstone."""
    k = decode_key(key)
    if value is None:
        return k, None
    if isinstance(k, OffsetKey):
        return k, decode_offset_value(value)
    return k, decode_group_value(value)
