"""Kafka wire primitives: golden bytes, round-trip properties, malformed input."""
from __future__ import annotations

import io
import uuid

import pytest
from construct import ConstructError
from hypothesis import given, strategies as st

from odradek.protocol.primitives import (
    INT16, INT32, INT64, UVARINT, VARINT, VARLONG, KafkaArray, KafkaBytes, KafkaString,
    TaggedFields, UUID_TYPE, UVarInt, build_value, encode_uvarint, parse_value,
    zigzag_decode, zigzag_encode,
)


@pytest.mark.parametrize("value, golden", [
    (0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"),
    (16383, "ff7f"), (16384, "808001"), (2**32 - 1, "ffffffff0f"),
])
def test_uvarint_golden(value, golden):
    assert build_value(UVARINT, value).hex() == golden
    assert parse_value(UVARINT, bytes.fromhex(golden)) == value


@pytest.mark.parametrize("value, golden", [
    (0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"), (64, "8001"),
    (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f"),
])
def test_zigzag_varint_golden(value, golden):
    assert build_value(VARINT, value).hex() == golden
    assert parse_value(VARINT, bytes.fromhex(golden)) == value


@given(st.integers(0, 2**32 - 1))
def test_uvarint_roundtrip(n):
    assert parse_value(UVARINT, encode_uvarint(n)) == n


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_roundtrip(n):
    assert parse_value(VARINT, build_value(VARINT, n)) == n
    assert zigzag_decode(zigzag_encode(n, 32)) == n


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_roundtrip(n):
    assert parse_value(VARLONG, build_value(VARLONG, n)) == n


def test_varint_limits():
    with pytest.raises(ConstructError):
        parse_value(UVARINT, b"\xff\xff\xff\xff\xff\x01")  # 6 bytes
    with pytest.raises(ConstructError):
        parse_value(UVARINT, b"\xff\xff\xff\xff\x7f")  # > 32 bits
    with pytest.raises(ConstructError):
        parse_value(UVARINT, b"\x80")  # truncated
    with pytest.raises(ConstructError):
        build_value(UVARINT, -1)
    with pytest.raises(ConstructError):
        build_value(VARINT, 2**31)
    assert parse_value(UVarInt(64), encode_uvarint(2**64 - 1)) == 2**64 - 1


def test_fixed_ints_big_endian():
    assert build_value(INT16, -2) == b"\xff\xfe"
    assert build_value(INT32, 1) == b"\x00\x00\x00\x01"
    assert build_value(INT64, -1) == b"\xff" * 8


@pytest.mark.parametrize("con, value, golden", [
    (KafkaString(), "abc", "0003616263"),
    (KafkaString(), "", "0000"),
    (KafkaString(nullable=True), None, "ffff"),
    (KafkaString(compact=True), "abc", "04616263"),
    (KafkaString(compact=True), "", "01"),
    (KafkaString(nullable=True, compact=True), None, "00"),
    (KafkaString(), "é", "0002c3a9"),
    (KafkaBytes(), b"\x01\x02", "000000020102"),
    (KafkaBytes(nullable=True), None, "ffffffff"),
    (KafkaBytes(compact=True), b"\x01\x02", "030102"),
    (KafkaBytes(nullable=True, compact=True), None, "00"),
    (KafkaArray(INT32), [1, 2], "000000020000000100000002"),
    (KafkaArray(INT32, nullable=True), None, "ffffffff"),
    (KafkaArray(INT32, compact=True), [7], "0200000007"),
    (KafkaArray(INT32, nullable=True, compact=True), None, "00"),
    (KafkaArray(KafkaString(compact=True), compact=True), ["a", ""], "03026101"),
])
def test_length_prefixed_golden(con, value, golden):
    assert build_value(con, value).hex() == golden
    assert parse_value(con, bytes.fromhex(golden)) == value


@pytest.mark.parametrize("con, data", [
    (KafkaString(), "ffff"),              # null for non-nullable
    (KafkaString(nullable=True), "fffe"),  # -2
    (KafkaString(), "000561"),            # truncated
    (KafkaString(), "0002ffff"),          # invalid UTF-8
    (KafkaString(compact=True), "00"),    # compact null for non-nullable
    (KafkaBytes(), "ffffffff"),
    (KafkaBytes(nullable=True), "80000000"),
    (KafkaBytes(), "00000010" + "00" * 4),
    (KafkaArray(INT32), "ffffffff"),
    (KafkaArray(INT32, nullable=True), "fffffff0"),
    (KafkaArray(INT32), "7fffffff00000001"),  # lying count: fails fast, no huge list
    (KafkaArray(INT32, compact=True), "00"),
    (UUID_TYPE, "0011"),
])
def test_malformed_raise_construct_error(con, data):
    with pytest.raises((ConstructError, UnicodeDecodeError)):
        parse_value(con, bytes.fromhex(data))


def test_build_rejects_null_for_non_nullable():
    with pytest.raises(ConstructError):
        build_value(KafkaString(), None)
    with pytest.raises(ConstructError):
        build_value(KafkaString(), "x" * 40000)


@given(st.one_of(st.none(), st.text(max_size=50)), st.booleans())
def test_nullable_string_roundtrip(value, compact):
    con = KafkaString(nullable=True, compact=compact)
    assert parse_value(con, build_value(con, value)) == value


@given(st.one_of(st.none(), st.binary(max_size=300)), st.booleans())
def test_nullable_bytes_roundtrip(value, compact):
    con = KafkaBytes(nullable=True, compact=compact)
    assert parse_value(con, build_value(con, value)) == value


@given(st.lists(st.text(max_size=10), max_size=200), st.booleans())
def test_array_roundtrip(values, compact):
    con = KafkaArray(KafkaString(compact=compact), compact=compact)
    assert parse_value(con, build_value(con, values)) == values


@given(st.dictionaries(st.integers(0, 10_000), st.binary(max_size=200), max_size=8))
def test_tagged_fields_roundtrip(fields):
    con = TaggedFields()
    assert parse_value(con, build_value(con, fields)) == fields


def test_tagged_fields_golden():
    assert build_value(TaggedFields(), {}).hex() == "00"
    assert build_value(TaggedFields(), {1: b"\xaa", 0: b""}).hex() == "02" "0000" "0101aa"
    with pytest.raises(ConstructError):
        parse_value(TaggedFields(), bytes.fromhex("01" "00" "05" "aa"))


def test_uuid_and_bytes_like():
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert parse_value(UUID_TYPE, build_value(UUID_TYPE, u)) == u
    assert build_value(KafkaBytes(), memoryview(b"ab")) == b"\x00\x00\x00\x02ab"
    assert build_value(KafkaBytes(), bytearray(b"ab")) == b"\x00\x00\x00\x02ab"


def test_parse_value_rejects_trailing_bytes():
    with pytest.raises(ConstructError):
        parse_value(INT16, b"\x00\x01\x02")
    stream = io.BytesIO(b"\x00\x01\x02")
    assert INT16._parse(stream, None, "") == 1
