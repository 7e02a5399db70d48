"""Cross-checks against independent codecs: kafka-python 3.x and aiokafka.

kafka-python 3.x generates its classes from Kafka 4.x's JSON schemas; for every version
both sides declare, (1) our bytes decode with kafka-python and re-encode to the same
bytes, and (2) a kafka-python object built from the same values encodes to bytes we
decode back to those values. aiokafka's hand-written classes (non-flexible only) are a
third opinion for the client-path APIs.
"""
from __future__ import annotations

import importlib

import pytest

from odradek.protocol import apis
from odradek.protocol.header import (
    decode_request_header, decode_response, encode_request, encode_response,
)

from test_protocol_apis import expected_subset, sample

kp_api = pytest.importorskip("kafka.protocol.api_message")

KAFKA_PYTHON_CLASSES = {
    "api_versions": "kafka.protocol.metadata:ApiVersions",
    "metadata": "kafka.protocol.metadata:Metadata",
    "find_coordinator": "kafka.protocol.metadata.find_coordinator:FindCoordinator",
    "produce": "kafka.protocol.producer:Produce",
    "init_producer_id": "kafka.protocol.producer.transaction:InitProducerId",
    "fetch": "kafka.protocol.consumer.fetch:Fetch",
    "list_offsets": "kafka.protocol.consumer.offsets:ListOffsets",
    "offset_for_leader_epoch": "kafka.protocol.consumer.offsets:OffsetForLeaderEpoch",
    "join_group": "kafka.protocol.consumer.group:JoinGroup",
    "sync_group": "kafka.protocol.consumer.group:SyncGroup",
    "heartbeat": "kafka.protocol.consumer.group:Heartbeat",
    "leave_group": "kafka.protocol.consumer.group:LeaveGroup",
    "offset_commit": "kafka.protocol.consumer.group:OffsetCommit",
    "offset_fetch": "kafka.protocol.consumer.group:OffsetFetch",
    "create_topics": "kafka.protocol.admin.topics:CreateTopics",
    "delete_topics": "kafka.protocol.admin.topics:DeleteTopics",
    "create_partitions": "kafka.protocol.admin.topics:CreatePartitions",
    "describe_groups": "kafka.protocol.admin.groups:DescribeGroups",
    "list_groups": "kafka.protocol.admin.groups:ListGroups",
    "delete_groups": "kafka.protocol.admin.groups:DeleteGroups",
    "describe_configs": "kafka.protocol.admin.configs:DescribeConfigs",
}


def kafka_python_class(module_name: str, kind: str):
    path, prefix = KAFKA_PYTHON_CLASSES[module_name].split(":")
    return getattr(importlib.import_module(path), prefix + kind)


def valid_versions(cls) -> range:
    low, high = (int(x) for x in cls.json["validVersions"].split("-"))
    return range(low, high + 1)


def cases():
    for name in KAFKA_PYTHON_CLASSES:
        api = getattr(apis, name)
        for kind in ("Request", "Response"):
            ours = getattr(api, kind)
            theirs = kafka_python_class(name, kind)
            for v in valid_versions(theirs):
                if ours.min_version <= v <= ours.max_version:
                    yield pytest.param(api, kind, v, id=f"{api.NAME}{kind}-v{v}")


# Fields Kafka renamed after 2.8 (same wire layout): (our API module, our name) -> theirs.
RENAMED = {
    ("FetchResponse", "partition_responses"): "partitions",
    ("FetchResponse", "partition"): "partition_index",
    ("FetchResponse", "record_set"): "records",
    ("OffsetCommitRequest", "generation_id"): "generation_id_or_member_epoch",
    ("MetadataResponse", "topic_authorized_operations"): "authorized_operations",
    ("MetadataResponse", "cluster_authorized_operations"): "authorized_operations",
}


def to_kafka_python(cls, value: dict, version: int, message_name: str):
    """Build a kafka-python DataContainer from our field dict (same snake_case names)."""
    fields = {f.name: f for f in cls._struct._fields}
    kwargs = {}
    for key, item in value.items():
        key = RENAMED.get((message_name, key), key)
        f = fields[key]
        if item is not None and (f.is_struct_array() or f.is_struct()):
            sub = getattr(cls, f.type_str)
            if f.is_struct_array():
                item = [to_kafka_python(sub, x, version, message_name) for x in item]
            else:
                item = to_kafka_python(sub, item, version, message_name)
        elif key.endswith("authorized_operations") and isinstance(item, int):
            # kafka-python models the bitfield as a set of ACL operation bit numbers
            item = None if item == -(2**31) else {i for i in range(31) if item >> i & 1}
        kwargs[key] = item
    return cls(version=version, **kwargs)


