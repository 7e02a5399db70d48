"""The one-partition Produce path (protocol/produce_one.py, produce.handle_one) against the general one.

Invariant: ``read_one_partition`` reads exactly what the declared codec decodes, for every request
of its shape, and declines everything else without raising; the frame reader in C
(``_frames.c``) answers every frame, whole or altered, bytes or a view, as the one in Python; ``encode_one_response`` writes the
declared codec's bytes; and a broker answering through the one-partition path gives, request for
request, the same response bytes and the same log as the general handler, for good requests and for
every kind of refusal, with and without an authorizer.
"""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from odradek.broker.apis import produce as produce_handler
from odradek.broker.apis.context import CloseConnection, RequestContext
from odradek.broker.config.kafka_config import LogConfig
from odradek.broker.network.request_handler import RequestHandler, Route
from odradek.broker.security.authorizer import AclAuthorizer
from odradek.protocol.acl import (CLUSTER_NAME, AccessControlEntry, AclOperation, AclPermissionType, PatternType,
                                  ResourcePattern, ResourceType)
from odradek.protocol import _frames, record_batch as rb
from odradek.protocol.apis import produce
from odradek.protocol.header import EncodedBody, RequestHeader, decode_request_header, encode_request, encode_response
from odradek.protocol.primitives import encode_uvarint
from odradek.protocol.produce_one import (OnePartitionProduce, _encode_answer_py, _read_frame_py, encode_answer,
                                          encode_one_response, read_one_partition, read_produce_frame)
from odradek.protocol.records import BatchBuilder

from broker_fixtures import Broker, batch

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
VERSIONS = st.integers(3, 9)
INT16 = st.integers(-(1 << 15), (1 << 15) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
NAMES = st.text(max_size=80)
RECORDS = st.none() | st.binary(max_size=300)


def partition_bodies() -> st.SearchStrategy[dict]:
    partitions = st.lists(st.fixed_dictionaries({"index": INT32, "records": RECORDS}), max_size=2)
    topics = st.lists(st.fixed_dictionaries({"name": NAMES, "partition_data": partitions}), max_size=2)
    return st.fixed_dictionaries({"transactional_id": st.none() | NAMES, "acks": INT16, "timeout_ms": INT32,
                                  "topic_data": topics})


def expected_one(body: dict, version: int) -> OnePartitionProduce | None:
    """What ``read_one_partition`` must return for ``body``: its fields when it has the shape."""
    topics = body["topic_data"]
    if body["transactional_id"] is not None or len(topics) != 1 or len(topics[0]["partition_data"]) != 1:
        return None
    name, [pd] = topics[0]["name"], topics[0]["partition_data"]
    if pd["records"] is None or (version >= 9 and len(name.encode()) >= 127):   # a two-byte name length
        return None
    return OnePartitionProduce(body["acks"], body["timeout_ms"], name, pd["index"], pd["records"])


@SETTINGS
@given(partition_bodies(), VERSIONS)
def test_the_one_partition_shape_is_read_as_the_declared_codec_reads_it(body, version):
    data = produce.Request.encode_declared(body, version)
    one = read_one_partition(b"prefix" + data, 6, version)
    assert one == expected_one(body, version)
    if one is not None:
        declared = produce.Request.decode_declared(data, version)
        [td] = declared.topic_data
        [pd] = td.partition_data
        assert (declared.acks, declared.timeout_ms, td.name, pd.index, pd.records) == tuple(one)


def one_partition_bodies() -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries({"transactional_id": st.none(), "acks": INT16, "timeout_ms": INT32,
                                  "topic_data": st.tuples(st.fixed_dictionaries({
                                      "name": st.text(max_size=40),
                                      "partition_data": st.tuples(st.fixed_dictionaries(
                                          {"index": INT32, "records": st.binary(max_size=80)})).map(list)}))
                                  .map(list)})


@SETTINGS
@given(one_partition_bodies(), VERSIONS, st.data())
def test_altered_frames_are_declined_or_read_as_the_declared_codec_reads_them(body, version, data):
    """Bytes flipped, cut, added or inserted (tagged fields included): never an exception, and
    whatever is read is what the declared codec decodes from the same bytes."""
    raw = bytearray(produce.Request.encode_declared(body, version))
    at = data.draw(st.integers(0, len(raw)))
    how = data.draw(st.sampled_from(["flip", "cut", "extend", "insert"]))
    if how == "flip" and at < len(raw):
        raw[at] ^= data.draw(st.integers(1, 255))
    elif how == "cut":
        del raw[at:]
    else:
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=4)) if how == "insert" else b""
        if how == "extend":
            raw += data.draw(st.binary(min_size=1, max_size=4))
    frame = bytes(raw)
    one = read_one_partition(frame, 0, version)
    if one is not None:
        declared = produce.Request.decode_declared(frame, version)
        [td] = declared.topic_data
        [pd] = td.partition_data
        assert declared.transactional_id is None
        assert (declared.acks, declared.timeout_ms, td.name, pd.index, pd.records) == tuple(one)


