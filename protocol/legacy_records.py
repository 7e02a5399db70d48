"""Message sets of magic 0 and 1 (Kafka's LegacyRecord): read, build, and convert from RecordBatch v2.

Invariant: sans-IO and exact. ``read_set`` accepts only a message set every byte of which is a
whole message with a valid CRC32 (zlib) and key and value filling its size, and raises
KafkaError with Kafka's code otherwise (CORRUPT_MESSAGE for sizes, CRCs and undecodable
compressed data; INVALID_RECORD for the structure LogValidator checks inside a compressed
wrapper; UNSUPPORTED_COMPRESSION_TYPE for a codec magic 0/1 cannot carry). ``down_convert``
writes what Kafka 2.8's RecordsUtil.downConvert writes: offsets kept (magic 1 compressed
wrappers carry inner offsets relative to their first record and the last offset as their own;
magic 0 absolute), each compressed batch re-compressed with its codec, headers dropped,
control batches skipped, timestamps dropped for magic 0. The broker uses this module only
for old Produce and Fetch versions: the magic-2 path never calls it.

Layout of one message: offset i64, size i32 (bytes after it), crc u32 (CRC32 of magic..end),
magic i8, attributes i8 (codec in bits 0-2, LogAppendTime in bit 3 for magic 1), timestamp i64
(magic 1 only), key (i32 length, -1 null), value (i32 length, -1 null). A compressed message's
value is a whole message set, compressed; LZ4 for magic 0 has the header checksum of KAFKA-3160
(computed over the frame's magic number too), which Kafka ignores on input and writes on output.
"""
from __future__ import annotations

import struct
import zlib
from typing import Iterable, NamedTuple

from . import record_batch
from .compression import GZIP, LZ4, NONE, SNAPPY, compress, decompress
from .errors import ErrorCode, KafkaError
from .records import LOG_APPEND_TIME, Record, decode_batch

LOG_OVERHEAD = 12                  # offset + size
MAGIC_AT = 16                      # the magic byte, from the start of a message
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
NO_TIMESTAMP = -1
LEGACY_CODECS = (NONE, GZIP, SNAPPY, LZ4)
_HEAD = {0: struct.Struct(">qiIbb"), 1: struct.Struct(">qiIbbq")}   # offset .. attributes (.. timestamp)
_OVERHEAD = {0: 14, 1: 22}         # crc + magic + attributes (+ timestamp) + key and value lengths
_INT32 = struct.Struct(">i")


class LegacyMessage(NamedTuple):
    offset: int
    magic: int
    attributes: int
    timestamp: int                 # NO_TIMESTAMP for magic 0
    key: bytes | None
    value: bytes | None

    @property
    def compression(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def log_append_time(self) -> bool:
        return self.magic > 0 and bool(self.attributes & TIMESTAMP_TYPE_MASK)


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, message)


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD, message)


# ------------------------------------------------------------------ reading

