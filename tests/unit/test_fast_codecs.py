"""The hand-written Produce codecs (protocol/fast_codecs.py) against the declared ones.

Invariant: property tests over every version 0-9: the same bytes decode to the same Struct
(keys, order, values, types) through both, and the same bodies encode to the same bytes; where
the fast codec declines a shape, ``Message.decode``/``encode`` still answer exactly as the
declared codec does (the same result or the same error).
"""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st

from odradek.protocol import fast_codecs
from odradek.protocol.apis import produce as API
from odradek.protocol.errors import KafkaError
from odradek.protocol.schema import EncodeError, Message

VERSIONS = st.integers(0, 9)
INT16 = st.integers(-(1 << 15), (1 << 15) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
NAMES = st.text(max_size=140)


def _declared(message: Message, method: str, *args: Any) -> Any:
    """Run ``message.<method>`` with its fast codec switched off."""
    saved = message.fast_decode, message.fast_encode
    message.fast_decode = message.fast_encode = None
    try:
        return getattr(message, method)(*args)
    finally:
        message.fast_decode, message.fast_encode = saved


def _outcome(call: Any) -> tuple[str, str]:
    try:
        return "ok", repr(call())
    except (KafkaError, EncodeError) as e:
        return type(e).__name__, str(e)


def _check_variants(message: Message, version: int, data: bytes, tail: bytes, cut: int, trailing: bool) -> None:
    """Extra, cut and offset bytes decode through ``message`` exactly as the declared codec does."""
    for raw in (data + tail, data[:cut], b"hdr" + data + tail):
        offset = 3 if raw.startswith(b"hdr") else 0
        assert _outcome(lambda: message.decode(raw, version, offset, trailing)) == \
            _outcome(lambda: _declared(message, "decode", raw, version, offset, trailing))


requests = st.fixed_dictionaries({
    "transactional_id": st.none() | NAMES,
    "acks": INT16,
    "timeout_ms": INT32,
    "topic_data": st.lists(st.fixed_dictionaries({
        "name": NAMES,
        "partition_data": st.lists(st.fixed_dictionaries({
            "index": INT32, "records": st.none() | st.binary(max_size=300)}), max_size=4),
    }), max_size=4),
})


@settings(max_examples=150, deadline=None)
@given(VERSIONS, requests)
def test_a_request_decodes_to_the_same_struct(version: int, body: dict) -> None:
    if version < 3:
        body["transactional_id"] = None
    data = API.Request.encode(body, version)
    fast = fast_codecs.decode_request(data, version)
    assert repr(fast) == repr(_declared(API.Request, "decode", data, version))
    assert repr(API.Request.decode(data, version)) == repr(fast)
    framed = b"header" + data + b"tail"   # after a header, with trailing bytes allowed or not
    assert _outcome(lambda: API.Request.decode(framed[:-4], version, 6)) == ("ok", repr(fast))
    for trailing in (False, True):
        assert _outcome(lambda: API.Request.decode(framed, version, 6, trailing)) == \
            _outcome(lambda: _declared(API.Request, "decode", framed, version, 6, trailing))


@settings(max_examples=200, deadline=None)
@given(VERSIONS, requests, st.data())
def test_any_bytes_decode_as_the_declared_codec_does(version: int, body: dict, data: Any) -> None:
    if version < 3:
        body["transactional_id"] = None
    raw = bytearray(API.Request.encode(body, version))
    for _ in range(data.draw(st.integers(0, 4))):   # flip bytes, cut, or append
        choice = data.draw(st.sampled_from(("flip", "cut", "append")))
        if choice == "flip" and raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        elif choice == "cut" and raw:
            del raw[data.draw(st.integers(0, len(raw) - 1)):]
        else:
            raw += data.draw(st.binary(min_size=1, max_size=4))
    frame = bytes(raw)
    assert _outcome(lambda: API.Request.decode(frame, version)) == \
        _outcome(lambda: _declared(API.Request, "decode", frame, version))


partition_responses = st.fixed_dictionaries({
    "index": INT32, "error_code": INT16, "base_offset": INT64,
}, optional={
    "log_append_time_ms": INT64, "log_start_offset": INT64,
    "record_errors": st.lists(st.fixed_dictionaries({
        "batch_index": INT32, "batch_index_error_message": st.none() | NAMES}), max_size=2),
    "error_message": st.none() | NAMES,
})
responses = st.fixed_dictionaries({
    "responses": st.lists(st.fixed_dictionaries({
        "name": NAMES, "partition_responses": st.lists(partition_responses, max_size=4)}), max_size=4),
}, optional={"throttle_time_ms": INT32})


@settings(max_examples=200, deadline=None)
@given(VERSIONS, responses)
def test_a_response_encodes_to_the_same_bytes(version: int, body: dict) -> None:
    declared = _outcome(lambda: _declared(API.Response, "encode", body, version))
    assert _outcome(lambda: API.Response.encode(body, version)) == declared
    common = all(not p.get("record_errors") and p.get("error_message") is None
                 for t in body["responses"] for p in t["partition_responses"])
    if common and declared[0] == "ok" and all(len(t["name"].encode()) < 127 for t in body["responses"]):
        assert repr(fast_codecs.encode_response(body, version)) == declared[1]   # the fast one took it


@given(VERSIONS, st.sampled_from([1.5, "1", None, 1 << 70, True]))
def test_a_value_the_wire_cannot_hold_fails_as_declared(version: int, value: Any) -> None:
    body = {"responses": [{"name": "t", "partition_responses": [{"index": 0, "error_code": 0,
                                                                  "base_offset": value}]}]}
    assert _outcome(lambda: API.Response.encode(body, version)) == \
        _outcome(lambda: _declared(API.Response, "encode", body, version))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 3), NAMES, NAMES, st.binary(max_size=6), st.booleans())
def test_an_api_versions_request_decodes_as_declared(version: int, name: str, software: str, tail: bytes,
                                                     trailing: bool) -> None:
    from odradek.protocol.apis import api_versions
    message = api_versions.Request
    data = message.encode({"client_software_name": name, "client_software_version": software}, version)
    assert repr(fast_codecs.decode_api_versions_request(data, version)) == \
        repr(_declared(message, "decode", data, version))
    _check_variants(message, version, data, tail, len(tail), trailing)


heartbeats = st.fixed_dictionaries({"group_id": NAMES, "generation_id": INT32, "member_id": NAMES,
                                    "group_instance_id": st.none() | NAMES})


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 4), heartbeats, st.binary(max_size=6), st.booleans(), st.integers(0, 12))
def test_a_heartbeat_request_decodes_as_declared(version: int, body: dict, tail: bytes, trailing: bool,
                                                 cut: int) -> None:
    from odradek.protocol.apis import heartbeat
    message = heartbeat.Request
    if version < 3:
        body["group_instance_id"] = None
    data = message.encode(body, version)
    assert repr(fast_codecs.decode_heartbeat_request(data, version)) == \
        repr(_declared(message, "decode", data, version))
    _check_variants(message, version, data, tail, cut, trailing)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 4), st.fixed_dictionaries({}, optional={"throttle_time_ms": INT32 | st.just(1 << 40),
                                                              "error_code": INT16 | st.just("x")}))
def test_a_heartbeat_response_encodes_as_declared(version: int, body: dict) -> None:
    from odradek.protocol.apis import heartbeat
    declared = _outcome(lambda: _declared(heartbeat.Response, "encode", body, version))
    assert _outcome(lambda: heartbeat.Response.encode(body, version)) == declared
    if declared[0] == "ok":
        assert repr(fast_codecs.encode_heartbeat_response(body, version)) == declared[1]
