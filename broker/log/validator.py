"""What a RecordBatch v2 must be before any log takes it (Kafka's LogValidator, in one place).

Invariant: every path that puts bytes into a log — the leader append
(``validate_leader``), the follower append (``validate_replicated``) and crash
recovery (``check_stored_batch``) — goes through this module and raises a KafkaError
before a byte is written; a batch it passes has a valid header and CRC32C, a size
within the limits, a known codec, and a records section (decompressed for gzip, snappy,
lz4, zstd) that holds exactly ``records count`` well-formed records: every varint valid,
each record's fields filling its length, the records ending exactly at the batch's end,
offset deltas 0..n-1 (strictly increasing up to lastOffsetDelta for replicated and stored
batches, which compaction leaves with gaps).

The record walk is ``scan_records``: the C scanner ``protocol/_records.c:scan`` (a few ns per record)
when the install could compile it, else ``_scan_py``, the same check in Python (about
1.5 µs per record). Both accept exactly the same batches (tests/unit/test_batch_validation.py).
With the C module, a producer's common batch (uncompressed, CreateTime, on a topic whose records
need no look of their own) is checked whole by ``_records.c:check_client_batch`` and its CRC here,
and so is a coordinator's (commits, group and transaction state: no per-record checks apply to
them); anything it declines is checked step by step below, which answers it
(tests/unit/test_batch_validation.py holds the two to the same verdicts).

Where odradek differs from Kafka 2.8: offset deltas of uncompressed batches are checked too
(Kafka checks them only in compressed batches), and a compressed batch may not decompress to
more than ``DECOMPRESSION_RATIO_LIMIT`` × ``max.message.bytes`` (MESSAGE_TOO_LARGE), because
odradek decompresses a batch whole where Kafka streams it.

Old clients' message sets (magic 0/1, Produce v0-2) become one magic-2 batch first
(``up_convert``, Kafka's convertAndAssignOffsetsNonCompressed and
validateMessagesAndAssignOffsetsCompressed): every message's CRC32, size and key/value checked
(``protocol/legacy_records``), a compressed wrapper decompressed (within the same bound) and its
inner messages checked, then built with the topic's ``compression.type`` ("producer": the
wrapper's codec) and validated like any client batch; magic-2 batches never take this path.

Errors are Kafka's: CORRUPT_MESSAGE (CRC, sizes, undecodable compressed data, a magic past 2),
INVALID_RECORD (counts, record structure, producer fields, control batches from a
client, more than one batch, mixed magics in a message set), UNSUPPORTED_COMPRESSION_TYPE
(codec 5-7), MESSAGE_TOO_LARGE (batch past ``max.message.bytes``), RECORD_LIST_TOO_LARGE
(past ``segment.bytes``), and per-record errors (``RecordValidationError``: keys on a
compacted topic -> INVALID_RECORD, timestamps -> INVALID_TIMESTAMP) that Produce v8 reports
in ``record_errors``.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from odradek.protocol import legacy_records as legacy
from odradek.protocol import record_batch as rb
from odradek.protocol.compression import CODEC_NAMES, NONE, codec_id, decompress
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import BatchBuilder

from ..config.kafka_config import LONG_MAX, LogConfig

MIN_RECORD_BODY = 6     # attributes, timestampDelta, offsetDelta, keyLength, valueLength, headerCount
DECOMPRESSION_RATIO_LIMIT = 64  # a batch decompresses to at most 64 × max.message.bytes
MAGIC_OFFSET = 16

Positioned = list[tuple[int, rb.BatchHeader]]


class RecordValidationError(KafkaError):
    """Records refused one by one (Kafka's RecordValidationException): ``record_errors`` holds
    (batch index, message) for Produce v8's ``record_errors``; ``message`` is its ``error_message``."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors


class LeaderChecks(NamedTuple):
    """What the leader checks beyond a batch's structure (``LeaderChecks.of`` a log's config)."""
    max_message_bytes: int
    segment_bytes: int
    compacted: bool
    timestamp_diff_max_ms: int   # LONG_MAX: no bound
    log_append_time: bool        # message.timestamp.type=LogAppendTime
    plain: bool                  # no record needs a look of its own: not compacted, timestamps unbounded

    @classmethod
    def of(cls, config: LogConfig) -> "LeaderChecks":
        compacted, diff = config.compact, config["message.timestamp.difference.max.ms"]
        log_append_time = config.log_append_time
        return cls(config["max.message.bytes"], config["segment.bytes"], compacted, diff, log_append_time,
                   not compacted and (diff == LONG_MAX or log_append_time))


_TRANSACTIONAL_OR_CONTROL = rb.TRANSACTIONAL_MASK | rb.CONTROL_MASK


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD, message)


