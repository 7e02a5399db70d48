"""__consumer_offsets record encodings, ConsumerProtocol bytes and the group partitioner."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from odradek.broker.group import assignment_protocol as cp
from odradek.broker.group.offsets import java_string_hash, partition_for
from odradek.protocol import group_records as gr
from odradek.protocol.group_records import (
    GroupKey, GroupRecordError, GroupValue, MemberValue, OffsetKey, OffsetValue, decode_key,
    decode_record, encode_group_metadata, encode_offset_commit, is_group_metadata_key,
    is_offset_commit_key,
)

H = bytes.fromhex


# --- golden bytes (computed by hand from the schemas) --------------------------------

def test_offset_commit_key_v1_golden():
    key, value = encode_offset_commit("g", "t", 0, None)
    assert key == H("0001" "000167" "000174" "00000000")
    assert value is None                       # tombstone
    assert decode_key(key) == OffsetKey("g", "t", 0)
    # key v0 has the same layout
    assert decode_key(H("0000" "000167" "000174" "00000007")) == OffsetKey("g", "t", 7)


def test_offset_commit_value_v3_golden():
    _, value = encode_offset_commit("g", "t", 0, OffsetValue(5, "", 7, leader_epoch=2))
    assert value == H("0003" "0000000000000005" "00000002" "0000" "0000000000000007")


def test_offset_commit_value_v1_when_expire_timestamp():
    _, value = encode_offset_commit("g", "t", 0, OffsetValue(5, "m", 7, expire_timestamp=9))
    assert value == H("0001" "0000000000000005" "00016d" "0000000000000007" "0000000000000009")
    k, v = decode_record(*encode_offset_commit("g", "t", 0, OffsetValue(5, "m", 7,
                                                                       expire_timestamp=9)))
    assert v == OffsetValue(5, "m", 7, leader_epoch=-1, expire_timestamp=9)


def test_offset_commit_value_v0_and_v2_decode():
    key = H("0001" "000167" "000174" "00000000")
    v0 = H("0000" "000000000000000a" "0001" "78" "0000000000000063")
    assert decode_record(key, v0)[1] == OffsetValue(10, "x", 99)
    v2 = H("0002" "000000000000000a" "0000" "0000000000000063")
    assert decode_record(key, v2)[1] == OffsetValue(10, "", 99)


GROUP_V3 = GroupValue("consumer", 1, "range", "m1", 1000, (
    MemberValue("m1", "c", "h", 300, 100, b"\x01", b""),))
GROUP_V3_BYTES = H(
    "0003" "0008" + b"consumer".hex() + "00000001" "0005" + b"range".hex() + "00026d31"
    "00000000000003e8" "00000001"
    "00026d31" "ffff" "000163" "000168" "0000012c" "00000064" "0000000101" "00000000")


def test_group_metadata_key_and_value_v3_golden():
    key, value = encode_group_metadata("g", GROUP_V3)
    assert key == H("0002" "000167")
    assert value == GROUP_V3_BYTES
    assert decode_record(key, value) == (GroupKey("g"), GROUP_V3)
    assert encode_group_metadata("g", None) == (key, None)


def test_group_metadata_value_v0_decode_uses_session_timeout():
    v0 = H("0000" "0008" + b"consumer".hex() + "00000002" "ffff" "ffff" "00000001"
           "00026d31" "000163" "000168" "00000064" "00000000" "00000000")
    value = decode_record(H("0002000167"), v0)[1]
    assert value == GroupValue("consumer", 2, None, None, -1, (
        MemberValue("m1", "c", "h", 100, 100, b"", b""),))


def test_static_member_and_nulls_round_trip():
    value = GroupValue("", 0, None, None, -1, (
        MemberValue("i-1", "c", "h", 1, 2, b"s", b"a", group_instance_id="i"),))
    assert decode_record(*encode_group_metadata("grp", value))[1] == value


def test_key_kinds_and_errors():
    okey, _ = encode_offset_commit("g", "t", 1, None)
    gkey, _ = encode_group_metadata("g", None)
    assert is_offset_commit_key(okey) and not is_group_metadata_key(okey)
    assert is_group_metadata_key(gkey) and not is_offset_commit_key(gkey)
    assert not is_offset_commit_key(None) and not is_offset_commit_key(b"\x00")
    with pytest.raises(GroupRecordError):
        decode_key(H("0003000167"))             # unknown key version
    with pytest.raises(GroupRecordError):
        decode_key(H("00010001"))               # truncated
    with pytest.raises(GroupRecordError):
        decode_record(okey, H("0009"))          # unknown value version
    with pytest.raises(GroupRecordError):
        decode_record(gkey, GROUP_V3_BYTES + b"\x00")   # trailing bytes


texts = st.text(max_size=20)
i32 = st.integers(-2**31, 2**31 - 1)
i64 = st.integers(-2**63, 2**63 - 1)


@given(texts, texts, i32, st.builds(OffsetValue, i64, texts, i64, i32, st.just(-1)))
def test_offset_round_trip(group, topic, partition, value):
    assert decode_record(*encode_offset_commit(group, topic, partition, value)) == (
        OffsetKey(group, topic, partition), value)


@given(st.builds(OffsetValue, i64, st.text(max_size=40), i64, i32, st.just(-1) | i64))
def test_offset_value_packed_as_the_schema_encodes_it(value):
    """The versions Kafka 2.8 writes are packed in place: the schema's bytes exactly."""
    version = 1 if value.expire_timestamp != -1 else 3
    schema_bytes = gr._with_version(gr.OffsetCommitValue, version, {
        "offset": value.offset, "leader_epoch": value.leader_epoch, "metadata": value.metadata,
        "commit_timestamp": value.commit_timestamp, "expire_timestamp": value.expire_timestamp})
    assert encode_offset_commit("g", "t", 0, value)[1] == schema_bytes


