"""``__transaction_state`` record codec: byte layout checked by hand, round trips, errors."""
from __future__ import annotations

import struct

import pytest

from odradek.protocol.txn_records import (TxnRecordError, TxnValue, decode_txn_key, decode_txn_record,
                                          decode_txn_value, encode_txn_key, encode_txn_record,
                                          encode_txn_value)


def test_key_bytes():
    # int16 version 0, then the id as int16 length + UTF-8
    assert encode_txn_key("tx-1") == b"\x00\x00" + b"\x00\x04" + b"tx-1"
    assert decode_txn_key(b"\x00\x00\x00\x04tx-1") == "tx-1"


def test_ongoing_value_bytes():
    v = TxnValue(producer_id=5, producer_epoch=3, timeout_ms=60000, status=1,
                 partitions=frozenset({("t", 1), ("t", 0), ("u", 7)}),
                 last_update_timestamp_ms=1700, start_timestamp_ms=1600)
    expected = (
        struct.pack(">h", 0)                   # value version
        + struct.pack(">q", 5)                 # producer id
        + struct.pack(">h", 3)                 # producer epoch
        + struct.pack(">i", 60000)             # transaction timeout
        + struct.pack(">b", 1)                 # status: Ongoing
        + struct.pack(">i", 2)                 # two topics
        + struct.pack(">h", 1) + b"t" + struct.pack(">i", 2) + struct.pack(">ii", 0, 1)
        + struct.pack(">h", 1) + b"u" + struct.pack(">i", 1) + struct.pack(">i", 7)
        + struct.pack(">q", 1700)              # last update
        + struct.pack(">q", 1600)              # start
    )
    assert encode_txn_value(v) == expected
    assert decode_txn_value(expected) == v


def test_empty_value_has_a_null_partition_array():
    v = TxnValue(producer_id=9, producer_epoch=0, timeout_ms=1000, status=0,
                 last_update_timestamp_ms=5, start_timestamp_ms=-1)
    data = encode_txn_value(v)
    assert data == (struct.pack(">hqhib", 0, 9, 0, 1000, 0) + struct.pack(">i", -1)
                    + struct.pack(">qq", 5, -1))
    assert decode_txn_value(data) == v
    with pytest.raises(ValueError):
        encode_txn_value(TxnValue(9, 0, 1000, 0, frozenset({("t", 0)})))


@pytest.mark.parametrize("status", range(8))
def test_every_status_round_trips(status):
    parts = frozenset() if status == 0 else frozenset({("a", 0)})
    v = TxnValue(1, 2, 3, status, parts, 4, 5)
    assert decode_txn_record(*encode_txn_record("x", v)) == ("x", v)


def test_tombstone():
    key, value = encode_txn_record("gone", None)
    assert value is None
    assert decode_txn_record(key, None) == ("gone", None)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x01\x00\x01x",      # short, unknown key version
                                  b"\x00\x00\x00\x09ab"])                   # truncated string
def test_bad_keys(data):
    with pytest.raises(TxnRecordError):
        decode_txn_key(data)


def test_bad_values():
    good = encode_txn_value(TxnValue(1, 2, 3, 1, frozenset({("a", 0)}), 4, 5))
    with pytest.raises(TxnRecordError):
        decode_txn_value(b"\x00\x01" + good[2:])           # unknown version
    with pytest.raises(TxnRecordError):
        decode_txn_value(good[:-3])                         # truncated
    bad_status = bytearray(good)
    bad_status[2 + 8 + 2 + 4] = 9
    with pytest.raises(TxnRecordError):
        decode_txn_value(bytes(bad_status))