# ------------------------------------------------------------------ entry points

def validate_leader(buf: bytes | bytearray | memoryview, checks: LeaderChecks, now_ms: int, from_client: bool,
                    partition: str) -> Positioned:
    """Every batch of a produce (``from_client``) or coordinator append; raises before any write."""
    if not buf:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "empty records")
    if from_client and len(buf) > MAGIC_OFFSET and buf[MAGIC_OFFSET] > rb.MAGIC:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Invalid magic found in record: {buf[MAGIC_OFFSET]}")
    if _check_client_batch is not None and (checks.plain or not from_client):
        # the common batch, checked in one call (a coordinator's records need no look of their own)
        fields = _check_client_batch(buf, checks.max_message_bytes)
        if fields is not None and rb.compute_crc(buf, 0, len(buf)) == fields[4] and len(buf) <= checks.segment_bytes:
            return [(0, rb.header_of(fields))]
    if from_client:   # one batch filling the records is the rule; anything else is checked batch by batch
        h = _header(buf, 0, checks.max_message_bytes)
        batches = [(0, h)] if rb.LOG_OVERHEAD + h.batch_length == len(buf) else _headers(buf, checks.max_message_bytes)
        if len(batches) != 1:
            raise _invalid("a produce request carries exactly one batch per partition")
    else:
        batches = _headers(buf, checks.max_message_bytes)
    decompressed_limit = DECOMPRESSION_RATIO_LIMIT * checks.max_message_bytes
    for pos, h in batches:
        if from_client:
            if (h.producer_id >= 0 or h.attributes & _TRANSACTIONAL_OR_CONTROL or h.base_offset != 0
                    or h.records_count <= 0 or h.records_count != h.last_offset_delta + 1):
                _check_client_header(h, partition)   # the common batch passes without the call
        else:
            _check_producer_fields(h, False, partition)
            if h.records_count != h.last_offset_delta + 1:
                raise _invalid(f"records count {h.records_count} does not match lastOffsetDelta "
                               f"{h.last_offset_delta} in {partition}")
        bound_ts = (checks.timestamp_diff_max_ms != LONG_MAX and not checks.log_append_time
                    and not h.is_control)
        collect = from_client and (checks.compacted or bound_ts or h.timestamp_type == 1)
        found = scan_records(buf, pos, h, decompressed_limit, True, collect, partition)
        if found is not None:
            _per_record_errors(h, found[0], found[1], checks, now_ms, bound_ts, partition)
    if len(buf) > checks.segment_bytes:
        raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                         f"{len(buf)} bytes of records exceed segment.bytes {checks.segment_bytes}")
    return batches


def up_convert(buf: bytes | bytearray | memoryview, checks: LeaderChecks, compression_type: str, partition: str) -> bytearray:
    """A client's magic 0/1 message set as the one magic-2 batch (offsets from 0) that
    ``validate_leader`` then checks like any other; raises before anything is written."""
    messages: list[legacy.LegacyMessage] = []
    pos = 0
    while pos < len(buf):
        m, end = legacy.read_message(buf, pos)
        if end - pos > checks.max_message_bytes:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"The record batch size in the append to {partition} is {end - pos} bytes which "
                             f"exceeds the maximum configured value of {checks.max_message_bytes}.")
        if messages and m.magic != messages[0].magic:
            raise _invalid(f"Batch magic {m.magic} is not the same as the first batch's magic byte "
                           f"{messages[0].magic} in topic partition {partition}.")
        messages.append(m)
        pos = end
    source = max(m.compression for m in messages)
    if source != NONE:
        if len(messages) > 1:
            raise _invalid("Compressed outer record has more than one batch")
        messages = legacy.inner_messages(messages[0], DECOMPRESSION_RATIO_LIMIT * checks.max_message_bytes)
        for i, m in enumerate(messages):
            if m.magic > 0 and m.offset != i:
                raise _invalid(f"Inner record offset {m.offset} inside the compressed record batch does not have "
                               f"incremental offsets, expected offset is {i} in topic partition {partition}.")
    if any(m.log_append_time for m in messages):
        raise RecordValidationError(
            ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp",
            [(i, "Invalid timestamp type in message: a producer may not set LogAppendTime.")
             for i, m in enumerate(messages) if m.log_append_time])
    named = compression_type.lower()
    target = source if named == "producer" else codec_id("none" if named == "uncompressed" else named)
    builder = BatchBuilder(compression=target)
    for m in messages:
        builder.append(m.timestamp, m.key, m.value)
    return bytearray(builder.build())


