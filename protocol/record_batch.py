"""RecordBatch v2 (magic 2) at the batch level: header, CRC32C, offset rewrite.

Invariant: nothing here looks inside the records section. The broker's fetch path
uses only these functions; what the records section must hold before a log takes
a batch is checked in one place, the broker's ``broker/log/validator.py``.

Layout (61-byte header): baseOffset i64 @0, batchLength i32 @8 (bytes after this
field), partitionLeaderEpoch i32 @12, magic i8 @16, crc u32 @17 (CRC32C over
@21..end), attributes i16 @21, lastOffsetDelta i32 @23, baseTimestamp i64 @27,
maxTimestamp i64 @35, producerId i64 @43, producerEpoch i16 @51,
baseSequence i32 @53, recordsCount i32 @57.
"""
from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

from crc32c import crc32c

from .errors import ErrorCode, KafkaError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: what precedes the length-counted part
MAGIC = 2
CRC_START = 21

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

_HEADER = struct.Struct(">qiibIhiqqqhii")
_UP_TO_CRC = struct.Struct(">qiibI")          # baseOffset .. crc
_CRC_COVERED = struct.Struct(">hiqqqhii")     # attributes .. recordsCount, then the records
_new_tuple = tuple.__new__
_OFFSET_LENGTH = struct.Struct(">qi")
_BASE_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
_MAX_TIMESTAMP = struct.Struct(">q")
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes this batch takes in a log or a records field."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch starting at ``pos``; ``buf`` must hold 61 bytes from there."""
    return _new_tuple(BatchHeader, _HEADER.unpack_from(buf, pos))   # skips the NamedTuple's __new__


def header_of(fields: tuple[int, ...]) -> BatchHeader:
    """The header of the 13 fields in order (``_records.c:check_client_batch``'s answer)."""
    return _new_tuple(BatchHeader, fields)


def peek_offset_and_length(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(baseOffset, batchLength) of the batch at ``pos`` (needs 12 bytes)."""
    return _OFFSET_LENGTH.unpack_from(buf, pos)


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC32C of the batch at ``pos`` of total ``size`` bytes, as stored in its header."""
    return crc32c(memoryview(buf)[pos + CRC_START:pos + size])


def validate(buf: bytes | bytearray | memoryview, pos: int = 0, max_size: int | None = None,
             check_crc: bool = True) -> BatchHeader:
    """Check one batch at ``pos`` as a broker does before appending it.

    Raises KafkaError(CORRUPT_MESSAGE) for a truncated, mis-sized or (with ``check_crc``)
    CRC-failing batch, INVALID_RECORD for a negative record count or lastOffsetDelta,
    UNSUPPORTED_FOR_MESSAGE_FORMAT for a magic other than 2, and MESSAGE_TOO_LARGE if
    the batch exceeds ``max_size``.
    """
    end = len(buf)
    if end - pos < HEADER_SIZE:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "batch shorter than its header")
    header = parse_header(buf, pos)
    if header.magic != MAGIC:
        raise KafkaError(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, f"magic {header.magic}")
    size = LOG_OVERHEAD + header.batch_length   # header.size, read once
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + size > end:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "batch length out of range")
    if max_size is not None and size > max_size:
        raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE, f"batch of {size} bytes")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, "negative record count or offset delta")
    if check_crc and compute_crc(buf, pos, size) != header.crc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "CRC32C mismatch")
    return header


def iter_headers(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each complete batch in ``buf[pos:end]``; stops at a partial tail."""
    end = len(buf) if end is None else end
    while end - pos >= HEADER_SIZE:
        header = parse_header(buf, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def set_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    """Rewrite baseOffset in place (outside the CRC, so the CRC stays valid)."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def stamp_offset_and_epoch(buf: bytearray | memoryview, pos: int, base_offset: int, epoch: int) -> None:
    """Rewrite baseOffset and stamp partitionLeaderEpoch in place (both outside the CRC): the
    leader's append."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)
    _EPOCH.pack_into(buf, pos + 12, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, timestamp: int) -> None:
    """Turn the batch into a LogAppendTime batch with ``timestamp`` and fix its CRC."""
    (attributes,) = _ATTRIBUTES.unpack_from(buf, pos + 21)
    _ATTRIBUTES.pack_into(buf, pos + 21, attributes | TIMESTAMP_TYPE_MASK)
    _MAX_TIMESTAMP.pack_into(buf, pos + 35, timestamp)
    _CRC.pack_into(buf, pos + 17, compute_crc(buf, pos, size))


def pack_header(header: BatchHeader) -> bytes:
    """The 61 header bytes for ``header`` (crc taken as given)."""
    return _HEADER.pack(*header)


def seal(header: BatchHeader | tuple[int, ...], records: bytes | bytearray) -> bytes:
    """The whole batch: ``header`` with its CRC32C computed (its own crc field is ignored), then
    ``records``, its records section as stored; the header is packed once."""
    covered = _CRC_COVERED.pack(*header[5:])
    return _UP_TO_CRC.pack(*header[:4], crc32c(records, crc32c(covered))) + covered + records
