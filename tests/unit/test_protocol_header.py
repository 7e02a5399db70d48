"""Request/response headers: versions per API, golden bytes, garbage; the request header read in C
(``_frames.c:read_header``) answers as the Python reader does, or leaves the frame to it."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from odradek.protocol import _frames
from odradek.protocol.apis import (
    API_BY_KEY, api_versions, controlled_shutdown, fetch, leader_and_isr, metadata, produce,
)
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.header import (
    HEADER_TABLE_VERSIONS, RequestHeader, decode_request, decode_request_header, decode_response, encode_request,
    encode_response, header_reader, request_header_table, request_header_version, response_header_version,
)
from odradek.protocol.primitives import encode_uvarint


@pytest.mark.parametrize("key, version, expected", [
    (7, 0, 0), (7, 1, 1), (7, 3, 2),      # ControlledShutdown: v0 header only for v0
    (18, 2, 1), (18, 3, 2), (18, 4, 1),   # ApiVersions v4 is unsupported: header v1
    (3, 8, 1), (3, 9, 2), (0, 8, 1), (0, 9, 2), (4, 4, 2), (4, 3, 1),
    (999, 3, 1), (-5, 0, 1),              # unknown keys: header v1
])
def test_request_header_versions(key, version, expected):
    assert request_header_version(key, version) == expected


@pytest.mark.parametrize("key, version, expected", [
    (18, 0, 0), (18, 3, 0), (3, 8, 0), (3, 9, 1), (6, 6, 1), (6, 5, 0),
])
def test_response_header_versions(key, version, expected):
    assert response_header_version(key, version) == expected


def test_request_golden_v1():
    frame = encode_request(metadata, 1, 7, "cli", {"topics": None})
    assert frame.hex() == "0003" "0001" "00000007" "0003636c69" "ffffffff"
    assert decode_request_header(frame) == (RequestHeader(3, 1, 7, "cli"), 13)


def test_request_golden_v0_controlled_shutdown():
    frame = encode_request(controlled_shutdown, 0, 1, "ignored", {"broker_id": 2})
    assert frame.hex() == "0007" "0000" "00000001" "00000002"
    header, offset = decode_request_header(frame)
    assert header == RequestHeader(7, 0, 1, None) and offset == 8


def test_request_golden_v2_api_versions():
    frame = encode_request(api_versions, 3, 1, None, {
        "client_software_name": "odradek", "client_software_version": "0.1"})
    assert frame.hex() == ("0012" "0003" "00000001" "ffff" "00"
                           "08" + b"odradek".hex() + "04" + b"0.1".hex() + "00")
    header, body = decode_request(frame)
    assert header.client_id is None and body.client_software_name == "odradek"


def test_request_header_v2_tagged_fields_are_skipped():
    fixed = struct.pack(">hhih", 3, 9, 7, 1) + b"c"
    assert decode_request_header(fixed + b"\x00" + b"body") == (RequestHeader(3, 9, 7, "c"), 12)
    tagged = fixed + b"\x02" + b"\x00\x02xy" + b"\x05\x00" + b"body"   # two tags: 2 bytes, then none
    assert decode_request_header(tagged) == (RequestHeader(3, 9, 7, "c"), 18)


def test_response_golden_and_api_versions_exception():
    frame = encode_response(api_versions, 3, 5, {"api_keys": []})
    assert frame.hex() == "00000005" "0000" "01" "00000000" "00"  # header v0, no tag byte
    frame = encode_response(leader_and_isr, 4, 5, {"partition_errors": []})
    assert frame.hex() == "00000005" "00" "0000" "01" "00"  # header v1
    assert decode_response(leader_and_isr, 4, frame)[0] == 5


def test_unknown_api_header_still_decodes():
    frame = struct.pack(">hhih", 200, 9, 42, 2) + b"id" + b"\xde\xad"
    assert decode_request_header(frame) == (RequestHeader(200, 9, 42, "id"), 12)
    with pytest.raises(KafkaError) as info:
        decode_request(frame)
    assert info.value.code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("frame", [
    b"", b"\x00\x03", b"\x00\x03\x00\x01\x00\x00\x00",           # shorter than fixed part
    b"\x00\x03\x00\x01\x00\x00\x00\x01\x00",                     # half a length
    b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x05ab",               # truncated client id
    b"\x00\x03\x00\x01\x00\x00\x00\x01\xff\xfe",                 # length -2
    b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x02\xff\xff",         # invalid UTF-8
    b"\x00\x03\x00\x09\x00\x00\x00\x01\xff\xff",                 # v2 header without tags
    b"\x00\x03\x00\x09\x00\x00\x00\x01\xff\xff\x01\x00\x05ab",   # truncated tagged field
    b"\x00\x03\x00\x09\x00\x00\x00\x01\xff\xff\xff\xff\xff\xff\xff\x01",  # varint too long
])
def test_garbage_headers(frame):
    with pytest.raises(KafkaError) as info:
        decode_request_header(frame)
    assert info.value.code == ErrorCode.INVALID_REQUEST


READ_HEADER = header_reader()
KNOWN = sorted((key, version) for key, api in API_BY_KEY.items()
               for version in range(api.MIN_VERSION, api.MAX_VERSION + 1))


def python_answer(frame: bytes | memoryview) -> tuple[RequestHeader, int] | str:
    try:
        return decode_request_header(frame)
    except KafkaError:
        return "error"


@st.composite
def header_frames(draw) -> bytes:
    """A known API version's request header as a client writes it (a client id, maybe null or not
    UTF-8; v2 with tagged fields), then a body, then maybe cut, flipped or extended; sometimes
    another key or version."""
    key, version = draw(st.sampled_from(KNOWN))
    if draw(st.integers(0, 9)) == 0:
        key, version = draw(st.integers(-2, 70)), draw(st.integers(-2, 40))
    frame = bytearray(struct.pack(">hhi", key, version, draw(st.integers(-(1 << 31), (1 << 31) - 1))))
    header_version = request_header_version(key, version)
    if header_version >= 1:
        client = draw(st.none() | st.binary(max_size=8) | st.text(max_size=8).map(str.encode))
        frame += struct.pack(">h", -1) if client is None else struct.pack(">h", len(client)) + client
    if header_version >= 2:
        tags = draw(st.lists(st.tuples(st.integers(0, 300), st.binary(max_size=5)), max_size=2))
        frame += encode_uvarint(len(tags)) + b"".join(
            encode_uvarint(tag) + encode_uvarint(len(value)) + value for tag, value in tags)
    frame += draw(st.binary(max_size=6))
    how = draw(st.sampled_from(["none", "none", "cut", "flip"]))
    at = draw(st.integers(0, len(frame)))
    if how == "cut":
        del frame[at:]
    elif how == "flip" and at < len(frame):
        frame[at] ^= draw(st.integers(1, 255))
    return bytes(frame)


@settings(max_examples=500, deadline=None)
@given(header_frames())
def test_the_request_header_read_in_c_is_the_python_readers_or_left_to_it(frame):
    assert READ_HEADER is not None   # built: the broker reads headers with it
    want = python_answer(frame)
    for data in (frame, memoryview(bytearray(frame))):
        got = READ_HEADER(data)
        if got is not None:
            assert got == want and type(got[0]) is RequestHeader
        elif want != "error":   # a header it declines is one of an unknown key or version
            header = want[0]
            assert (header.api_key, header.api_version) not in KNOWN


def test_the_header_table_is_request_header_version_for_every_known_version():
    table = request_header_table()
    for key, version in KNOWN:
        assert table[key * HEADER_TABLE_VERSIONS + version] == request_header_version(key, version)
    assert sum(1 for b in table if b != 255) == len(KNOWN)
    assert READ_HEADER is not None and READ_HEADER.func is _frames.read_header
    with pytest.raises(TypeError):
        _frames.read_header(table, dict, b"\x00" * 10)


@given(st.binary(max_size=64))
def test_random_frames_never_crash(frame):
    try:
        decode_request(frame)
    except KafkaError as exc:
        assert exc.code in (ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_VERSION)


def test_request_roundtrip_flexible_and_memoryview():
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 10,
                                        "partition_max_bytes": 1 << 20}]}]}
    for version in (4, 11, 12):
        frame = encode_request(fetch, version, 3, "c", body)
        header, decoded = decode_request(memoryview(bytearray(frame)))
        assert header == RequestHeader(1, version, 3, "c")
        assert decoded.topics[0].partitions[0].fetch_offset == 10


def test_response_roundtrip_memoryview():
    body = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 5}]}]}
    frame = encode_response(produce, 8, 77, body)
    cid, decoded = decode_response(produce, 8, memoryview(frame))
    assert cid == 77 and decoded.responses[0].partition_responses[0].base_offset == 5
    with pytest.raises(KafkaError):
        decode_response(produce, 8, frame[:2])
    with pytest.raises(KafkaError):
        decode_response(produce, 8, frame + b"\x00")


def test_an_encoded_body_is_sent_exactly_as_the_same_body_encoded_per_request():
    """EncodedBody (an answer encoded once) gives the same bytes as encoding the body each time,
    for a response with header v0 (ApiVersions) and one with header v1 (a flexible Metadata)."""
    from odradek.protocol.apis import api_versions, metadata
    from odradek.protocol.header import EncodedBody, encode_response
    keys = [{"api_key": 0, "min_version": 0, "max_version": 9}, {"api_key": 18, "min_version": 0, "max_version": 3}]
    for v in range(4):
        body = {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0, "finalized_features_epoch": 3,
                "supported_features": [], "finalized_features": []}
        assert encode_response(api_versions, v, 42, EncodedBody.of(api_versions, v, body)) == \
            encode_response(api_versions, v, 42, body)
    body = {"throttle_time_ms": 0, "brokers": [], "cluster_id": "c", "controller_id": 1, "topics": []}
    assert encode_response(metadata, 11, 7, EncodedBody.of(metadata, 11, body)) == encode_response(metadata, 11, 7, body)


def test_the_broker_answers_api_versions_from_its_handlers_whatever_it_cached():
    import types
    from odradek.broker import apis
    from odradek.broker.features import FinalizedFeatures
    from odradek.broker.network.request_handler import RequestHandler
    from odradek.protocol import header
    from odradek.protocol.apis import api_versions
    features = FinalizedFeatures()
    handler = RequestHandler(types.SimpleNamespace(features=features, quotas=None, authorizer=None))
    for round_ in range(2):     # the second round is answered from the cache
        for v in range(4):
            frame = header.encode_request(api_versions, v, 100 + v, "t",
                                          {"client_software_name": "t", "client_software_version": "1"})
            cid, resp = header.decode_response(api_versions, v, handler.handle(frame))
            assert cid == 100 + v and resp.error_code == 0
            assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [
                (k["api_key"], k["min_version"], k["max_version"]) for k in apis.advertised_api_versions()]
            if v >= 3:
                assert resp.finalized_features_epoch == (7 if round_ else -1)
        features.update((1, {}, 7))   # /feature enabled at version 7: the v3 answer changes with it