def validate_replicated(buf: bytes | bytearray | memoryview, partition: str) -> Positioned:
    """Every batch a follower fetched, checked as it will be stored (offsets as the leader set them;
    decompression unbounded: the leader bounded it when the batch was produced)."""
    if not buf:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "empty records")
    batches = _headers(buf, None)
    for pos, h in batches:
        _check_stored_records(buf, pos, h, partition)
    return batches


def check_stored_batch(view: bytes | bytearray | memoryview, partition: str) -> rb.BatchHeader:
    """The one batch filling ``view`` (log recovery); raises KafkaError if it cannot be trusted."""
    h = _header(view, 0, None)
    if h.size != len(view):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "batch length does not match its bytes")
    _check_stored_records(view, 0, h, partition)
    return h


# ------------------------------------------------------------------ batch level

def _header(buf: bytes | bytearray | memoryview, pos: int, max_size: int | None) -> rb.BatchHeader:
    h = rb.validate(buf, pos, max_size)
    if h.compression not in CODEC_NAMES:   # attributes & 7 in 5..7 name no codec
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec id {h.compression}")
    return h


def _headers(buf: bytes | bytearray | memoryview, max_size: int | None) -> Positioned:
    batches = []
    pos, n = 0, len(buf)
    while pos < n:
        h = _header(buf, pos, max_size)
        batches.append((pos, h))
        pos += h.size
    return batches


def _check_client_header(h: rb.BatchHeader, partition: str) -> None:
    """Kafka's checks of a client's batch header (LogValidator.validateBatch)."""
    _check_producer_fields(h, True, partition)
    if h.base_offset != 0:
        raise _invalid(f"The baseOffset of the record batch in the append to {partition} should be 0, "
                       f"but it is {h.base_offset}")
    if h.records_count <= 0 or h.records_count != h.last_offset_delta + 1:
        raise _invalid(f"Inconsistent batch offset range [0, {h.last_offset_delta}] and count of records "
                       f"{h.records_count} in topic partition {partition}")
    if h.is_control:
        raise _invalid(f"Clients are not allowed to write control records in topic partition {partition}")


def _check_producer_fields(h: rb.BatchHeader, from_client: bool, partition: str) -> None:
    if h.producer_id >= 0:
        if h.producer_epoch < 0:
            raise _invalid(f"producer {h.producer_id} with epoch {h.producer_epoch} in {partition}")
        if from_client and h.base_sequence < 0:
            raise _invalid(f"Invalid sequence number {h.base_sequence} in record batch with producerId "
                           f"{h.producer_id} in topic partition {partition}")
    elif h.is_transactional or h.is_control:
        raise _invalid(f"transactional or control batch without a producer id in {partition}")


def _check_stored_records(buf: bytes | bytearray | memoryview, pos: int, h: rb.BatchHeader,
                          partition: str) -> None:
    if h.records_count > h.last_offset_delta + 1:
        raise _invalid(f"records count {h.records_count} exceeds the offsets of lastOffsetDelta "
                       f"{h.last_offset_delta} in {partition}")
    scan_records(buf, pos, h, None, False, False, partition)


def _per_record_errors(h: rb.BatchHeader, null_keys: list[int], timestamps: list[int],
                       checks: LeaderChecks, now_ms: int, bound_ts: bool, partition: str) -> None:
    """Kafka's per-record answers: keys first, then timestamps; any timestamp error makes the
    partition's error INVALID_TIMESTAMP."""
    errors: dict[int, str] = {}
    timestamp_error = False
    if checks.compacted:
        for i in null_keys:
            errors[i] = f"Compacted topic cannot accept message without key in topic partition {partition}."
    diff = checks.timestamp_diff_max_ms
    for i, ts in enumerate(timestamps):
        if i in errors:
            continue
        if bound_ts and ts != -1 and abs(ts - now_ms) > diff:
            errors[i] = (f"Timestamp {ts} of message with offset {i} is out of range. The timestamp should be "
                         f"within [{now_ms - diff}, {now_ms + diff}]")
            timestamp_error = True
        elif h.timestamp_type == 1:
            errors[i] = "Invalid timestamp type in message: a producer may not set LogAppendTime."
            timestamp_error = True
    if errors:
        listed = sorted(errors.items())
        if timestamp_error:
            raise RecordValidationError(ErrorCode.INVALID_TIMESTAMP,
                                        "One or more records have been rejected due to invalid timestamp", listed)
        raise RecordValidationError(ErrorCode.INVALID_RECORD, "One or more records have been rejected", listed)


# ------------------------------------------------------------------ record level