def test_other_versions_and_buffers_are_declined():
    body = {"acks": 1, "timeout_ms": 5, "topic_data": [{"name": "t", "partition_data": [
        {"index": 0, "records": b"x"}]}]}
    for version in (0, 1, 2, 10):
        if version <= 9:
            assert read_one_partition(produce.Request.encode_declared(body, version), 0, version) is None
    data = produce.Request.encode_declared(body, 8)
    assert read_one_partition(data, 0, 8) is not None
    assert read_one_partition(bytearray(data), 0, 8) is None
    assert read_one_partition(data[:-1], 0, 8) is None


def read_frame_c(frame):
    return _frames.read_frame(RequestHeader, OnePartitionProduce, frame)


def frames() -> st.SearchStrategy[bytes]:
    """Request frames: a Produce (sometimes another api key) of any version 0-10 with a header
    that may carry a null or non-UTF-8 client id or, in v9, tagged fields; then maybe altered."""
    @st.composite
    def build(draw) -> bytes:
        version = draw(st.integers(0, 10))
        body = draw(one_partition_bodies() if draw(st.booleans()) else partition_bodies())
        client = draw(st.none() | st.text(max_size=12))
        encoded_version = min(max(version, 3), 9)
        frame = bytearray(encode_request(produce, encoded_version, draw(INT32), client, body))
        frame[2:4] = version.to_bytes(2, "big")
        if draw(st.integers(0, 9)) == 0:
            frame[0:2] = draw(INT16).to_bytes(2, "big", signed=True)
        id_end = 10 + (len(client.encode()) if client is not None else 0)
        if draw(st.integers(0, 9)) == 0 and client:
            frame[10] = 0xFF   # no longer UTF-8
        if encoded_version == 9 and draw(st.booleans()):   # tagged fields in the request header
            tags = draw(st.lists(st.tuples(st.integers(0, 300), st.binary(max_size=5)), max_size=2))
            section = encode_uvarint(len(tags)) + b"".join(
                encode_uvarint(tag) + encode_uvarint(len(value)) + value for tag, value in tags)
            frame[id_end:id_end + 1] = section
        at = draw(st.integers(0, len(frame)))
        how = draw(st.sampled_from(["none", "none", "flip", "cut", "extend", "insert"]))
        if how == "flip" and at < len(frame):
            frame[at] ^= draw(st.integers(1, 255))
        elif how == "cut":
            del frame[at:]
        elif how in ("extend", "insert"):
            extra = draw(st.binary(min_size=1, max_size=4))
            frame[at:at] = extra if how == "insert" else b""
            if how == "extend":
                frame += extra
        return bytes(frame)
    return build()


@SETTINGS
@given(frames())
def test_the_frame_reader_in_c_answers_as_the_one_in_python(frame):
    want = _read_frame_py(frame)
    assert read_frame_c(frame) == want
    view = memoryview(bytearray(frame))
    got = read_frame_c(view)
    assert got == _read_frame_py(view) == want   # (a view's records compare by content)
    if got is not None:
        assert type(got[0]) is RequestHeader and type(got[1]) is OnePartitionProduce
        assert type(got[1].records) is memoryview and got[1].records.obj is view.obj   # a view, not a copy
        header, one = want
        assert one == read_one_partition(frame, decode_request_header(frame)[1], header.api_version)


def test_the_frame_reader_declines_other_buffers_and_is_the_one_in_use():
    frame = encode_request(produce, 8, 1, "c", {"acks": 1, "timeout_ms": 5, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"x"}]}]})
    assert read_produce_frame(frame) == (RequestHeader(0, 8, 1, "c"), OnePartitionProduce(1, 5, "t", 0, b"x"))
    assert read_produce_frame.func is _frames.read_frame and encode_answer is _frames.encode_answer   # built: in use
    for other in (bytearray(frame), memoryview(frame).cast("c"), memoryview(bytearray(frame * 2))[::2], "x"):
        assert read_frame_c(other) is None and _read_frame_py(other) is None
    with pytest.raises(TypeError):
        _frames.read_frame(dict, OnePartitionProduce, frame)