def test_offset_value_with_metadata_past_int16_goes_through_the_schema():
    with pytest.raises(Exception) as packed:
        encode_offset_commit("g", "t", 0, OffsetValue(1, "m" * 40_000, 2))
    with pytest.raises(Exception) as schema:
        gr._with_version(gr.OffsetCommitValue, 3, {"offset": 1, "leader_epoch": -1, "metadata": "m" * 40_000,
                                                    "commit_timestamp": 2, "expire_timestamp": -1})
    assert type(packed.value) is type(schema.value) and str(packed.value) == str(schema.value)


members = st.builds(MemberValue, texts, texts, texts, i32, i32, st.binary(max_size=8),
                    st.binary(max_size=8), st.none() | texts)


@given(texts, st.builds(GroupValue, texts, i32, st.none() | texts, st.none() | texts, i64,
                        st.lists(members, max_size=3).map(tuple)))
def test_group_round_trip(group, value):
    assert decode_record(*encode_group_metadata(group, value)) == (GroupKey(group), value)


# --- ConsumerProtocol ----------------------------------------------------------------

def test_consumer_subscription_golden():
    assert cp.encode_subscription(["t"]) == H("0000" "00000001" "000174" "ffffffff")
    v1 = cp.encode_subscription(["t"], b"u", {"t": [2]}, version=1)
    assert v1 == H("0001" "00000001" "000174" "0000000175" "00000001" "000174" "0000000100000002")
    sub = cp.decode_subscription(v1)
    assert sub.topics == ["t"] and sub.user_data == b"u" and sub.owned_partitions == {"t": [2]}


def test_consumer_assignment_golden_and_newer_versions():
    data = cp.encode_assignment({"t": [0, 1]})
    assert data == H("0000" "00000001" "000174" "00000002" "00000000" "00000001" "ffffffff")
    assert cp.decode_assignment(data).partitions == {"t": [0, 1]}
    # a v3 blob is read through its v1 prefix, trailing fields ignored
    newer = H("0003") + data[2:] + b"extra"
    assert cp.decode_assignment(newer).partitions == {"t": [0, 1]}
    with pytest.raises(ValueError):
        cp.decode_assignment(H("0000000000"))
    assert cp.subscribed_topics([cp.encode_subscription(["a", "b"]),
                                 cp.encode_subscription(["b", "c"])]) == {"a", "b", "c"}
    assert cp.subscribed_topics([b"junk"]) is None


# --- group -> partition ----------------------------------------------------------------

def test_java_string_hash_known_values():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == -2**31    # Integer.MIN_VALUE
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogates


def test_partition_for():
    assert partition_for("hello") == 99162322 % 50
    assert partition_for("polygenelubricants") == 0             # Utils.abs(MIN_VALUE) = 0
    h = java_string_hash("my-group-7")
    assert partition_for("my-group-7", 13) == abs(h) % 13


@given(st.text(max_size=30))
def test_java_hash_matches_definition(s):
    units = [int.from_bytes(s.encode("utf-16-be", "surrogatepass")[i:i + 2], "big")
             for i in range(0, len(s.encode("utf-16-be", "surrogatepass")), 2)]
    n = len(units)
    expected = sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units)) % 2**32
    expected = expected - 2**32 if expected >= 2**31 else expected
    assert java_string_hash(s) == expected
    assert 0 <= partition_for(s) < 50
