"""The records decoder in C (protocol/_records.c:decode) against the one in Python
(protocol/records.py:_decode_py): on every section the C one either returns exactly the Python
one's records (same values, types and classes) or declines (None), and it declines only where
Python raises or reads a value past 64 bits, so ``_decode_records`` always answers as Python does.
CI installs a C compiler, so the C decoder is there to be tested."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import _records, record_batch
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import (
    LOG_APPEND_TIME, BatchBuilder, Record, _decode_py, _decode_records, decode_batch, encode_varint,
)

TS = 1_700_000_000_000
INT64 = (-(1 << 63), (1 << 63) - 1)

_bytes = st.one_of(st.none(), st.binary(max_size=40))
_record = st.tuples(st.integers(-(1 << 40), 1 << 40), _bytes, _bytes,
                    st.lists(st.tuples(st.text(max_size=6), _bytes), max_size=3))


def section(records, base_offset: int = 0) -> tuple[bytes, record_batch.BatchHeader]:
    builder = BatchBuilder(base_offset=base_offset)
    for ts, key, value, headers in records:
        builder.append(TS + ts, key, value, headers)
    raw = builder.build()
    return raw[record_batch.HEADER_SIZE:], record_batch.parse_header(raw)


def python_outcome(args: tuple) -> list[Record] | tuple[ErrorCode, str]:
    try:
        return _decode_py(*args)
    except KafkaError as e:
        return e.code, str(e)


def check_agree(args: tuple) -> list[Record] | None:
    """The C answer (None = declined), after checking it against the Python one."""
    got = _records.decode(*args, Record)
    want = python_outcome(args)
    if got is None:   # declined: Python raises, or reads an int past 64 bits
        assert isinstance(want, tuple) or any(
            not INT64[0] <= v <= INT64[1] for r in want for v in (r.offset, r.timestamp)), want
    else:
        assert isinstance(want, list) and got == want
        for mine, theirs in zip(got, want):
            assert type(mine) is Record
            assert [type(v) for v in mine] == [type(v) for v in theirs]
            assert [(type(k), type(v)) for k, v in mine.headers] == [(type(k), type(v)) for k, v in theirs.headers]
    assert (_decode_records(*args) if not isinstance(want, tuple) else python_outcome(args)) == want
    return got


@settings(max_examples=400, deadline=None)
@given(st.lists(_record, min_size=1, max_size=12), st.integers(0, 1 << 50), st.booleans())
def test_well_formed_sections_decode_in_c_as_in_python(records, base_offset, log_append):
    data, h = section(records, base_offset)
    args = (data, 0, len(data), h.records_count, h.base_offset, h.base_timestamp,
            h.max_timestamp if log_append else None)
    got = check_agree(args)
    assert got is not None and len(got) == len(records)   # the C decoder really is used
    assert [r.value for r in got] == [v for _, _, v, _ in records]
    assert all(r.timestamp_type == (LOG_APPEND_TIME if log_append else 0) for r in got)


@settings(max_examples=600, deadline=None)
@given(st.lists(_record, min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)), min_size=1, max_size=4),
       st.integers(-4, 4), st.integers(-2, 2))
def test_damaged_sections_get_pythons_answer(records, flips, resize, count_change):
    """Flipped bytes, a cut or padded end, a wrong record count: the C decoder declines whenever
    Python raises CORRUPT_MESSAGE, and returns Python's records whenever Python returns them."""
    data, h = section(records)
    damaged = bytearray(data)
    for at, mask in flips:
        damaged[at % len(damaged)] ^= mask
    damaged = damaged[:len(damaged) + resize] if resize < 0 else damaged + bytes(resize)
    check_agree((bytes(damaged), 0, len(damaged), h.records_count + count_change, h.base_offset,
                 h.base_timestamp, None))


def one_record(fields: bytes) -> bytes:
    return encode_varint(len(fields)) + fields


@pytest.mark.parametrize("name, data, base_offset, declined", [
    ("a key length below -1 is a null key, as in Python",
     one_record(b"\x00\x00\x00" + encode_varint(-5) + encode_varint(1) + b"v" + b"\x00"), 0, False),
    ("a header key that is not utf-8",
     one_record(b"\x00\x00\x00\x01\x01\x02" + encode_varint(2) + b"\xff\xfe" + b"\x01"), 0, True),
    ("a null header key",
     one_record(b"\x00\x00\x00\x01\x01\x02\x01\x01"), 0, True),
    ("a timestamp delta of 10 bytes with bits past 64 (Python reads a larger int)",
     one_record(b"\x00" + b"\xff" * 9 + b"\x03" + b"\x00\x01\x01\x00"), 0, True),
    ("an offset past int64",
     one_record(b"\x00\x00" + encode_varint(2) + b"\x01\x01\x00"), (1 << 63) - 2, True),
    ("a record longer than the section", encode_varint(60) + b"\x00" * 10, 0, True),
    ("a record shorter than its fields", one_record(b"\x00\x00\x00\x01\x01"), 0, True),
    ("a record longer than its fields", one_record(b"\x00\x00\x00\x01\x01\x00\x00"), 0, True),
])
def test_edge_cases(name, data, base_offset, declined):
    got = check_agree((data, 0, len(data), 1, base_offset, TS, None))
    assert (got is None) == declined, name


def test_a_huge_record_count_over_few_bytes_is_declined_without_allocating_for_it():
    data, h = section([(0, None, b"v", [])])
    assert check_agree((data, 0, len(data), (1 << 31) - 1, 0, TS, None)) is None


def test_sections_inside_a_larger_buffer_and_bad_bounds():
    data, h = section([(0, b"k", b"v", [("h", None)]), (5, None, None, [])])
    padded = b"junk" + data + b"more"
    got = check_agree((padded, 4, 4 + len(data), 2, 7, TS, None))
    assert got is not None and [r.offset for r in got] == [7, 8] and got[0].headers == [("h", None)]
    for start, end in ((-1, len(data)), (0, len(padded) + 1), (10, 5)):
        assert _records.decode(padded, start, end, 2, 0, TS, None, Record) is None
    with pytest.raises(TypeError):
        _records.decode(data, 0, len(data), 2, 0, TS, None, dict)


def test_decode_batch_goes_through_the_c_decoder_and_keeps_its_errors():
    builder = BatchBuilder(base_offset=100)
    for i in range(50):
        builder.append(TS + i, None if i % 2 else b"k%d" % i, b"v%d" % i, [("n", b"%d" % i)] if i % 3 else [])
    batch = builder.build()
    header, records = decode_batch(batch)
    h = record_batch.parse_header(batch)
    assert records == _decode_py(batch, record_batch.HEADER_SIZE, len(batch), 50, 100, h.base_timestamp, None)
    wrong = bytearray(batch)
    wrong[57:61] = (51).to_bytes(4, "big")   # a record count one too high, under a valid CRC
    wrong[17:21] = record_batch.compute_crc(wrong, 0, len(wrong)).to_bytes(4, "big")
    with pytest.raises(KafkaError) as info:
        decode_batch(bytes(wrong))
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE
