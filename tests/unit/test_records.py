"""odradek.protocol.records: build/decode round trips, kafka-python interop, corruption."""
from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import compression as C
from odradek.protocol import record_batch
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import (
    BatchBuilder, Record, batch_of, decode_batch, encode_varint, iter_batches, iter_records,
)

CODECS = [C.NONE, C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]
TS = 1_700_000_000_000

maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))
headers_st = st.lists(st.tuples(st.text(max_size=20), maybe_bytes), max_size=4)
record_st = st.tuples(st.integers(min_value=0, max_value=2**41), maybe_bytes, maybe_bytes, headers_st)


def build(records, **kwargs) -> bytes:
    builder = BatchBuilder(**kwargs)
    for i, (ts, key, value, headers) in enumerate(records):
        assert builder.append(ts, key, value, headers) == i
    return builder.build()


def corrupt_code(call) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        call()
    return info.value.code


def refresh_crc(buf: bytearray, pos: int = 0) -> None:
    """Recompute the CRC32C of the batch at ``pos`` after a test edited it."""
    header = record_batch.parse_header(buf, pos)
    struct.pack_into(">I", buf, pos + 17, record_batch.compute_crc(buf, pos, header.size))


# --- varints ---------------------------------------------------------------

@pytest.mark.parametrize("n, encoded", [
    (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01"),
    (8191, b"\xfe\x7f"), (8192, b"\x80\x80\x01"), (-8193, b"\x81\x80\x01"),
    (2**31 - 1, b"\xfe\xff\xff\xff\x0f"), (-(2**63), b"\xff" * 9 + b"\x01"),
])
def test_zigzag_varint(n, encoded):
    assert encode_varint(n) == encoded


# --- round trips -----------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(records=st.lists(record_st, min_size=1, max_size=30), codec=st.sampled_from(CODECS),
       base_offset=st.integers(0, 2**40), producer_id=st.integers(-1, 2**40),
       transactional=st.booleans())
def test_round_trip(records, codec, base_offset, producer_id, transactional):
    batch = build(records, compression=codec, base_offset=base_offset, producer_id=producer_id,
                  producer_epoch=3, base_sequence=17, is_transactional=transactional,
                  partition_leader_epoch=5)
    header, decoded = decode_batch(batch)
    assert header.size == len(batch)
    assert header.compression == codec and header.is_transactional == transactional
    assert header.records_count == len(records) and header.last_offset_delta == len(records) - 1
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (producer_id, 3, 17)
    assert header.partition_leader_epoch == 5
    assert header.base_timestamp == records[0][0]
    assert header.max_timestamp == max(r[0] for r in records)
    assert decoded == [Record(base_offset + i, ts, key, value, list(headers), 0)
                       for i, (ts, key, value, headers) in enumerate(records)]
    assert list(iter_records(batch)) == decoded


def test_estimated_size_is_exact_uncompressed():
    builder = BatchBuilder()
    assert builder.estimated_size() == record_batch.HEADER_SIZE and builder.record_count == 0
    for i in range(50):
        builder.append(TS + i, b"k%d" % i, b"v" * i, [("h", b"x")] if i % 2 else ())
    assert builder.record_count == 50
    assert builder.estimated_size() == len(builder.build())


def test_large_values_and_many_records():
    # past the precomputed varint table: offset deltas > 16383, long keys, old timestamps
    big = bytes(range(256)) * 100
    records = [(TS - i * 1000, None if i % 3 else big, b"%d" % i, ()) for i in range(20_000)]
    header, decoded = decode_batch(build(records, compression=C.LZ4))
    assert header.last_offset_delta == 19_999 and header.max_timestamp == TS
    assert decoded[-1] == Record(19_999, TS - 19_999_000, None, b"19999", [], 0)
    assert decoded[0].key == big


def test_empty_batch_refused():
    with pytest.raises(ValueError):
        BatchBuilder().build()
    with pytest.raises(ValueError):
        batch_of(TS, [])


@settings(max_examples=100, deadline=None)
@given(ts=st.integers(min_value=-1, max_value=2**62), pairs=st.lists(st.tuples(maybe_bytes, maybe_bytes), min_size=1, max_size=20),
       codec=st.sampled_from(CODECS))
def test_batch_of_is_what_a_builder_builds(ts, pairs, codec):
    """The coordinators' one-call batch: the same bytes as a BatchBuilder given the same records."""
    expected = build([(ts, key, value, ()) for key, value in pairs], compression=codec)
    assert batch_of(ts, pairs, codec) == expected
    assert batch_of(ts, iter(pairs), codec) == expected   # any iterable, read once


