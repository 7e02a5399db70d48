"""The schema DSL: defaults, version gating, flexible forms, tagged fields, special cases."""
from __future__ import annotations

import uuid

import pytest

from odradek.protocol.apis import (
    api_versions, fetch, leader_and_isr, metadata, produce, stop_replica, update_metadata,
)
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.schema import (
    INT16, INT32, INT64, STRING, ArrayOf, EncodeError, F, Message, StructOf, Struct,
)

Demo = Message("DemoRequest", "0-3", flexible="2+", fields=[
    F("name", STRING, "0+"),
    F("old_only", INT32, "0"),
    F("ids", ArrayOf(INT32), "1+", nullable="1+"),
    F("limit", INT32, "0+", default=-1),
    F("items", [
        F("key", STRING, "0+"),
        F("label", STRING, "1+", nullable="1+"),
    ], "0+"),
    F("note", STRING, "2+", tag=0, tagged="2+", nullable="2+", default=None),
    F("epoch", StructOf([F("epoch", INT32, "2+", default=-1),
                         F("end_offset", INT64, "2+", default=-1)]), "2+", tag=3, tagged="2+"),
])


def test_golden_classic_and_flexible():
    value = {"name": "ab", "old_only": 9, "ids": [1], "items": [{"key": "k", "label": None}]}
    assert Demo.encode(value, 0).hex() == "0002" "6162" "00000009" "ffffffff" "00000001" "0001" "6b"
    assert Demo.encode(value, 1).hex() == ("0002" "6162" "00000001" "00000001" "ffffffff"
                                           "00000001" "0001" "6b" "ffff")
    # flexible: compact string/array, per-struct tagged sections, defaults not written
    assert Demo.encode(value, 2).hex() == "03" "6162" "02" "00000001" "ffffffff" "02" "026b" "00" "00" "00"
    tagged = dict(value, note="n", epoch={"epoch": 4})
    assert Demo.encode(tagged, 2).hex() == ("03" "6162" "02" "00000001" "ffffffff" "02" "026b" "00"
                                            "00" "02" "00" "02" "026e"
                                            "03" "0d" "00000004" "ffffffffffffffff" "00")


def test_defaults_and_absent_fields():
    assert Demo.decode(Demo.encode({}, 0), 0) == Struct(
        name="", old_only=0, limit=-1, items=[], ids=[], note=None,
        epoch=Struct(epoch=-1, end_offset=-1))
    decoded = Demo.decode(Demo.encode({"old_only": 5}, 1), 1)
    assert decoded.old_only == 0 and decoded.ids is None   # not in v1 / nullable default
    assert decoded["limit"] == decoded.limit == -1
    with pytest.raises(AttributeError):
        decoded.no_such_field


def test_tagged_fields_roundtrip_and_unknown_tags():
    value = {"name": "x", "note": "hello", "epoch": {"epoch": 3, "end_offset": 99}}
    data = Demo.encode(value, 3)
    decoded = Demo.decode(data, 3)
    assert decoded.note == "hello" and decoded.epoch == {"epoch": 3, "end_offset": 99}
    # an unknown tag (7) in the top-level section is skipped
    base = Demo.encode({"name": "x"}, 3)
    assert base.endswith(b"\x00")
    with_unknown = base[:-1] + b"\x01\x07\x02zz"
    assert Demo.decode(with_unknown, 3) == Demo.decode(base, 3)
    with pytest.raises(KafkaError):  # garbage inside a known tag
        Demo.decode(base[:-1] + b"\x01\x00\x01\x05", 3)


def test_encode_errors():
    with pytest.raises(EncodeError):
        Demo.encode({"name": None}, 0)
    with pytest.raises(EncodeError):
        Demo.encode({"limit": 2**31}, 0)
    with pytest.raises(EncodeError):
        Demo.encode({}, 9)
    with pytest.raises(EncodeError):
        Demo.encode({"items": [{"key": 5}]}, 0)


def test_decode_unsupported_version():
    with pytest.raises(KafkaError) as info:
        Demo.decode(b"", 4)
    assert info.value.code == ErrorCode.UNSUPPORTED_VERSION


@pytest.mark.parametrize("data", [
    "", "00", "0002" "61", "fffe", "0000" "ffffff", "0000" "fffffffe" "ffffffff",
    "0000" "7fffffff",
])
def test_malformed_inputs(data):
    with pytest.raises(KafkaError) as info:
        Demo.decode(bytes.fromhex(data), 1)
    assert info.value.code == ErrorCode.INVALID_REQUEST


def test_produce_v3_golden():
    value = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 2, "records": b"RB"}]}]}
    assert produce.Request.encode(value, 3).hex() == (
        "ffff" "ffff" "00007530" "00000001" "0001" "74" "00000001" "00000002" "00000002" "5242")
    assert produce.Request.decode(produce.Request.encode(value, 3), 3) == value
    assert produce.Request.decode(produce.Request.encode(value, 2), 2).transactional_id is None


def test_metadata_request_null_topics_and_v8_ops():
    assert metadata.Request.encode({"topics": None}, 1).hex() == "ffffffff"
    assert metadata.Request.encode({}, 0).hex() == "00000000"  # v0: empty = all topics
    req = metadata.Request.decode(bytes.fromhex("ffffffff" "00" "01" "01"), 8)
    assert req.topics is None and req.allow_auto_topic_creation is False
    assert req.include_cluster_authorized_operations and req.include_topic_authorized_operations
    resp = metadata.Response.decode(metadata.Response.encode({}, 8), 8)
    assert resp.cluster_authorized_operations == -(2**31)


