"""The record keys and values of ``__transaction_state`` (Kafka 2.8's TransactionLog).

Invariant: a key is int16 version 0 + the transactional id; a value is int16 version 0
+ {producer id, producer epoch, timeout, status byte, nullable partitions array,
last update timestamp, start timestamp}; a null value is a tombstone. The partitions
array is written null for the Empty state (as Kafka does) and is ignored on decode for
Empty. Decoding raises only ``TxnRecordError`` (a ValueError) for unknown versions,
unknown status bytes or malformed bytes.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .errors import KafkaError
from .schema import INT8, INT16, INT32, INT64, STRING, ArrayOf, F, Message, Struct

__all__ = [
    "TransactionLogKey", "TransactionLogValue", "TxnValue", "TxnRecordError",
    "encode_txn_key", "encode_txn_value", "encode_txn_record", "decode_txn_key",
    "decode_txn_value", "decode_txn_record", "STATUS_NAMES",
]

TransactionLogKey = Message("TransactionLogKey", "0", fields=[
    F("transactional_id", STRING, "0"),
])

TransactionLogValue = Message("TransactionLogValue", "0", fields=[
    F("producer_id", INT64, "0"),
    F("producer_epoch", INT16, "0"),
    F("transaction_timeout_ms", INT32, "0"),
    F("transaction_status", INT8, "0"),
    F("transaction_partitions", [
        F("topic", STRING, "0"),
        F("partition_ids", ArrayOf(INT32), "0"),
    ], "0", nullable="0"),
    F("transaction_last_update_timestamp_ms", INT64, "0"),
    F("transaction_start_timestamp_ms", INT64, "0"),
])

KEY_VERSION = 0
VALUE_VERSION = 0
EMPTY_STATUS = 0
# status byte -> Kafka's state name (TransactionState.fromId)
STATUS_NAMES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
                4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}
_VERSION = struct.Struct(">h")


class TxnRecordError(ValueError):
    """A ``__transaction_state`` record that cannot be decoded."""


@dataclass(frozen=True)
class TxnValue:
    """One transaction metadata snapshot as stored in the log."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    last_update_timestamp_ms: int = -1
    start_timestamp_ms: int = -1


# --- encoding ------------------------------------------------------------------------

def encode_txn_key(transactional_id: str) -> bytes:
    return _VERSION.pack(KEY_VERSION) + TransactionLogKey.encode(
        {"transactional_id": transactional_id}, KEY_VERSION)


def encode_txn_value(value: TxnValue) -> bytes:
    """Value bytes; Empty must carry no partitions (Kafka writes a null array then)."""
    if value.status == EMPTY_STATUS and value.partitions:
        raise ValueError("an Empty transaction has no partitions")
    if value.status == EMPTY_STATUS:
        partitions = None
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(value.partitions):
            by_topic.setdefault(topic, []).append(p)
        partitions = [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()]
    return _VERSION.pack(VALUE_VERSION) + TransactionLogValue.encode({
        "producer_id": value.producer_id, "producer_epoch": value.producer_epoch,
        "transaction_timeout_ms": value.timeout_ms, "transaction_status": value.status,
        "transaction_partitions": partitions,
        "transaction_last_update_timestamp_ms": value.last_update_timestamp_ms,
        "transaction_start_timestamp_ms": value.start_timestamp_ms}, VALUE_VERSION)


def encode_txn_record(transactional_id: str, value: TxnValue | None) -> tuple[bytes, bytes | None]:
    """(key, value) of one record; ``value=None`` gives a tombstone."""
    return encode_txn_key(transactional_id), None if value is None else encode_txn_value(value)


# --- decoding ------------------------------------------------------------------------

def _split(data: bytes | bytearray | memoryview, what: str) -> tuple[int, bytes]:
    data = bytes(data)
    if len(data) < 2:
        raise TxnRecordError(f"{what}: {len(data)} bytes, no schema version")
    return _VERSION.unpack_from(data)[0], data[2:]


def _decode(message: Message, version: int, body: bytes) -> Struct:
    if version not in message.versions:
        raise TxnRecordError(f"unknown {message.name} version {version}")
    try:
        return message.decode(body, version)
    except KafkaError as exc:
        raise TxnRecordError(f"{message.name} v{version}: {exc}") from None


def decode_txn_key(key: bytes | bytearray | memoryview) -> str:
    version, body = _split(key, "key")
    transactional_id: str = _decode(TransactionLogKey, version, body).transactional_id
    return transactional_id


def decode_txn_value(value: bytes | bytearray | memoryview) -> TxnValue:
    version, body = _split(value, "value")
    s = _decode(TransactionLogValue, version, body)
    if s.transaction_status not in STATUS_NAMES:
        raise TxnRecordError(f"unknown transaction status {s.transaction_status}")
    partitions: frozenset[tuple[str, int]] = frozenset()
    if s.transaction_status != EMPTY_STATUS and s.transaction_partitions is not None:
        partitions = frozenset((t.topic, p) for t in s.transaction_partitions for p in t.partition_ids)
    return TxnValue(producer_id=s.producer_id, producer_epoch=s.producer_epoch,
                    timeout_ms=s.transaction_timeout_ms, status=s.transaction_status,
                    partitions=partitions,
                    last_update_timestamp_ms=s.transaction_last_update_timestamp_ms,
                    start_timestamp_ms=s.transaction_start_timestamp_ms)


def decode_txn_record(key: bytes | bytearray | memoryview,
                      value: bytes | bytearray | memoryview | None) -> tuple[str, TxnValue | None]:
    """Decode one record; the value is None for a tombstone."""
    return decode_txn_key(key), None if value is None else decode_txn_value(value)