def test_log_append_time_overrides_record_timestamps():
    batch = bytearray(build([(TS, b"a", b"1", ()), (TS + 5, b"b", b"2", ())], compression=C.GZIP))
    record_batch.set_log_append_time(batch, 0, len(batch), TS + 999)
    header, decoded = decode_batch(batch)
    assert header.timestamp_type == 1
    assert [(r.timestamp, r.timestamp_type) for r in decoded] == [(TS + 999, 1)] * 2


def test_decode_at_position_and_from_memoryview():
    first = build([(TS, None, b"one", ())])
    second = build([(TS, None, b"two", ())], base_offset=1)
    blob = first + second
    for buf in (blob, bytearray(blob), memoryview(blob)):
        header, records = decode_batch(buf, len(first))
        assert header.base_offset == 1 and records[0].value == b"two"


# --- iter_records over a Fetch records field -------------------------------

def control_batch(base_offset: int) -> bytes:
    batch = bytearray(build([(TS, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 7), ())],
                            base_offset=base_offset, producer_id=9, producer_epoch=0,
                            is_transactional=True))
    struct.pack_into(">h", batch, 21, record_batch.TRANSACTIONAL_MASK | record_batch.CONTROL_MASK)
    refresh_crc(batch)
    return bytes(batch)


def test_iter_records_skips_control_and_partial_tail():
    data1 = build([(TS, b"k", b"v%d" % i, ()) for i in range(3)], producer_id=9, producer_epoch=0,
                  base_sequence=0, is_transactional=True)
    marker = control_batch(3)
    data2 = build([(TS, None, b"w%d" % i, ()) for i in range(2)], base_offset=4, compression=C.SNAPPY)
    blob = data1 + marker + data2 + data1[:40]
    assert [(r.offset, r.value) for r in iter_records(blob)] == [
        (0, b"v0"), (1, b"v1"), (2, b"v2"), (4, b"w0"), (5, b"w1")]
    assert [h.is_control for h, _ in iter_batches(blob)] == [False, True, False]
    assert list(iter_records(b"")) == [] and list(iter_records(None)) == []
    assert list(iter_records(data1[:-1])) == []


def test_iter_records_crc_mismatch():
    batch = bytearray(build([(TS, b"key", b"value", ())]))
    batch[-3] ^= 0xFF
    assert corrupt_code(lambda: list(iter_records(bytes(batch)))) == ErrorCode.CORRUPT_MESSAGE


# --- malformed batches with a valid CRC ------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_truncated_records_section(codec):
    batch = build([(TS, b"key%d" % i, b"value" * 20, [("h", b"v")]) for i in range(10)])
    header = record_batch.parse_header(batch)
    records = batch[record_batch.HEADER_SIZE:-7]
    payload = C.compress(codec, records)
    rebuilt = bytearray(record_batch.pack_header(header._replace(
        batch_length=record_batch.HEADER_SIZE - 12 + len(payload), attributes=codec)) + payload)
    refresh_crc(rebuilt)
    assert corrupt_code(lambda: decode_batch(rebuilt)) == ErrorCode.CORRUPT_MESSAGE


def test_record_count_mismatch_and_bad_length():
    batch = bytearray(build([(TS, b"k", b"v", ())] * 3))
    struct.pack_into(">i", batch, 57, 4)  # claims 4 records, holds 3
    refresh_crc(batch)
    assert corrupt_code(lambda: decode_batch(batch)) == ErrorCode.CORRUPT_MESSAGE
    struct.pack_into(">i", batch, 57, 2)  # claims 2 records: bytes left over
    refresh_crc(batch)
    assert corrupt_code(lambda: decode_batch(batch)) == ErrorCode.CORRUPT_MESSAGE
    batch = bytearray(build([(TS, b"k", b"v", ())]))
    batch[record_batch.HEADER_SIZE] = 0x7E  # record length 63: runs past the batch
    refresh_crc(batch)
    assert corrupt_code(lambda: decode_batch(batch)) == ErrorCode.CORRUPT_MESSAGE


def test_garbage_compressed_payload():
    batch = bytearray(build([(TS, b"k", b"v" * 100, ())], compression=C.ZSTD))
    batch[record_batch.HEADER_SIZE:record_batch.HEADER_SIZE + 4] = b"\x00\x01\x02\x03"
    refresh_crc(batch)
    assert corrupt_code(lambda: decode_batch(batch)) == ErrorCode.CORRUPT_MESSAGE


def test_truncated_batch_header():
    batch = build([(TS, b"k", b"v", ())])
    assert corrupt_code(lambda: decode_batch(batch[:50])) == ErrorCode.CORRUPT_MESSAGE
    assert corrupt_code(lambda: decode_batch(batch[:-1])) == ErrorCode.CORRUPT_MESSAGE


