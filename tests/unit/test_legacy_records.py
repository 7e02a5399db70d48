"""Magic 0/1 message sets: golden bytes, each codec, the broken magic-0 LZ4 header, Kafka's error
codes, up-conversion (the validator) and down-conversion (Fetch v0-3), and the property that up
then down gives back the same keys, values, offsets and timestamps."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.broker.config.kafka_config import LogConfig
from odradek.broker.log.validator import LeaderChecks, RecordValidationError, up_convert
from odradek.protocol import record_batch as rb
from odradek.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress, decompress
from odradek.protocol.control_records import build_control_batch
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.legacy_records import (
    build_set, down_convert, encode_message, inner_messages, lz4_fix_header_checksum, read_set, xxh32,
)
from odradek.protocol.records import BatchBuilder, decode_batch

TS = 1700000000000
CODECS = (NONE, GZIP, SNAPPY, LZ4)
CHECKS = LeaderChecks.of(LogConfig())

# written out by hand: offset, size, CRC32 (zlib) of magic..end, magic, attributes, [timestamp], key, value
GOLDEN_V0 = bytes.fromhex("0000000000000000" "00000010" "1fecd70a" "00" "00" "00000001" "6b" "00000001" "76")
GOLDEN_V1 = bytes.fromhex("0000000000000007" "00000018" "6a5500fb" "01" "00" "0000018bcfe56800"
                          "ffffffff" "00000002" "7631")


def messages_of(buf: bytes) -> list:
    """Every message, compressed wrappers opened."""
    out = []
    for m in read_set(buf):
        out += inner_messages(m) if m.compression else [m]
    return out


def test_golden_bytes_magic_0_and_1():
    assert build_set(0, NONE, [(0, TS, b"k", b"v")]) == GOLDEN_V0
    assert encode_message(7, 1, 0, TS, None, b"v1") == GOLDEN_V1
    [m0] = read_set(GOLDEN_V0)
    assert (m0.offset, m0.magic, m0.timestamp, m0.key, m0.value) == (0, 0, -1, b"k", b"v")
    [m1] = read_set(GOLDEN_V1)
    assert (m1.offset, m1.magic, m1.timestamp, m1.key, m1.value) == (7, 1, TS, None, b"v1")


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_each_codec(magic, codec):
    items = [(i, TS + i, None if i == 1 else b"k%d" % i, None if i == 2 else b"v%d" % i * 50) for i in range(5)]
    buf = build_set(magic, codec, items)
    shallow = read_set(buf)
    assert len(shallow) == (5 if codec == NONE else 1)
    if codec != NONE:   # the wrapper: the last offset, the codec, (magic 1) the max timestamp
        assert (shallow[0].offset, shallow[0].compression, shallow[0].key) == (4, codec, None)
        assert shallow[0].timestamp == (TS + 4 if magic else -1)
    got = [(m.offset, m.timestamp, m.key, m.value) for m in messages_of(buf)]
    assert got == [(o, t if magic else -1, k, v) for o, t, k, v in items]


def test_xxh32_known_values_and_the_kafka_3160_lz4_header():
    assert [xxh32(b""), xxh32(b"a"), xxh32(b"abc")] == [0x02CC5D05, 0x550D7456, 0x32D153FF]
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    frame = compress(LZ4, b"x" * 1000)
    assert lz4_fix_header_checksum(frame, broken=False) == frame   # what LZ4 writes
    [wrapper] = read_set(build_set(0, LZ4, [(0, -1, None, b"x" * 1000)]))
    descriptor_end = 6 + (8 if wrapper.value[4] & 0x08 else 0)
    # magic 0 writes the checksum over the frame's magic number too (KAFKA-3160), as Kafka does
    assert wrapper.value[descriptor_end] == (xxh32(wrapper.value[:descriptor_end]) >> 8) & 0xFF
    assert wrapper.value[descriptor_end] != frame[descriptor_end]
    assert [m.value for m in inner_messages(wrapper)] == [b"x" * 1000]
    # Kafka ignores a magic-0 LZ4 header checksum: a correct one is read as well
    correct = encode_message(0, 0, LZ4, -1, None, lz4_fix_header_checksum(wrapper.value, broken=False))
    assert [m.value for m in messages_of(correct)] == [b"x" * 1000]


def _recrc(msg: bytearray) -> bytes:
    import zlib
    struct.pack_into(">I", msg, 12, zlib.crc32(bytes(msg[16:])))
    return bytes(msg)


def _wrapper(magic: int, inner: bytes, codec: int = GZIP, offset: int = 0) -> bytes:
    return encode_message(offset, magic, codec, TS if magic else -1, None, compress(codec, inner))


@pytest.mark.parametrize("what,buf,code", [
    ("bad CRC", GOLDEN_V0[:-1] + b"w", ErrorCode.CORRUPT_MESSAGE),
    ("truncated", GOLDEN_V1[:-3], ErrorCode.CORRUPT_MESSAGE),
    ("a header cut", GOLDEN_V1 + GOLDEN_V1[:10], ErrorCode.CORRUPT_MESSAGE),
    ("size below the overhead", _recrc(bytearray(GOLDEN_V0[:8] + struct.pack(">i", 13) + GOLDEN_V0[12:25])),
     ErrorCode.CORRUPT_MESSAGE),
    ("key past the size", _recrc(bytearray(GOLDEN_V0[:18] + b"\x00\x00\x00\x09" + GOLDEN_V0[22:])),
     ErrorCode.CORRUPT_MESSAGE),
    ("bytes past the value", _recrc(bytearray(GOLDEN_V0[:8] + struct.pack(">i", 17) + GOLDEN_V0[12:] + b"!")),
     ErrorCode.CORRUPT_MESSAGE),
    ("magic 3", _recrc(bytearray(GOLDEN_V0[:16] + b"\x03" + GOLDEN_V0[17:])), ErrorCode.CORRUPT_MESSAGE),
    ("bad compressed payload", encode_message(0, 1, GZIP, TS, None, b"not gzip at all"), ErrorCode.CORRUPT_MESSAGE),
    ("bad snappy payload", encode_message(0, 0, SNAPPY, -1, None, b"\xff" * 20), ErrorCode.CORRUPT_MESSAGE),
    ("zstd wrapper", encode_message(0, 1, ZSTD, TS, None, compress(ZSTD, GOLDEN_V1)),
     ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    ("null wrapper value", encode_message(0, 1, GZIP, TS, None, None), ErrorCode.INVALID_RECORD),
    ("inner magic differs", _wrapper(1, GOLDEN_V0), ErrorCode.INVALID_RECORD),
    ("inner compressed", _wrapper(0, _wrapper(0, GOLDEN_V0)), ErrorCode.INVALID_RECORD),
    ("inner offsets not 0..n-1", _wrapper(1, GOLDEN_V1 + GOLDEN_V1, offset=20), ErrorCode.INVALID_RECORD),
    ("inner CRC", _wrapper(1, GOLDEN_V1[:-1] + b"2"), ErrorCode.CORRUPT_MESSAGE),
    ("two wrappers", _wrapper(0, GOLDEN_V0) * 2, ErrorCode.INVALID_RECORD),
    ("magic 0 then 1", GOLDEN_V0 + GOLDEN_V1, ErrorCode.INVALID_RECORD),
])
def test_bad_sets_get_kafkas_codes(what, buf, code):
    with pytest.raises(KafkaError) as e:
        up_convert(bytearray(buf), CHECKS, "producer", "t-0")
    assert e.value.code == code, what


def test_a_magic_2_batch_after_a_legacy_message_is_invalid_record():
    b = BatchBuilder()
    b.append(TS, b"k", b"v")
    with pytest.raises(KafkaError) as e:
        up_convert(bytearray(GOLDEN_V1 + b.build()), CHECKS, "producer", "t-0")
    assert e.value.code == ErrorCode.INVALID_RECORD


def test_up_convert_limits_and_log_append_time():
    small = LeaderChecks.of(LogConfig({"max.message.bytes": "30"}))
    with pytest.raises(KafkaError) as e:
        up_convert(bytearray(GOLDEN_V1), small, "producer", "t-0")
    assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE
    lat = encode_message(0, 1, 0x08, TS, b"k", b"v")
    with pytest.raises(RecordValidationError) as e:
        up_convert(bytearray(lat), CHECKS, "producer", "t-0")
    assert e.value.code == ErrorCode.INVALID_TIMESTAMP


@pytest.mark.parametrize("topic_codec,expected", [
    ("producer", GZIP), ("uncompressed", NONE), ("snappy", SNAPPY), ("LZ4", LZ4), ("zstd", ZSTD)])
def test_up_convert_compresses_per_the_topic(topic_codec, expected):
    out = up_convert(bytearray(build_set(1, GZIP, [(0, TS, b"k", b"v"), (1, TS + 1, b"k2", None)])),
                     CHECKS, topic_codec, "t-0")
    h, recs = decode_batch(bytes(out))
    assert (h.magic, h.compression, h.base_offset, h.records_count) == (2, expected, 0, 2)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in recs] == [(0, TS, b"k", b"v"), (1, TS + 1, b"k2", None)]


def _stored(records: list[tuple[int, bytes | None, bytes | None]], base: int, codec: int = NONE,
            headers: bool = False) -> bytes:
    b = BatchBuilder(compression=codec, base_offset=base)
    for ts, k, v in records:
        b.append(ts, k, v, [("h", b"x")] if headers else ())
    return b.build()


def test_down_convert_keeps_offsets_and_drops_what_old_formats_cannot_say():
    plain = _stored([(TS, b"a", b"1"), (TS + 1, b"b", b"2"), (TS + 2, b"c", b"3")], 10, headers=True)
    control = build_control_batch(5, 0, True, 0, TS)
    control = bytearray(control)
    rb.set_base_offset(control, 0, 13)
    packed = _stored([(TS + 3, b"d", b"4"), (TS + 4, None, b"5")], 14, GZIP)
    log = plain + bytes(control) + packed
    # magic 1 from offset 11: records below it dropped from the uncompressed batch, the marker skipped
    v1 = down_convert(log, 1, 11, 1 << 20)
    shallow = read_set(v1)
    assert [m.offset for m in shallow] == [11, 12, 15]                 # the wrapper: its last offset
    assert shallow[-1].compression == GZIP
    assert [m.offset for m in read_set(decompress(GZIP, shallow[-1].value))] == [0, 1]   # relative inside
    assert [(m.offset, m.timestamp, m.key) for m in inner_messages(shallow[-1])] == [(14, TS + 3, b"d"), (15, TS + 4, None)]
    assert [(m.offset, m.timestamp, m.key, m.value) for m in messages_of(v1)][:2] == \
        [(11, TS + 1, b"b", b"2"), (12, TS + 2, b"c", b"3")]
    # magic 0: absolute inner offsets, no timestamps
    v0 = down_convert(log, 0, 10, 1 << 20)
    assert [(m.offset, m.timestamp, m.key) for m in messages_of(v0)] == \
        [(10, -1, b"a"), (11, -1, b"b"), (12, -1, b"c"), (14, -1, b"d"), (15, -1, None)]


def test_down_convert_log_append_time_and_sizes():
    b = bytearray(_stored([(TS, b"a", b"1"), (TS + 1, b"b", b"2")], 0))
    rb.set_log_append_time(b, 0, len(b), TS + 99)
    [m, _] = read_set(down_convert(bytes(b), 1, 0, 1 << 20))
    assert (m.timestamp, m.log_append_time) == (TS + 99, True)
    log = _stored([(TS, b"a", b"1" * 100)] * 3, 0) + _stored([(TS, b"b", b"2" * 100)] * 3, 3)
    # the first batch whole even past the limit, then whole messages within it
    assert [m.offset for m in read_set(down_convert(log, 1, 0, 10))] == [0, 1, 2]
    one = len(encode_message(0, 1, 0, TS, b"a", b"1" * 100))
    assert [m.offset for m in read_set(down_convert(log, 1, 0, 4 * one))] == [0, 1, 2, 3]
    assert [m.offset for m in read_set(down_convert(log, 1, 0, 5 * one - 1))] == [0, 1, 2, 3]
    zstd = _stored([(TS, b"z", b"z")], 6, ZSTD)
    assert [m.offset for m in read_set(down_convert(log + zstd, 1, 0, 1 << 20))] == list(range(6))
    with pytest.raises(KafkaError) as e:
        down_convert(zstd, 1, 6, 1 << 20)
    assert e.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


_record = st.tuples(st.integers(0, 2**40), st.none() | st.binary(max_size=20), st.none() | st.binary(max_size=40))


@settings(max_examples=150, deadline=None)
@given(records=st.lists(_record, min_size=1, max_size=12), magic=st.sampled_from([0, 1]),
       codec=st.sampled_from(CODECS), topic_codec=st.sampled_from(["producer", "uncompressed", "gzip", "lz4"]),
       base=st.integers(0, 2**40))
def test_up_then_down_gives_back_keys_values_offsets_timestamps(records, magic, codec, topic_codec, base):
    legacy = build_set(magic, codec, [(i, ts, k, v) for i, (ts, k, v) in enumerate(records)])
    batch = up_convert(bytearray(legacy), CHECKS, topic_codec, "t-0")
    rb.set_base_offset(batch, 0, base)   # as the log assigns it
    back = messages_of(down_convert(bytes(batch), magic, base, 1 << 30))
    assert [(m.offset, m.timestamp, m.key, m.value) for m in back] == \
        [(base + i, ts if magic else -1, k, v) for i, (ts, k, v) in enumerate(records)]
