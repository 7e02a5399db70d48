"""RecordBatch v2 at the record level: build batches, decode them back to records.

Invariant: the broker's produce and fetch paths never call it (they move batches whole); the
clients, the tools, and the broker's own writers and readers of records do (the group and
transaction coordinators' batches and loads, the cleaner, an old client's message set made a
batch, ListOffsets by timestamp, ``dump-log``). The batch header goes through ``record_batch``
(``seal``, validate, iter_headers); this module only owns the records section: DefaultRecord's
zig-zag varint layout, optionally compressed as a whole. Anything malformed raises
KafkaError(CORRUPT_MESSAGE), never IndexError or struct.error.

Record layout: length varint, attributes int8 (0), timestampDelta varlong,
offsetDelta varint, keyLength varint (-1 = null), key, valueLength varint
(-1 = null), value, headerCount varint, then per header keyLength varint, key
(utf-8), valueLength varint (-1 = null), value.
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator, NamedTuple, Sequence

from . import record_batch
from .compression import NONE, compress, decompress
from .errors import ErrorCode, KafkaError
from .record_batch import BatchHeader

CREATE_TIME = 0
LOG_APPEND_TIME = 1

Header = tuple[str, bytes | None]


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]
    timestamp_type: int = CREATE_TIME


# --- zig-zag varints -------------------------------------------------------

_TABLE_BITS = 15  # zig-zag values below 2**15: offset deltas up to 16383, lengths up to 16383


def _encode_unsigned(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


_VARINT = [_encode_unsigned(u) for u in range(1 << _TABLE_BITS)]
_TABLE_LIMIT = 1 << (_TABLE_BITS - 1)  # n in [-limit, limit) is in the table


def encode_varint(n: int) -> bytes:
    """Zig-zag varint (also varlong) encoding of ``n``."""
    if -_TABLE_LIMIT <= n < _TABLE_LIMIT:
        return _VARINT[(n << 1) if n >= 0 else ((-n) << 1) - 1]
    return _encode_unsigned((n << 1) if n >= 0 else ((-n) << 1) - 1)


def _read_varint(data: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """(value, next position) of the zig-zag varint at ``pos`` (any length)."""
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "varint longer than 10 bytes")


# zig-zag decoding of single-byte varints
_ZZ1 = [(b >> 1) ^ -(b & 1) for b in range(128)]

_NULL = b"\x01"  # varint(-1)
_ZERO = b"\x00"  # varint(0): attributes byte, and "no headers"


# --- building --------------------------------------------------------------

def _encode_headers(headers: Iterable[Header]) -> bytes:
    parts = []
    count = 0
    for hkey, hvalue in headers:
        kb = hkey.encode() if isinstance(hkey, str) else bytes(hkey)
        parts.append(encode_varint(len(kb)))
        parts.append(kb)
        if hvalue is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(hvalue)))
            parts.append(hvalue)
        count += 1
    return encode_varint(count) + b"".join(parts)


class BatchBuilder:
    """Accumulates records and builds one RecordBatch v2 (magic 2)."""

    __slots__ = ("compression", "base_offset", "producer_id", "producer_epoch", "base_sequence",
                 "is_transactional", "partition_leader_epoch", "records", "_count", "_base_ts", "_max_ts")

    def __init__(self, compression: int = NONE, base_offset: int = 0, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1, is_transactional: bool = False,
                 partition_leader_epoch: int = -1) -> None:
        if not 0 <= compression <= 4:
            raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"codec id {compression}")
        self.compression = compression
        self.base_offset = base_offset
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.partition_leader_epoch = partition_leader_epoch
        self.records = bytearray()   # the records section written so far (uncompressed)
        self._count = 0
        self._base_ts = -1
        self._max_ts = -1

    @property
    def record_count(self) -> int:
        return self._count

    def estimated_size(self) -> int:
        """Bytes of the batch if built uncompressed (an upper bound for compressed ones)."""
        return record_batch.HEADER_SIZE + len(self.records)

    def append(self, timestamp_ms: int, key: bytes | None, value: bytes | None,
               headers: Sequence[Header] = ()) -> int:
        """Add one record; returns its offset delta within the batch."""
        delta = self._count
        if delta:
            ts_delta = timestamp_ms - self._base_ts
            if timestamp_ms > self._max_ts:
                self._max_ts = timestamp_ms
        else:
            self._base_ts = self._max_ts = timestamp_ms
            ts_delta = 0
        hd = _encode_headers(headers) if headers else _ZERO
        if _append_record is not None:
            try:
                _append_record(self.records, delta, ts_delta, key, value, hd)   # the same bytes, in C
                self._count = delta + 1
                return delta
            except OverflowError:
                pass   # a timestamp delta past 64 bits: written below, as Python's ints allow
        varint = _VARINT
        limit = _TABLE_LIMIT
        # offsetDelta (>= 0) and timestampDelta
        od = varint[delta << 1] if delta < limit else encode_varint(delta)
        td = varint[ts_delta << 1] if 0 <= ts_delta < limit else encode_varint(ts_delta)
        if key is None:
            kl = _NULL
            klen = 0
        else:
            klen = len(key)
            kl = varint[klen << 1] if klen < limit else encode_varint(klen)
        if value is None:
            vl = _NULL
            vlen = 0
        else:
            vlen = len(value)
            vl = varint[vlen << 1] if vlen < limit else encode_varint(vlen)
        size = 1 + len(td) + len(od) + len(kl) + klen + len(vl) + vlen + len(hd)
        buf = self.records
        buf += varint[size << 1] if size < limit else encode_varint(size)
        buf += _ZERO
        buf += td
        buf += od
        buf += kl
        if key is not None:
            buf += key
        buf += vl
        if value is not None:
            buf += value
        buf += hd
        self._count = delta + 1
        return delta

    def build(self) -> bytes:
        """The complete batch: 61-byte header, CRC32C, (compressed) records section."""
        if not self._count:
            raise ValueError("cannot build an empty batch")
        records: bytes | bytearray = self.records
        if self.compression != NONE:
            records = compress(self.compression, records)
        attributes = self.compression | (record_batch.TRANSACTIONAL_MASK if self.is_transactional else 0)
        count = self._count
        return record_batch.seal((self.base_offset, _LENGTH_BEYOND_RECORDS + len(records),
                                  self.partition_leader_epoch, record_batch.MAGIC, 0, attributes, count - 1,
                                  self._base_ts, self._max_ts, self.producer_id, self.producer_epoch,
                                  self.base_sequence, count), records)


_LENGTH_BEYOND_RECORDS = record_batch.HEADER_SIZE - record_batch.LOG_OVERHEAD   # a batch's length field, less its records


def batch_of(timestamp_ms: int, records: Iterable[tuple[bytes | None, bytes | None]], compression: int = NONE) -> bytes:
    """The batch of ``records`` (key, value) without headers, all stamped ``timestamp_ms``: the
    bytes ``BatchBuilder`` builds for them, in one call (the coordinators' writes, one per commit,
    make no builder when they are not compressed)."""
    if compression != NONE or _append_record is None:
        builder = BatchBuilder(compression)
        for key, value in records:
            builder.append(timestamp_ms, key, value)
        return builder.build()
    section = bytearray()
    count = 0
    for key, value in records:
        _append_record(section, count, 0, key, value, _ZERO)   # (a delta of 0: never past 64 bits)
        count += 1
    if not count:
        raise ValueError("cannot build an empty batch")
    return record_batch.seal((0, _LENGTH_BEYOND_RECORDS + len(section), -1, record_batch.MAGIC, 0, NONE, count - 1,
                              timestamp_ms, timestamp_ms, -1, -1, -1, count), section)


# --- decoding --------------------------------------------------------------

def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, message)


def _decode_py(data: bytes, pos: int, end: int, count: int, base_offset: int,
               base_ts: int, log_append_ts: int | None) -> list[Record]:
    """``count`` records from ``data[pos:end]``; must consume it exactly."""
    out: list[Record] = []
    append = out.append
    new = tuple.__new__
    zz1 = _ZZ1
    read = _read_varint
    ts_type = CREATE_TIME if log_append_ts is None else LOG_APPEND_TIME
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = zz1[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = read(data, pos)
            rec_end = pos + length
            if length < 6 or rec_end > end:
                raise _corrupt("record length out of range")
            pos += 1  # attributes
            b = data[pos]
            if b < 0x80:
                ts_delta = zz1[b]
                pos += 1
            else:
                ts_delta, pos = read(data, pos)
            b = data[pos]
            if b < 0x80:
                offset_delta = zz1[b]
                pos += 1
            else:
                offset_delta, pos = read(data, pos)
            b = data[pos]
            if b < 0x80:
                klen = zz1[b]
                pos += 1
            else:
                klen, pos = read(data, pos)
            if klen < 0:
                key = None
            else:
                key = data[pos:pos + klen]
                pos += klen
            b = data[pos]
            if b < 0x80:
                vlen = zz1[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                vlen = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                vlen, pos = read(data, pos)
            if vlen < 0:
                value = None
            else:
                value = data[pos:pos + vlen]
                pos += vlen
            b = data[pos]
            headers: list[tuple[str, bytes | None]]
            if b == 0:
                headers = []
                pos += 1
            else:
                nheaders, pos = read(data, pos)
                if nheaders < 0:
                    raise _corrupt("negative header count")
                headers = []
                for _h in range(nheaders):
                    hklen, pos = read(data, pos)
                    if hklen < 0:
                        raise _corrupt("null header key")
                    hkey = data[pos:pos + hklen].decode()
                    pos += hklen
                    hvlen, pos = read(data, pos)
                    if hvlen < 0:
                        hvalue = None
                    else:
                        hvalue = data[pos:pos + hvlen]
                        pos += hvlen
                    headers.append((hkey, hvalue))
            if pos != rec_end:
                raise _corrupt("record fields do not match its length")
            append(new(Record, (base_offset + offset_delta,
                                base_ts + ts_delta if log_append_ts is None else log_append_ts,
                                key, value, headers, ts_type)))
    except IndexError:
        raise _corrupt("record runs past the end of the batch") from None
    except UnicodeDecodeError:
        raise _corrupt("header key is not utf-8") from None
    if pos != end:
        raise _corrupt("bytes left after the last record")
    return out


_decode_c: Callable[..., list[Record] | None] | None
_append_record: Callable[[bytearray, int, int, bytes | None, bytes | None, bytes], None] | None
try:
    from ._records import append_record as _append_record, decode as _decode_c
except ImportError:  # installed without a C compiler: Python alone
    _decode_c = _append_record = None


def _decode_records(data: bytes, pos: int, end: int, count: int, base_offset: int,
                    base_ts: int, log_append_ts: int | None) -> list[Record]:
    """``_decode_py``'s answer: from the C decoder when it has one (for every well-formed section
    of 64-bit values), else from ``_decode_py`` itself, which gives every error."""
    if _decode_c is not None:
        records = _decode_c(data, pos, end, count, base_offset, base_ts, log_append_ts, Record)
        if records is not None:
            return records
    return _decode_py(data, pos, end, count, base_offset, base_ts, log_append_ts)


def decode_batch(buf: bytes | bytearray | memoryview, pos: int = 0,
                 check_crc: bool = True) -> tuple[BatchHeader, list[Record]]:
    """Validate (CRC32C included, unless ``check_crc`` is false) and decode the batch at ``pos``.

    Records carry absolute offsets and timestamps; in a LogAppendTime batch every
    record's timestamp is the batch's max timestamp.
    """
    header = record_batch.validate(buf, pos, check_crc=check_crc)
    start = pos + record_batch.HEADER_SIZE
    stop = pos + header.size
    if header.compression != NONE:
        data = decompress(header.compression, memoryview(buf)[start:stop])
        start, stop = 0, len(data)
    elif isinstance(buf, bytes):
        data = buf
    else:
        data = bytes(buf[start:stop])
        start, stop = 0, len(data)
    log_append_ts = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
    records = _decode_records(data, start, stop, header.records_count, header.base_offset,
                              header.base_timestamp, log_append_ts)
    return header, records


def iter_batches(records_blob: bytes | bytearray | memoryview) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Decoded (header, records) of every complete batch, control batches included."""
    for pos, _header in record_batch.iter_headers(records_blob):
        yield decode_batch(records_blob, pos)



def iter_records(records_blob: bytes | bytearray | memoryview | None) -> Iterator[Record]:
    """Every data record of a Fetch ``records`` field, in order.

    Skips control batches (transaction markers) and ignores a partial trailing
    batch; a CRC mismatch or malformed batch raises KafkaError(CORRUPT_MESSAGE).
    """
    if not records_blob:
        return
    for header, records in iter_batches(records_blob):
        if not header.is_control:
            yield from records