def _bytes_field(buf: bytes | bytearray | memoryview, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    (n,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < 0 or n > end - pos:
        raise _corrupt(f"invalid {what} length {n}")
    return bytes(buf[pos:pos + n]), pos + n


def read_message(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[LegacyMessage, int]:
    """The magic 0/1 message at ``pos`` and the position after it; CORRUPT_MESSAGE unless it is
    whole, its CRC32 holds and its key and value fill its size exactly."""
    end = len(buf)
    if end - pos < LOG_OVERHEAD + 5:
        raise _corrupt("message set ends inside a message header")
    offset, size = struct.unpack_from(">qi", buf, pos)
    magic = buf[pos + MAGIC_AT]
    if magic == record_batch.MAGIC:
        raise _invalid(f"a magic-2 batch is not the same as the first batch's magic byte {buf[MAGIC_AT]}")
    if magic not in _HEAD:
        raise _corrupt(f"Invalid magic found in record: {magic}")
    if size < _OVERHEAD[magic]:
        raise _corrupt(f"message size {size} is less than the minimum message overhead {_OVERHEAD[magic]}")
    stop = pos + LOG_OVERHEAD + size
    if stop > end:
        raise _corrupt(f"message of {size} bytes at position {pos} runs past the end of the message set")
    head = _HEAD[magic].unpack_from(buf, pos)
    crc, attributes = head[2], head[4]
    timestamp = head[5] if magic else NO_TIMESTAMP
    if zlib.crc32(memoryview(buf)[pos + MAGIC_AT:stop]) != crc:
        raise _corrupt(f"Record is corrupt (stored crc = {crc})")
    key, p = _bytes_field(buf, pos + _HEAD[magic].size, stop - 4, "key")
    value, p = _bytes_field(buf, p, stop, "value")
    if p != stop:
        raise _corrupt(f"message at position {pos} has {stop - p} bytes past its value")
    return LegacyMessage(offset, magic, attributes, timestamp, key, value), stop


def read_set(buf: bytes | bytearray | memoryview) -> list[LegacyMessage]:
    """Every message of a message set (shallow: compressed wrappers as they are)."""
    out, pos = [], 0
    while pos < len(buf):
        msg, pos = read_message(buf, pos)
        out.append(msg)
    if not out:
        raise _corrupt("empty message set")
    return out


def inner_messages(wrapper: LegacyMessage, max_size: int | None = None) -> list[LegacyMessage]:
    """The messages a compressed wrapper holds (decompressed to at most ``max_size`` bytes), with
    Kafka's offsets (magic 1: relative to the wrapper's, which is the last one's, unless that
    makes them negative) and its checks: same magic, not compressed themselves. A LogAppendTime
    wrapper gives its timestamp to every inner message."""
    codec = wrapper.compression
    if codec not in LEGACY_CODECS:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                         f"compression codec id {codec} cannot be used with magic {wrapper.magic}")
    if wrapper.value is None:
        raise _invalid(f"Found invalid compressed record set with null value (magic = {wrapper.magic})")
    data = wrapper.value
    if codec == LZ4 and wrapper.magic == 0:
        data = lz4_fix_header_checksum(data, broken=False)
    messages = read_set(decompress(codec, data, max_size=max_size))
    for m in messages:
        if m.magic != wrapper.magic:
            raise _invalid(f"Log record magic {m.magic} does not match outer magic {wrapper.magic}")
        if m.compression != NONE:
            raise _invalid("Compressed outer record should not have an inner record with a compression attribute set")
    base = wrapper.offset - messages[-1].offset
    if wrapper.magic > 0 and base > 0:
        messages = [m._replace(offset=m.offset + base) for m in messages]
    if wrapper.log_append_time:
        messages = [m._replace(timestamp=wrapper.timestamp, attributes=m.attributes | TIMESTAMP_TYPE_MASK)
                    for m in messages]
    return messages


# ------------------------------------------------------------------ building

def encode_message(offset: int, magic: int, attributes: int, timestamp: int,
                   key: bytes | None, value: bytes | None) -> bytes:
    """One message with its offset, size and CRC32."""
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += _INT32.pack(-1 if field is None else len(field))
        if field is not None:
            body += field
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + bytes(body)


def build_set(magic: int, codec: int, messages: Iterable[tuple[int, int, bytes | None, bytes | None]],
              log_append_time: int | None = None) -> bytes:
    """A message set of (offset, timestamp, key, value); with ``codec``, one wrapper holding them
    (inner offsets relative for magic 1, the wrapper's offset the last one); ``log_append_time``
    makes every message a LogAppendTime one with that timestamp (magic 1)."""
    ts_bit = TIMESTAMP_TYPE_MASK if magic and log_append_time is not None else 0

    def stamp(t: int) -> int:
        return NO_TIMESTAMP if not magic else (t if log_append_time is None else log_append_time)
    items = [(o, stamp(t), k, v) for o, t, k, v in messages]
    if codec == NONE:
        return b"".join(encode_message(o, magic, ts_bit, t, k, v) for o, t, k, v in items)
    base = items[0][0] if magic else 0
    inner = b"".join(encode_message(o - base, magic, ts_bit, t, k, v) for o, t, k, v in items)
    data = compress(codec, inner)
    if codec == LZ4 and magic == 0:
        data = lz4_fix_header_checksum(data, broken=True)
    wrapper_ts = max(t for _, t, _, _ in items) if magic else NO_TIMESTAMP
    return encode_message(items[-1][0], magic, codec | ts_bit, wrapper_ts, None, data)


# ------------------------------------------------------------------ magic 2 -> 0/1

def down_convert(records: bytes | bytearray | memoryview, to_magic: int, fetch_offset: int,
                 size_limit: int) -> bytes:
    """Magic-2 batches read from a log as a message set of ``to_magic``: control batches skipped,
    records of an uncompressed batch below ``fetch_offset`` dropped, the first batch whole, then
    whole messages while the set stays within ``size_limit`` bytes (a partial trailing batch of
    the input is ignored). A zstd batch cannot be down-converted: UNSUPPORTED_COMPRESSION_TYPE if
    it is the first, else the set ends before it."""
    parts: list[bytes] = []
    size = 0
    for pos, header in record_batch.iter_headers(records):
        if header.is_control:
            continue
        if header.compression not in LEGACY_CODECS:
            if parts:
                break
            raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                             "Down-conversion of zstandard-compressed batches is not supported")
        h, recs = decode_batch(records, pos)
        if h.compression == NONE:
            recs = [r for r in recs if r.offset >= fetch_offset]
        if not recs:
            continue
        lat = recs[0].timestamp if h.timestamp_type == LOG_APPEND_TIME else None
        if h.compression == NONE:
            chunk = [build_set(to_magic, NONE, [_fields(r)], lat) for r in recs]
        else:
            chunk = [build_set(to_magic, h.compression, [_fields(r) for r in recs], lat)]
        first = not parts
        for message in chunk:
            if not first and size + len(message) > size_limit:
                return b"".join(parts)
            parts.append(message)
            size += len(message)
    return b"".join(parts)


def _fields(r: Record) -> tuple[int, int, bytes | None, bytes | None]:
    return r.offset, r.timestamp, r.key, r.value


# ------------------------------------------------------------------ LZ4 header checksum (KAFKA-3160)

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes | bytearray | memoryview, seed: int = 0) -> int:
    """xxHash32 (only ever over an LZ4 frame header: a few bytes)."""
    data = bytes(data)
    n, p = len(data), 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while p + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[p:p + 4], "little")
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                p += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while p + 4 <= n:
        h = (_rotl((h + int.from_bytes(data[p:p + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        p += 4
    for b in data[p:]:
        h = (_rotl((h + b * _P5) & _M32, 11) * _P1) & _M32
    h = ((h ^ (h >> 15)) * _P2) & _M32
    h = ((h ^ (h >> 13)) * _P3) & _M32
    return h ^ (h >> 16)


def lz4_fix_header_checksum(frame: bytes, broken: bool) -> bytes:
    """``frame`` with its header checksum byte as LZ4 defines it, or (``broken``) as Kafka's
    magic-0 LZ4 writes it: over the frame's magic number too."""
    if len(frame) < 7:
        raise _corrupt("lz4: frame shorter than its header")
    flags = frame[4]
    hc_at = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    if len(frame) <= hc_at:
        raise _corrupt("lz4: frame shorter than its header")
    hc = (xxh32(frame[0 if broken else 4:hc_at]) >> 8) & 0xFF
    return frame[:hc_at] + bytes((hc,)) + frame[hc_at + 1:]
