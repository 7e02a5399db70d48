"""Transaction markers: the control batches that end a transaction on a partition.

Invariant: a marker is one RecordBatch v2 (magic 2, never compressed) with the
transactional (bit 4) and control (bit 5) attributes set, base sequence -1 and one
record whose key is {int16 version 0, int16 type: ABORT=0 / COMMIT=1} and whose
value is {int16 version 0, int32 coordinator_epoch}; the CRC32C covers attributes
to the end like every batch (``record_batch``). Parsing reads only that record.
"""
from __future__ import annotations

import struct


from . import record_batch as rb
from .errors import ErrorCode, KafkaError
from .records import _read_varint, encode_varint

ABORT, COMMIT = 0, 1
CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


def build_control_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                        timestamp_ms: int, base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """A complete end-transaction marker batch (one control record)."""
    key = _KEY.pack(CONTROL_KEY_VERSION, COMMIT if commit else ABORT)
    value = _VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch)
    body = (b"\x00" + encode_varint(0) + encode_varint(0)  # attributes, timestampDelta, offsetDelta
            + encode_varint(len(key)) + key + encode_varint(len(value)) + value + encode_varint(0))
    record = encode_varint(len(body)) + body
    header = rb.BatchHeader(
        base_offset=base_offset, batch_length=rb.HEADER_SIZE - rb.LOG_OVERHEAD + len(record),
        partition_leader_epoch=partition_leader_epoch, magic=rb.MAGIC, crc=0,
        attributes=rb.TRANSACTIONAL_MASK | rb.CONTROL_MASK, last_offset_delta=0,
        base_timestamp=timestamp_ms, max_timestamp=timestamp_ms, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=-1, records_count=1)
    return rb.seal(header, record)


def parse_control_record(batch_bytes: bytes | bytearray | memoryview, pos: int = 0) -> tuple[bool, int]:
    """(commit, coordinator_epoch) of the marker batch at ``pos``.

    Raises KafkaError(CORRUPT_MESSAGE) if it is not a well-formed end-transaction marker.
    """
    try:
        h = rb.parse_header(batch_bytes, pos)
        if not h.is_control or h.compression or h.records_count < 1:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "not an uncompressed control batch")
        p = pos + rb.HEADER_SIZE
        _, p = _read_varint(batch_bytes, p)        # record length
        p += 1                                     # attributes
        _, p = _read_varint(batch_bytes, p)        # timestamp delta
        _, p = _read_varint(batch_bytes, p)        # offset delta
        klen, p = _read_varint(batch_bytes, p)
        if klen < _KEY.size:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "control record key too short")
        _, ctype = _KEY.unpack_from(batch_bytes, p)
        p += klen
        vlen, p = _read_varint(batch_bytes, p)
        if ctype not in (ABORT, COMMIT):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"control record type {ctype} is not a marker")
        if vlen < _VALUE.size:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "end transaction marker value too short")
        _, coordinator_epoch = _VALUE.unpack_from(batch_bytes, p)
        return ctype == COMMIT, coordinator_epoch
    except (struct.error, IndexError):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "truncated control batch") from None