@pytest.mark.parametrize("api, kind, version", list(cases()))
def test_ours_to_kafka_python_and_back(api, kind, version):
    ours = getattr(api, kind)
    theirs = kafka_python_class(api.__name__.rsplit(".", 1)[1], kind)
    value = sample(ours.fields, version, ours.is_flexible(version))
    if ours is apis.api_versions.Response:
        value["error_code"] = 0  # clients read error responses as v0 (KIP-511)
    data = ours.encode(value, version)
    decoded = theirs.decode(data, version=version)
    if not hasattr(decoded, "_header"):
        decoded._header = None  # kafka-python leaves the slot unset on some classes
    assert bytes(decoded.encode()) == data
    # kafka-python -> ours: their encoding of the same values
    obj = to_kafka_python(theirs, value, version, ours.name)
    their_bytes = bytes(obj.encode(version=version))
    expected_subset(value, ours.decode(their_bytes, version))
    assert their_bytes == data


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_request_header_with_kafka_python(version):
    cls = kafka_python_class("api_versions", "Request")
    req = cls(version=version, **({"client_software_name": "kafka-python",
                                    "client_software_version": "3.0.12"} if version >= 3 else {}))
    req.with_header(correlation_id=99, client_id="kp-client")
    frame = bytes(req.encode(header=True))
    header, offset = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        18, version, 99, "kp-client")
    ours = encode_request(apis.api_versions, version, 99, "kp-client", req.to_dict())
    assert ours == frame


@pytest.mark.parametrize("api_name, version", [
    ("api_versions", 0), ("api_versions", 3), ("metadata", 8), ("metadata", 9),
    ("metadata", 11), ("produce", 8), ("produce", 9), ("fetch", 11), ("fetch", 12),
    ("create_topics", 4), ("create_topics", 5),
])
def test_response_frames_with_kafka_python(api_name, version):
    api = getattr(apis, api_name)
    theirs = kafka_python_class(api_name, "Response")
    value = sample(api.Response.fields, version, api.Response.is_flexible(version))
    if api is apis.api_versions:
        value["error_code"] = 0
    frame = encode_response(api, version, 1234, value)
    decoded = theirs.decode(frame, version=version, header=True)
    assert decoded.header.correlation_id == 1234
    assert decode_response(api, version, frame)[0] == 1234
    obj = to_kafka_python(theirs, value, version, api.Response.name)
    obj.with_header(correlation_id=1234)
    assert bytes(obj.encode(header=True)) == frame


# --- aiokafka ----------------------------------------------------------------------------

aiokafka_api = pytest.importorskip("aiokafka.protocol.api")


def _aiokafka(module: str, name: str):
    return getattr(importlib.import_module(f"aiokafka.protocol.{module}"), name)


def test_aiokafka_api_versions_v2_response():
    value = {"error_code": 0, "throttle_time_ms": 5,
             "api_keys": [{"api_key": k, "min_version": m.MIN_VERSION, "max_version": m.MAX_VERSION}
                          for k, m in sorted(apis.API_BY_KEY.items())]}
    data = apis.api_versions.Response.encode(value, 2)
    resp = _aiokafka("admin", "ApiVersionResponse_v2").decode(data)
    assert resp.error_code == 0 and resp.throttle_time_ms == 5
    assert [tuple(x) for x in resp.api_versions] == [
        (k, m.MIN_VERSION, m.MAX_VERSION) for k, m in sorted(apis.API_BY_KEY.items())]


def test_aiokafka_metadata_v5():
    req = _aiokafka("metadata", "MetadataRequest_v5")(topics=["a", "b"],
                                                        allow_auto_topic_creation=False)
    decoded = apis.metadata.Request.decode(req.encode(), 5)
    assert [t.name for t in decoded.topics] == ["a", "b"]
    assert decoded.allow_auto_topic_creation is False
    value = {"throttle_time_ms": 0, "controller_id": 2, "cluster_id": "cid",
             "brokers": [{"node_id": 1, "host": "h1", "port": 9092, "rack": "r1"}],
             "topics": [{"error_code": 0, "name": "a", "is_internal": False, "partitions": [
                 {"error_code": 0, "partition_index": 0, "leader_id": 1, "replica_nodes": [1, 2],
                  "isr_nodes": [1], "offline_replicas": [2]}]}]}
    resp = _aiokafka("metadata", "MetadataResponse_v5").decode(
        apis.metadata.Response.encode(value, 5))
    assert resp.controller_id == 2 and resp.cluster_id == "cid"
    assert tuple(resp.brokers[0]) == (1, "h1", 9092, "r1")
    assert tuple(resp.topics[0][3][0]) == (0, 0, 1, [1, 2], [1], [2])


def test_aiokafka_produce_v7_and_fetch_v11():
    records = b"\x00" * 61 + b"batch"
    req = _aiokafka("produce", "ProduceRequest_v7")(
        transactional_id=None, required_acks=-1, timeout=1500,
        topics=[("t", [(0, records)])])
    decoded = apis.produce.Request.decode(req.encode(), 7)
    assert decoded.acks == -1 and decoded.timeout_ms == 1500
    assert decoded.topic_data[0].partition_data[0].records == records
    value = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "t", "partitions": [
            {"partition_index": 0, "error_code": 0, "high_watermark": 10,
             "last_stable_offset": 10, "log_start_offset": 0, "aborted_transactions": [],
             "preferred_read_replica": -1, "records": records}]}]}
    # 2.8 names: partition_responses/partition/record_set; map the sample explicitly
    ours = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "t", "partition_responses": [
            {"partition": 0, "error_code": 0, "high_watermark": 10, "last_stable_offset": 10,
             "log_start_offset": 0, "aborted_transactions": [], "preferred_read_replica": -1,
             "record_set": records}]}]}
    resp = _aiokafka("fetch", "FetchResponse_v11").decode(apis.fetch.Response.encode(ours, 11))
    topic, partitions = resp.topics[0]
    assert topic == "t"
    assert partitions[0][0:3] == (0, 0, 10) and partitions[0][-1] == records
    assert value["responses"][0]["partitions"][0]["records"] == records