@SETTINGS
@given(VERSIONS, st.text(max_size=300), INT32, INT16, INT64, INT64, INT64, INT32)
def test_the_one_partition_answer_is_the_declared_codecs(version, topic, index, code, base, append_time, start,
                                                        correlation_id):
    body = {"responses": [{"name": topic, "partition_responses": [{
        "index": index, "error_code": code, "base_offset": base, "log_append_time_ms": append_time,
        "log_start_offset": start}]}], "throttle_time_ms": 0}
    assert encode_one_response(version, topic, index, code, base, append_time, start) == \
        produce.Response.encode_declared(body, version)
    whole = encode_response(produce, version, correlation_id, EncodedBody(produce.Response.encode_declared(body, version)))
    assert _frames.encode_answer(version, correlation_id, topic, index, code, base, append_time, start) == whole
    assert _encode_answer_py(version, correlation_id, topic, index, code, base, append_time, start) == whole


# ---------------------------------------------------------------- the broker: both paths, same answers

def keyed(n: int = 2, **fields) -> bytes:
    b = BatchBuilder(**fields)
    for i in range(n):
        b.append(1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i)
    return b.build()


def unkeyed() -> bytes:
    b = BatchBuilder()
    b.append(1_700_000_000_000, None, b"v")
    return b.build()


def corrupt_crc() -> bytes:
    raw = bytearray(keyed())
    raw[-1] ^= 1
    return bytes(raw)


def transactional() -> bytes:
    raw = bytearray(keyed(producer_id=7, producer_epoch=0, base_sequence=0))
    raw[22] |= rb.TRANSACTIONAL_MASK
    return bytes(raw)


def two_batches() -> bytes:
    return keyed() + keyed()


def magic_one() -> bytes:
    raw = bytearray(keyed())
    raw[16] = 1
    return bytes(raw)


def old_timestamp() -> bytes:
    b = BatchBuilder()
    b.append(1, b"k", b"v")
    return b.build()


# (name, topic, partition, acks, records, produced twice)
CASES = [
    ("ok", "t", 0, 1, keyed(), False),
    ("ok acks=-1", "t", 0, -1, keyed(), False),
    ("ok acks=0", "t", 0, 0, keyed(), False),
    ("idempotent, then its duplicate", "t", 0, 1, keyed(producer_id=5, producer_epoch=0, base_sequence=0), True),
    ("out of order sequence", "t", 0, 1, keyed(producer_id=5, producer_epoch=0, base_sequence=3), False),
    ("unknown topic", "nope", 0, 1, keyed(), False),
    ("unknown partition", "t", 9, 1, keyed(), False),
    ("led elsewhere", "elsewhere", 0, 1, keyed(), False),
    ("acks=2", "t", 0, 2, keyed(), False),
    ("empty records", "t", 0, 1, b"", False),
    ("short records", "t", 0, 1, b"\x00" * 20, False),
    ("magic 1", "t", 0, 1, magic_one(), False),
    ("crc", "t", 0, 1, corrupt_crc(), False),
    ("two batches", "t", 0, 1, two_batches(), False),
    ("transactional without an id", "t", 0, 1, transactional(), False),
    ("transactional without an id, acks=0", "t", 0, 0, transactional(), False),
    ("internal topic", "__consumer_offsets", 0, 1, keyed(), False),
    ("compacted without a key", "compacted", 0, 1, unkeyed(), False),
    ("timestamp out of range", "bounded", 0, 1, old_timestamp(), False),
    ("acks=0 failure", "nope", 0, 0, keyed(), False),
]


def allow(operation: AclOperation, resource_type: ResourceType, name: str) -> dict:
    return {ResourcePattern(resource_type, name, PatternType.LITERAL):
            frozenset({AccessControlEntry("User:ANONYMOUS", "*", operation, AclPermissionType.ALLOW)})}