def scan_records(buf: bytes | bytearray | memoryview, pos: int, h: rb.BatchHeader, decompressed_limit: int | None,
                 strict: bool, collect: bool, partition: str) -> tuple[list[int], list[int]] | None:
    """Check the records section of the batch at ``pos`` (decompressed first, never past
    ``decompressed_limit`` bytes); with ``collect``, (indexes of records without a key, every
    record's timestamp)."""
    data, start, end = buf, pos + rb.HEADER_SIZE, pos + h.size
    if h.compression != NONE:
        data = decompress(h.compression, memoryview(buf)[start:end], max_size=decompressed_limit)
        start, end = 0, len(data)
    try:
        return _scan(data, start, end, h.records_count, h.last_offset_delta, strict, h.base_timestamp, collect)
    except ValueError as e:
        raise _invalid(f"{e} in {partition}") from None


_INT64 = 1 << 63
_UINT64_MASK = (1 << 64) - 1


class _Malformed(ValueError):
    pass


def _varint(data: bytes | bytearray | memoryview, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """(zig-zag value, next position) of the varint at ``pos``: at most ``max_bytes`` bytes, before ``end``."""
    result = shift = 0
    for pos in range(pos, min(pos + max_bytes, end)):
        b = data[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            result &= _UINT64_MASK  # a 10th byte's bits past 64 fall off, as in a Java long
            return (result >> 1) ^ -(result & 1), pos + 1
        shift += 7
    raise _Malformed("a varint is too long or cut off")


def _scan_py(data: bytes | bytearray | memoryview, pos: int, end: int, count: int, last_delta: int, strict: bool,
             base_ts: int, collect: bool) -> tuple[list[int], list[int]] | None:
    """What ``protocol/_records.c:scan`` does (see its header comment), in Python: ValueError if malformed."""
    null_keys: list[int] = []
    timestamps: list[int] = []
    previous = -1
    for i in range(count):
        if pos >= end:
            raise _Malformed(f"incorrect declared batch size, premature EOF reached at record {i}")
        try:
            length, body = _varint(data, pos, end, 5)
            if length < MIN_RECORD_BODY or length > end - body:
                raise _Malformed
        except _Malformed:
            raise _Malformed(f"invalid record size at record {i}") from None
        rec_end = body + length
        try:
            ts_delta, p = _varint(data, body + 1, rec_end, 10)
            delta, p = _varint(data, p, rec_end, 5)
        except _Malformed:
            raise _Malformed(f"record {i}'s fields do not fill its size") from None
        if (delta != i) if strict else (delta <= previous or delta > last_delta):
            raise _Malformed(f"record {i} has an offset delta out of order")
        previous = delta
        fields = _record_fields(data, p, rec_end, i)
        if collect:
            if fields < 0:
                null_keys.append(i)
            timestamps.append((base_ts + ts_delta + _INT64) % (2 * _INT64) - _INT64)  # as a Java long sums them
        pos = rec_end
    if pos != end:
        raise _Malformed(f"incorrect declared batch size, records still remaining after record {count}")
    return (null_keys, timestamps) if collect else None


def _record_fields(data: bytes | bytearray | memoryview, p: int, rec_end: int, i: int) -> int:
    """Key, value and headers of record ``i`` from ``p``, filling it to ``rec_end``; its key length."""
    klen, p = _length(data, p, rec_end, -1, True, "invalid key length", i)
    vlen, p = _length(data, p + max(klen, 0), rec_end, -1, True, "invalid value length", i)
    headers, p = _length(data, p + max(vlen, 0), rec_end, 0, False, "invalid number of record headers", i)
    for _ in range(headers):
        hk, p = _length(data, p, rec_end, 0, True, "invalid header key size", i)
        hv, p = _length(data, p + hk, rec_end, -1, True, "invalid header value length", i)
        p += max(hv, 0)
    if p != rec_end:
        raise _Malformed(f"record {i}'s fields do not fill its size")
    return klen


def _length(data: bytes | bytearray | memoryview, p: int, rec_end: int, lowest: int, bounded: bool,
            problem: str, i: int) -> tuple[int, int]:
    """(value, next position) of the length or count varint at ``p``: at least ``lowest`` and, if
    ``bounded``, no more than what is left of the record; else _Malformed naming the problem."""
    try:
        n, p = _varint(data, p, rec_end, 5)
    except _Malformed:
        raise _Malformed(f"{problem} at record {i}") from None
    if n < lowest or (bounded and n > rec_end - p):
        raise _Malformed(f"{problem} at record {i}")
    return n, p


_check_client_batch: Callable[[bytes | bytearray | memoryview, int], tuple[int, ...] | None] | None
try:
    from odradek.protocol._records import check_client_batch as _check_client_batch, scan as _scan
except ImportError:  # installed without a C compiler: the same check, in Python
    _scan = _scan_py
    _check_client_batch = None