def test_api_versions_v3_request_and_response_tags():
    req = api_versions.Request.decode(bytes.fromhex("06" + b"librd".hex() + "03" + b"2.".hex()
                                                    + "00"), 3)
    assert req == {"client_software_name": "librd", "client_software_version": "2."}
    resp = {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}],
            "throttle_time_ms": 0, "finalized_features_epoch": 5,
            "supported_features": [{"name": "f", "min_version": 1, "max_version": 2}]}
    decoded = api_versions.Response.decode(api_versions.Response.encode(resp, 3), 3)
    assert decoded.finalized_features_epoch == 5
    assert decoded.supported_features[0].max_version == 2 and decoded.finalized_features == []


def test_leader_and_isr_grouping():
    state = {"topic_name": "t", "partition_index": 1, "controller_epoch": 2, "leader": 3,
             "leader_epoch": 4, "isr": [3], "zk_version": 5, "replicas": [3, 4], "is_new": True}
    v1 = leader_and_isr.Request.decode(leader_and_isr.Request.encode(
        {"controller_id": 3, "ungrouped_partition_states": [state]}, 1), 1)
    assert v1.ungrouped_partition_states[0].topic_name == "t" and v1.topic_states == []
    topic_id = uuid.uuid4()
    v5 = leader_and_isr.Request.decode(leader_and_isr.Request.encode(
        {"controller_id": 3, "type": 1, "topic_states": [
            {"topic_name": "t", "topic_id": topic_id, "partition_states": [state]}]}, 5), 5)
    part = v5.topic_states[0].partition_states[0]
    assert v5.topic_states[0].topic_id == topic_id
    assert part.topic_name == "" and part.replicas == [3, 4] and part.is_new is True
    resp = leader_and_isr.Response.decode(leader_and_isr.Response.encode(
        {"topics": [{"topic_id": topic_id, "partition_errors": [{"partition_index": 1}]}]}, 5), 5)
    assert resp.topics[0].partition_errors[0].partition_index == 1


def test_update_metadata_v0_broker_shape_and_v5_grouping():
    broker = {"id": 1, "v0_host": "h", "v0_port": 9092, "rack": "r",
              "endpoints": [{"port": 9093, "host": "h2", "listener": "PLAINTEXT",
                             "security_protocol": 0}]}
    v0 = update_metadata.Request.decode(update_metadata.Request.encode(
        {"live_brokers": [broker]}, 0), 0)
    assert (v0.live_brokers[0].v0_host, v0.live_brokers[0].v0_port) == ("h", 9092)
    assert v0.live_brokers[0].endpoints == []
    v3 = update_metadata.Request.decode(update_metadata.Request.encode(
        {"live_brokers": [broker]}, 3), 3).live_brokers[0]
    assert v3.v0_host == "" and v3.endpoints[0].listener == "PLAINTEXT" and v3.rack == "r"
    v5 = update_metadata.Request.decode(update_metadata.Request.encode(
        {"broker_epoch": 7, "topic_states": [{"topic_name": "t", "partition_states": [
            {"partition_index": 0, "leader": 1, "isr": [1], "replicas": [1],
             "offline_replicas": []}]}]}, 5), 5)
    assert v5.broker_epoch == 7 and v5.topic_states[0].partition_states[0].leader == 1


def test_stop_replica_v3_topic_states():
    value = {"controller_id": 1, "controller_epoch": 2, "broker_epoch": 3, "topic_states": [
        {"topic_name": "t", "partition_states": [
            {"partition_index": 0, "leader_epoch": 5, "delete_partition": True}]}]}
    decoded = stop_replica.Request.decode(stop_replica.Request.encode(value, 3), 3)
    assert decoded.topic_states[0].partition_states[0] == {
        "partition_index": 0, "leader_epoch": 5, "delete_partition": True}
    assert stop_replica.Request.decode(stop_replica.Request.encode(
        {"delete_partitions": True, "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
        1), 1).topics[0].partition_indexes == [0, 1]


def test_fetch_v7_sessions_and_v11_rack():
    value = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 50 << 20,
             "isolation_level": 1, "session_id": 0, "session_epoch": -1, "rack_id": "r1",
             "topics": [{"topic": "t", "partitions": [
                 {"partition": 0, "current_leader_epoch": 4, "fetch_offset": 10,
                  "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
             "forgotten_topics_data": [{"topic": "old", "partitions": [1]}]}
    v11 = fetch.Request.decode(fetch.Request.encode(value, 11), 11)
    assert v11.rack_id == "r1" and v11.forgotten_topics_data[0].partitions == [1]
    v7 = fetch.Request.decode(fetch.Request.encode(value, 7), 7)
    assert v7.session_epoch == -1 and v7.rack_id == ""
    assert v7.topics[0].partitions[0].current_leader_epoch == -1  # v9+ only
    resp = fetch.Response.decode(fetch.Response.encode({"session_id": 9, "responses": [
        {"topic": "t", "partition_responses": [{"partition": 0, "record_set": None}]}]}, 7), 7)
    assert resp.session_id == 9 and resp.responses[0].partition_responses[0].record_set is None


def test_struct_values_are_dicts():
    decoded = Demo.decode(Demo.encode({"name": "z"}, 0), 0)
    assert isinstance(decoded, dict) and "name" in repr(decoded)
    decoded.name = "y"
    assert decoded["name"] == "y"
    assert Demo.decode(Demo.encode(decoded, 0), 0).name == "y"
