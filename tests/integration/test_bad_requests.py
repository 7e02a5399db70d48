"""A real broker answers bad requests with Kafka's error code, or closes that connection cleanly.

Invariant: one shared 1-broker cluster (real ZooKeeper, real broker process) for the module.
Each bad input goes over a raw socket (struct-built frames where the codec could not build it);
each test then shows what a user would check: the error code (or a close, where Kafka closes),
that no topic znode or config znode appeared, that a valid request on a fresh connection is
answered, and that the broker's log holds no traceback.
"""
from __future__ import annotations

import socket
import struct
import time

import pytest

from test_broker_e2e import RawClient, create_topic, leader_ready, wait_brokers

from odradek.protocol.apis import (
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_user_scram_credentials,
    find_coordinator,
    list_offsets,
    metadata,
    offset_commit,
    offset_fetch,
    produce,
)
from odradek.protocol.compression import GZIP, LZ4, NONE
from odradek.protocol.connection import FrameReader
from odradek.protocol.errors import ErrorCode
from odradek.protocol.header import decode_response, encode_request
from odradek.protocol.legacy_records import build_set, encode_message
from odradek.testing import wait_until

pytestmark = pytest.mark.integration

MAX_REQUEST = 1_000_000  # socket.request.max.bytes of the module's broker
GROWN = "grown"          # a topic with one partition the CreatePartitions cases try to grow


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from odradek.zk.cluster import LocalCluster
    cluster = LocalCluster(tmp_path_factory.mktemp("bad-requests"), zookeepers=1, brokers=1,
                           overrides={"socket.request.max.bytes": MAX_REQUEST})
    cluster.start()
    try:
        wait_brokers(cluster.broker_address(1), 1)
        c = RawClient(cluster.broker_address(1))
        assert create_topic(c, GROWN).error_code == 0
        leader_ready(c, GROWN)
        c.close()
        yield cluster
    finally:
        cluster.stop()


# ---------------------------------------------------------------- helpers