# --- cross-checks with kafka-python's independent implementation -----------

kafka_records = pytest.importorskip("kafka.record.default_records")
from kafka.record.memory_records import MemoryRecords  # noqa: E402


def _require_codec(codec: int) -> None:
    from kafka import codec as kcodec
    have = {C.NONE: True, C.GZIP: True, C.SNAPPY: kcodec.has_snappy(),
            C.LZ4: kcodec.has_lz4(), C.ZSTD: kcodec.has_zstd()}
    if not have[codec]:
        pytest.skip(f"kafka-python lacks the {C.codec_name(codec)} library")


SAMPLE = [
    (TS, None, b"x" * 100, []),
    (TS + 3, b"key-1", None, [("trace", b"abc"), ("empty", None)]),
    (TS - 2, b"", b"", [("unicode-\u00e9", b"")]),
    (TS + 70_000, b"k" * 9000, b"v" * 20_000, []),
]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batches(codec):
    _require_codec(codec)
    records = SAMPLE * 5
    blob = (build(records, compression=codec, base_offset=100, producer_id=7, producer_epoch=1,
                  base_sequence=40)
            + build(records[:2], compression=codec, base_offset=120))
    theirs = MemoryRecords(blob)
    batch = theirs.next_batch()
    assert batch.validate_crc()
    assert (batch.base_offset, batch.compression_type, batch.producer_id, batch.base_sequence) == (100, codec, 7, 40)
    assert batch.first_timestamp == TS and batch.max_timestamp == TS + 70_000
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch]
    assert got == [(100 + i, ts, k, v, list(h)) for i, (ts, k, v, h) in enumerate(records)]
    second = theirs.next_batch()
    assert second.validate_crc() and [r.offset for r in second] == [120, 121]
    assert theirs.next_batch() is None


@pytest.mark.parametrize("codec", CODECS)
def test_we_read_kafka_python_batches(codec):
    _require_codec(codec)
    builder = kafka_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False,
        producer_id=11, producer_epoch=2, base_sequence=5, batch_size=10**7)
    records = SAMPLE * 5
    for i, (ts, key, value, headers) in enumerate(records):
        assert builder.append(i, timestamp=ts, key=key, value=value, headers=headers) is not None
    batch = bytes(builder.build())
    header, decoded = decode_batch(batch)
    assert header.compression == codec  # big enough that kafka-python keeps it compressed
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (11, 2, 5)
    assert decoded == [Record(i, ts, k, v, list(h), 0) for i, (ts, k, v, h) in enumerate(records)]
    assert list(iter_records(batch + batch[:30])) == decoded


@settings(max_examples=60, deadline=None)
@given(records=st.lists(record_st, min_size=1, max_size=10), codec=st.sampled_from(CODECS))
def test_kafka_python_agrees_on_random_batches(records, codec):
    _require_codec(codec)
    ours = build(records, compression=codec, partition_leader_epoch=0)  # kafka-python writes 0
    builder = kafka_records.DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 10**7)
    for i, (ts, key, value, headers) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    theirs = bytes(builder.build())
    if codec == C.NONE:
        assert ours == theirs  # same layout byte for byte
    their_view = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])
                  for r in MemoryRecords(ours).next_batch()]
    our_view = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decode_batch(theirs)[1]]
    assert their_view == our_view


def test_crc_is_crc32c_over_attributes_to_end():
    batch = build([(TS, b"k", b"v", ())])
    assert type(batch) is bytes
    assert struct.unpack_from(">I", batch, 17)[0] == crc32c(batch[21:])
    assert record_batch.validate(batch).crc == crc32c(batch[21:])


wide_ts = st.one_of(st.integers(min_value=0, max_value=2**41), st.integers(min_value=-2**63, max_value=2**63 - 1))
buffers = st.one_of(st.none(), st.binary(max_size=300), st.binary(max_size=40).map(bytearray),
                    st.binary(max_size=40).map(memoryview))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(wide_ts, buffers, buffers, headers_st), min_size=1, max_size=12))
def test_records_written_in_c_are_the_python_writers_bytes(records):
    """``_records.c:append_record`` (what BatchBuilder.append uses when the C module is built)
    writes exactly the bytes of the Python writer, for timestamps far apart (a delta past 64 bits
    is written in Python) and bytes-like keys and values."""
    from odradek.protocol import records as module
    assert module._append_record is not None

    def built() -> bytes:
        builder = BatchBuilder()
        for ts, key, value, headers in records:
            builder.append(ts, key, value, headers)
        return builder.build()

    in_c = built()
    kept, module._append_record = module._append_record, None
    try:
        assert in_c == built()
    finally:
        module._append_record = kept