def make_broker(tmp_path, name: str, acls: str) -> Broker:
    """A broker leading the cases' topics; ``acls``: "none" (no authorizer), "some" (Write on t,
    bounded and __consumer_offsets only) or "all" (Write on every topic, IdempotentWrite)."""
    b = Broker(tmp_path / name)
    b.log_manager._time = lambda: 1_700_000_000.0   # one clock for both brokers: answers quote it
    if acls != "none":
        b.ctx.authorizer = AclAuthorizer()
        topics = ["t", "bounded", "__consumer_offsets"] + (["compacted", "nope", "elsewhere"] if acls == "all" else [])
        for topic in topics:
            b.ctx.authorizer.apply(allow(AclOperation.WRITE, ResourceType.TOPIC, topic))
        if acls == "all":
            b.ctx.authorizer.apply(allow(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME))
    b.rm.log_configs["compacted"] = LogConfig.from_broker(b.config, {"cleanup.policy": "compact"})
    b.rm.log_configs["bounded"] = LogConfig.from_broker(b.config, {"message.timestamp.difference.max.ms": "60000"})
    b.set_metadata({"t": {0: (1, [1], [1])}, "elsewhere": {0: (2, [2], [2])}, "compacted": {0: (1, [1], [1])},
                    "bounded": {0: (1, [1], [1])}, "__consumer_offsets": {0: (1, [1], [1])}}, brokers=(1, 2))
    for topic in ("t", "compacted", "bounded", "__consumer_offsets"):
        b.lead(topic)
    return b


def answer(handler: RequestHandler, frame: bytes, one_partition: bool):
    """The broker's answer to ``frame`` (bytes, None or "close") through either path."""
    try:
        if one_partition:
            result = handler.handle(frame, "PLAINTEXT", "127.0.0.1:5555")
        else:
            header, offset = decode_request_header(frame)
            req = produce.Request.decode(frame, header.api_version, offset)
            rc = RequestContext(0, header.api_version, header.correlation_id, header.client_id, "PLAINTEXT",
                                "127.0.0.1:5555")
            result = handler._encode(produce_handler.handle(handler.ctx, rc, req), Route(produce_handler, header.api_version),
                                     header)
    except CloseConnection:
        return "close"
    return result


def log_bytes(broker: Broker) -> dict[str, bytes]:
    out = {}
    for topic in ("t", "compacted", "bounded"):
        seg = broker.log_manager.get_log((topic, 0)).active_segment
        out[topic] = seg.read(seg.base_offset, 1 << 20) or b""
    return out


@pytest.mark.parametrize("version, acls", [(3, "none"), (7, "none"), (8, "none"), (9, "none"), (8, "some"),
                                           (9, "all")])
def test_the_one_partition_path_answers_as_the_general_handler(tmp_path, monkeypatch, version, acls):
    fast, general = make_broker(tmp_path, "fast", acls), make_broker(tmp_path, "general", acls)
    try:
        fast_handler, general_handler = RequestHandler(fast.ctx), RequestHandler(general.ctx)
        real_handle = produce_handler.handle

        def not_taken(*args):
            raise AssertionError("the general Produce handler ran")

        for n, (name, topic, partition, acks, records, twice) in enumerate(CASES):
            body = {"acks": acks, "timeout_ms": 1000, "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
            frame = encode_request(produce, version, n, "client", body)
            assert read_one_partition(frame, decode_request_header(frame)[1], version) is not None, name
            for _ in range(2 if twice else 1):
                monkeypatch.setattr(produce_handler, "handle", not_taken)
                got = answer(fast_handler, frame, True)
                monkeypatch.setattr(produce_handler, "handle", real_handle)
                assert got == answer(general_handler, frame, False), name
        assert log_bytes(fast) == log_bytes(general)
        # three batches of 2 and the idempotent one once (without IdempotentWrite, not at all);
        # every refused batch changed nothing
        assert fast.log_manager.get_log(("t", 0)).log_end_offset == (6 if acls == "some" else 8)
    finally:
        fast.close()
        general.close()


def test_a_parked_acks_all_produce_is_answered_by_the_one_partition_path(tmp_path):
    b = Broker(tmp_path)
    try:
        b.lead("r", replicas=[1, 2], isr=[1, 2])
        frame = encode_request(produce, 8, 3, "c", {"acks": -1, "timeout_ms": 500, "topic_data": [
            {"name": "r", "partition_data": [{"index": 0, "records": batch(2)}]}]})
        result = RequestHandler(b.ctx).handle(frame)
        box: list = []
        result.add_callback(box.append)   # a Completion: what the socket layer waits on
        assert not box   # waits for the follower
        b.clock.advance(0.6)
        [response] = box
        assert struct.unpack(">i", response[:4]) == (3,)
        [pr] = produce.Response.decode(response, 8, 4).responses[0].partition_responses
        assert pr.error_code == 7 and pr.base_offset == 0   # REQUEST_TIMED_OUT, as Kafka answers
    finally:
        b.close()