def frame(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def header_v1(api_key: int, version: int, correlation_id: int = 7, client_id: bytes = b"bad") -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def string16(s: str) -> bytes:
    data = s.encode()
    return struct.pack(">h", len(data)) + data


def answers_then_close(address: str, data: bytes, timeout: float = 30.0) -> tuple[list[bytes], bool]:
    """Send ``data`` as it is; the frames the broker answers and whether it then closed
    (False: it kept the connection open for 1 s after the last answer)."""
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    try:
        sock.sendall(data)
        reader, frames = FrameReader(1 << 30), []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sock.settimeout(1.0 if frames else max(0.1, deadline - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                return frames, False
            except ConnectionResetError:
                return frames, True
            if not chunk:
                return frames, True
            frames += reader.feed(chunk)
        return frames, False
    finally:
        sock.close()


def topic_znodes(cluster) -> tuple[set[str], set[str]]:
    zk = cluster.zk
    configs = set(zk.get_children("/config/topics")) if zk.exists("/config/topics") else set()
    return set(zk.get_children("/brokers/topics")), configs


def assert_still_serving(cluster) -> None:
    """A valid Metadata on a new connection is answered, and no traceback reached the log."""
    c = RawClient(cluster.broker_address(1), timeout=10.0)
    try:
        assert [b.node_id for b in c.request(metadata, 8, {"topics": [], "allow_auto_topic_creation": False}).brokers] \
            == [1]
    finally:
        c.close()
    text = cluster.brokers[1].log_path.read_text(errors="replace")
    assert "Traceback" not in text, text[text.index("Traceback") - 300:][:3000]


def create(c: RawClient, topic: dict, version: int = 4):
    body = {"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    body.update(topic)
    resp = c.request(create_topics, version, {"topics": [body], "timeout_ms": 10000, "validate_only": False})
    return resp.topics[0]


# ---------------------------------------------------------------- CreateTopics and friends

def test_a_32767_character_topic_name_gets_invalid_topic_exception(broker):
    before = topic_znodes(broker)
    name = "a" * 32767
    topic = string16(name) + struct.pack(">ihii", 1, 1, 0, 0)   # 1 partition, RF 1, no assignments, no configs
    body = struct.pack(">i", 1) + topic + struct.pack(">i?", 10000, False)
    frames, closed = answers_then_close(broker.broker_address(1), frame(header_v1(19, 4) + body))
    assert not closed and len(frames) == 1
    cid, resp = decode_response(create_topics, 4, frames[0])
    assert cid == 7
    assert [(t.name, t.error_code) for t in resp.topics] == [(name, 17)]
    assert topic_znodes(broker) == before
    assert_still_serving(broker)


BAD_TOPICS = [
    ("name of 250 characters", {"name": "n" * 250}, 17),
    ("name '.'", {"name": "."}, 17),
    ("name '..'", {"name": ".."}, 17),
    ("empty name", {"name": ""}, 17),
    ("name with '/'", {"name": "a/b"}, 17),
    ("non-ASCII name", {"name": "caf\u00e9"}, 17),
    ("0 partitions", {"name": "p0", "num_partitions": 0}, 37),
    ("-2 partitions", {"name": "pm2", "num_partitions": -2}, 37),
    ("2**31-1 partitions", {"name": "pmax", "num_partitions": 2**31 - 1}, 37),
    ("more partitions than a znode holds", {"name": "pbig", "num_partitions": 100000}, 37),
    ("replication factor 0", {"name": "r0", "replication_factor": 0}, 38),
    ("replication factor -2", {"name": "rm2", "replication_factor": -2}, 38),
    ("replication factor above the live brokers", {"name": "r2", "replication_factor": 2}, 38),
    ("replication factor 32767", {"name": "rmax", "replication_factor": 32767}, 38),
    ("assignment with a duplicate replica", {"name": "a1", "num_partitions": -1, "replication_factor": -1,
                                             "assignments": [{"partition_index": 0, "broker_ids": [1, 1]}]}, 39),
    ("assignment not starting at 0", {"name": "a2", "num_partitions": -1, "replication_factor": -1,
                                      "assignments": [{"partition_index": 1, "broker_ids": [1]}]}, 39),
    ("assignment with a negative partition", {"name": "a3", "num_partitions": -1, "replication_factor": -1,
                                              "assignments": [{"partition_index": -1, "broker_ids": [1]}]}, 39),
    ("assignment of partitions of different sizes", {
        "name": "a4", "num_partitions": -1, "replication_factor": -1,
        "assignments": [{"partition_index": 0, "broker_ids": [1]}, {"partition_index": 1, "broker_ids": []}]}, 39),
    ("unknown config", {"name": "c1", "configs": [{"name": "no.such.config", "value": "1"}]}, 40),
    ("config value of the wrong type", {"name": "c2", "configs": [{"name": "retention.ms", "value": "soon"}]}, 40),
    ("config value out of range", {"name": "c3", "configs": [{"name": "min.insync.replicas", "value": "0"}]}, 40),
    ("config name of 32767 characters", {"name": "c4", "configs": [{"name": "n" * 32767, "value": "1"}]}, 40),
    ("config value of 32767 digits", {"name": "c5", "configs": [{"name": "retention.ms", "value": "9" * 32767}]},
     40),
    ("config value not in the list", {"name": "c6", "configs": [{"name": "cleanup.policy", "value": "keep"}]}, 40),
    ("null config value", {"name": "c7", "configs": [{"name": "retention.ms", "value": None}]}, 42),
]


@pytest.mark.parametrize("what, topic, code", BAD_TOPICS, ids=[b[0] for b in BAD_TOPICS])
def test_create_topics_refuses_bad_input_before_writing_anything(broker, what, topic, code):
    before = topic_znodes(broker)
    c = RawClient(broker.broker_address(1))
    try:
        result = create(c, topic)
        assert result.error_code == code, (what, result.error_message)
        assert result.name == topic["name"]
        assert c.request(api_versions, 0, {}).error_code == 0  # the same connection still serves
    finally:
        c.close()
    assert topic_znodes(broker) == before
    assert_still_serving(broker)


def test_create_partitions_refuses_bad_counts_and_assignments(broker):
    before = topic_znodes(broker)
    before_data = broker.zk.get(f"/brokers/topics/{GROWN}")[0]
    c = RawClient(broker.broker_address(1))

    def grow(name: str, count: int, assignments=None) -> int:
        body = {"topics": [{"name": name, "count": count, "assignments": assignments}], "timeout_ms": 10000,
                "validate_only": False}
        return c.request(create_partitions, 1, body).results[0].error_code

    try:
        assert grow(GROWN, 1) == 37                  # not more than it has
        assert grow(GROWN, 0) == 37
        assert grow(GROWN, -5) == 37
        assert grow(GROWN, 2**31 - 1) == 37          # refused before any assignment is built
        assert grow(GROWN, 120000) == 37             # the topic znode would pass jute.maxbuffer
        assert grow(GROWN, 2, [{"broker_ids": [7]}]) == 39                        # unknown broker
        assert grow(GROWN, 3, [{"broker_ids": [1]}]) == 39                        # 1 list for 2 new partitions
        assert grow(GROWN, 2, [{"broker_ids": [1, 1]}]) == 39                     # duplicate replica
        assert grow("n" * 32767, 2) == 3
        assert grow("..", 2) == 3                   # no topic has that name (nor a ZooKeeper path)
        assert grow("no-such-topic", 2) == 3
    finally:
        c.close()
    assert broker.zk.get(f"/brokers/topics/{GROWN}")[0] == before_data
    assert topic_znodes(broker) == before
    assert_still_serving(broker)


def test_metadata_and_delete_topics_with_bad_names_change_nothing(broker):
    before = topic_znodes(broker)
    c = RawClient(broker.broker_address(1))
    long_name, bad = "m" * 32767, "a/b"
    try:
        for version in (0, 4, 8):   # v0-3 always allow auto-creation; v4+ ask for it
            body = {"topics": [{"name": long_name}, {"name": bad}, {"name": ".."}], "allow_auto_topic_creation": True}
            topics = c.request(metadata, version, body).topics
            assert [(t.name, t.error_code) for t in topics] == [(long_name, 17), (bad, 17), ("..", 17)]
        resp = c.request(delete_topics, 3, {"topic_names": [long_name, bad, "no-such-topic"], "timeout_ms": 5000})
        assert [(r.name, r.error_code) for r in resp.responses] == [(long_name, 3), (bad, 3), ("no-such-topic", 3)]
    finally:
        c.close()
    assert topic_znodes(broker) == before
    assert_still_serving(broker)


# ---------------------------------------------------------------- found by the request fuzzer

def test_extreme_values_the_fuzzer_found_are_answered(broker):
    c = RawClient(broker.broker_address(1))
    try:
        # an error message quoting a 32767-character user name is sent cut short, not dropped
        resp = c.request(describe_user_scram_credentials, 0, {"users": [{"name": "u" * 32767}]})
        assert [(r.user, r.error_code) for r in resp.results] == [("u" * 32767, 91)]   # RESOURCE_NOT_FOUND
        # a retention time of 2**63-1 ms ("never") no longer overflows the stored offset's expiry
        commit = {"group_id": "fuzz-found", "generation_id": -1, "member_id": "", "retention_time_ms": 2**63 - 1,
                  "topics": [{"name": GROWN, "partitions": [
                      {"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}]}]}

        def committed() -> list[int] | None:   # None while the group coordinator is still being set up
            c.request(find_coordinator, 1, {"key": "fuzz-found", "key_type": 0})   # creates __consumer_offsets
            codes = [p.error_code for t in c.request(offset_commit, 3, commit).topics for p in t.partitions]
            return None if codes in ([14], [15], [16]) else codes

        assert wait_until(committed, what="the group coordinator to take a commit") == [0]
        fetched = c.request(offset_fetch, 3, {"group_id": "fuzz-found",
                                              "topics": [{"name": GROWN, "partition_indexes": [0]}]})
        assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [0]
    finally:
        c.close()
    assert_still_serving(broker)


# ---------------------------------------------------------------- framing and headers

def test_a_frame_too_large_is_answered_after_the_responses_owed(broker):
    address = broker.broker_address(1)
    oversize = struct.pack(">i", MAX_REQUEST + 1) + b"x" * 100
    quick = [encode_request(api_versions, 2, 11, "it", {}),
             encode_request(metadata, 8, 12, "it", {"topics": [], "allow_auto_topic_creation": False})]
    frames, closed = answers_then_close(address, b"".join(frame(f) for f in quick) + oversize)
    assert closed and len(frames) == 2
    assert decode_response(api_versions, 2, frames[0])[0] == 11 and decode_response(metadata, 8, frames[1])[0] == 12
    # a request that waits (CreateTopics waits for the new partitions' leaders) before the oversize frame
    slow = encode_request(create_topics, 4, 13, "it", {"topics": [
        {"name": "made-before-the-close", "num_partitions": 3, "replication_factor": 1, "assignments": [],
         "configs": []}], "timeout_ms": 20000, "validate_only": False})
    frames, closed = answers_then_close(address, frame(slow) + oversize)
    assert closed and len(frames) == 1
    cid, resp = decode_response(create_topics, 4, frames[0])
    assert cid == 13 and resp.topics[0].error_code == 0
    # a negative size is as unreadable as a huge one
    frames, closed = answers_then_close(address, frame(quick[0]) + struct.pack(">i", -1))
    assert closed and len(frames) == 1
    assert_still_serving(broker)


def test_unknown_api_keys_and_unsupported_versions(broker):
    address = broker.broker_address(1)
    # Kafka cannot parse the header of an unknown key, nor the body of an unsupported version: it closes
    for data in (header_v1(99, 0), header_v1(-1, 0), header_v1(32767, 3), header_v1(3, 99) + b"\x00",
                 header_v1(3, -1), header_v1(0, 100) + b"\x00"):
        frames, closed = answers_then_close(address, frame(data))
        assert (frames, closed) == ([], True), data
    # ApiVersions at a version it does not know: a v0 answer with UNSUPPORTED_VERSION and the table
    for version in (4, 99, -1):
        frames, closed = answers_then_close(address, frame(header_v1(18, version, correlation_id=21) + b"junk"))
        assert not closed and len(frames) == 1
        cid, resp = decode_response(api_versions, 0, frames[0])
        assert cid == 21 and resp.error_code == 35
        assert {k.api_key for k in resp.api_keys} >= {0, 1, 3, 18, 19}
    assert_still_serving(broker)


MALFORMED = [
    ("empty frame", b""),
    ("3-byte header", b"\x00\x03\x00"),
    ("client id longer than the frame", struct.pack(">hhih", 3, 1, 1, 500) + b"ab"),
    ("client id length -2", struct.pack(">hhih", 3, 1, 1, -2)),
    ("client id not UTF-8", struct.pack(">hhih", 3, 1, 1, 2) + b"\xff\xfe" + struct.pack(">i", 0)),
    ("array of 2**31-1 topics in a 4-byte body", header_v1(3, 1) + struct.pack(">i", 2**31 - 1)),
    ("array length -5", header_v1(3, 1) + struct.pack(">i", -5)),
    ("string longer than the frame", header_v1(3, 1) + struct.pack(">ih", 1, 30000) + b"abc"),
    ("string length -3", header_v1(3, 1) + struct.pack(">ih", 1, -3)),
    ("truncated body", header_v1(19, 4) + struct.pack(">i", 1) + string16("half")),
    ("compact array length of 2**32", struct.pack(">hhih", 3, 9, 1, 1) + b"x\x00" + b"\xff\xff\xff\xff\x0f"),
    ("tagged field longer than the frame", struct.pack(">hhih", 3, 9, 1, 1) + b"x\x01\x05\xff\xff\xff\x0f"),
    ("varint of 10 bytes", struct.pack(">hhih", 3, 9, 1, 1) + b"x\x00" + b"\xff" * 10),
]


@pytest.mark.parametrize("what, data", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_frames_close_that_connection_with_one_log_line(broker, what, data):
    log_path = broker.brokers[1].log_path
    size_before = log_path.stat().st_size
    other = RawClient(broker.broker_address(1))   # another client's connection stays open
    try:
        assert other.request(api_versions, 0, {}).error_code == 0
        frames, closed = answers_then_close(broker.broker_address(1), frame(data))
        assert (frames, closed) == ([], True)
        assert other.request(api_versions, 0, {}).error_code == 0
    finally:
        other.close()
    with open(log_path, "rb") as f:
        f.seek(size_before)
        lines = [ln for ln in f.read().decode(errors="replace").splitlines() if "closing connection" in ln]
    assert len(lines) == 1, lines
    assert_still_serving(broker)


# ---------------------------------------------------------------- old clients' message sets (magic 0/1)

def _legacy_cases() -> list[tuple[str, int, bytes, int]]:
    good = build_set(1, NONE, [(0, int(time.time() * 1000), b"k", b"v")] * 2)
    return [
        ("bad CRC", 2, good[:-1] + b"w", ErrorCode.CORRUPT_MESSAGE),
        ("truncated message", 2, good[:-4], ErrorCode.CORRUPT_MESSAGE),
        ("bad gzip payload", 2, encode_message(0, 1, GZIP, 0, None, b"\x1f\x8b not really"),
         ErrorCode.CORRUPT_MESSAGE),
        ("bad magic-0 lz4 payload", 1, encode_message(0, 0, LZ4, -1, None, b"\x04\x22\x4d\x18" + b"\x00" * 9),
         ErrorCode.CORRUPT_MESSAGE),
        ("null wrapper value", 0, encode_message(0, 0, GZIP, -1, None, None), ErrorCode.INVALID_RECORD),
        ("magic 1 in Produce v3", 3, good, ErrorCode.INVALID_RECORD),
    ]


LEGACY_TOPIC = "legacy-bad"


@pytest.mark.parametrize("what, version, records, code", _legacy_cases(), ids=[c[0] for c in _legacy_cases()])
def test_bad_legacy_message_sets_get_kafkas_codes_and_append_nothing(broker, what, version, records, code):
    c = RawClient(broker.broker_address(1))
    try:
        if create_topic(c, LEGACY_TOPIC).error_code == 0:
            leader_ready(c, LEGACY_TOPIC)

        def leo() -> int:
            body = {"replica_id": -1, "topics": [{"name": LEGACY_TOPIC, "partitions": [
                {"partition_index": 0, "timestamp": -1, "max_num_offsets": 1}]}]}
            return c.request(list_offsets, 1, body).topics[0].partitions[0].offset

        def produce_legacy(v: int, data: bytes):
            body = {"acks": -1, "timeout_ms": 10000, "topic_data": [
                {"name": LEGACY_TOPIC, "partition_data": [{"index": 0, "records": data}]}]}
            return c.request(produce, v, body).responses[0].partition_responses[0]

        before = leo()
        r = produce_legacy(version, records)
        assert (r.error_code, r.base_offset) == (code, -1), what
        assert leo() == before
        r = produce_legacy(1, build_set(0, NONE, [(0, -1, b"k", b"v")]))   # a good one right after
        assert (r.error_code, r.base_offset) == (0, before)
    finally:
        c.close()
    assert_still_serving(broker)
