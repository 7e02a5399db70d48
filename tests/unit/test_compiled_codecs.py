"""The compiled codecs (protocol/compiled_codecs.py) against the declared construct ones.

Invariant: property tests over every version of every declared message (each API's request and
response, the group, transaction and consumer-protocol records): bodies drawn from the version's
own declaration encode to the same bytes and decode to the same Struct (keys, order, values,
types) through both, and the compiled codec takes every such body without tagged fields (so it is
really used); from a memoryview, the views decoder gives the same with RECORDS fields left views
into it (and nothing else a view); bytes flipped, cut or extended, tagged fields and values the wire cannot hold get
from ``Message.decode``/``encode`` exactly the declared codec's answer or error. Each test runs
twice: with the compiled codecs in C (``protocol/_codecs.c``, which every message is read and
written by where it is built) and with the generated Python that stands in for them.
"""
from __future__ import annotations

import copy
import pickle
from functools import partial
from typing import Any, Callable

import pytest
from construct import Flag, FormatField
from hypothesis import HealthCheck, given, settings, strategies as st

from odradek.broker.group import assignment_protocol
from odradek.protocol import compiled_codecs, group_records, txn_records
from odradek.protocol.apis import API_BY_KEY
from odradek.protocol.errors import KafkaError
from odradek.protocol.compiled_codecs import LARGE_PART
from odradek.protocol.primitives import KafkaArray, KafkaBytes, KafkaRecords, KafkaString, Uuid
from odradek.protocol.schema import EncodeError, KafkaStruct, Message

MESSAGES: list[Message] = [m for api in API_BY_KEY.values() for m in (api.Request, api.Response)] + [
    group_records.OffsetCommitKey, group_records.OffsetCommitValue, group_records.GroupMetadataKey,
    group_records.GroupMetadataValue, txn_records.TransactionLogKey, txn_records.TransactionLogValue,
    assignment_protocol.Subscription, assignment_protocol.Assignment,
]
RANGES = {"b": 8, "h": 16, "i": 32, "l": 32, "q": 64}
SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(autouse=True, params=["c", "python"])
def compiled_in(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The compiled codecs in C, or (``python``) as the generated Python that runs without it."""
    def forget() -> None:
        for message in MESSAGES:
            message._compiled.clear()
            message._views.clear()
            message._parts.clear()
            message._decoders.clear()
            message._encoders.clear()
    if request.param == "python":
        monkeypatch.setattr(compiled_codecs, "_codecs", None)
    forget()
    yield request.param
    forget()


def test_every_message_is_read_and_written_in_c(compiled_in: str) -> None:
    if compiled_in == "python":
        assert all(type(m.compiled(m.max_version)[0]) is not partial for m in MESSAGES)
        return
    from odradek.protocol import _codecs
    for message in MESSAGES:
        for version in _declared_versions(message):
            decode, encode = message.compiled(version)
            assert type(decode) is partial and decode.func is _codecs.decode
            assert type(encode) is partial and encode.func is _codecs.encode
            assert message.views_decoder(version).func is _codecs.decode


def _declared_versions(message: Message) -> list[int]:
    return list(range(message.min_version, min(message.max_version, 40) + 1))


def _fixed(con: Any, wild: bool) -> st.SearchStrategy[Any]:
    if con is Flag:
        return st.booleans()
    char = con.fmtstr[1]
    if char == "d":
        return st.floats(allow_nan=False)
    if char in RANGES:
        bits = RANGES[char]
        values = st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    else:
        values = st.integers(0, (1 << (8 * con.length)) - 1)
    return values | st.sampled_from([1 << 70, 1.5, "1", None]) if wild else values


def _value(con: Any, tags: bool, wild: bool) -> st.SearchStrategy[Any]:
    """Values of one field at one version; ``tags``: tagged fields may differ from their default;
    ``wild``: sometimes a value the wire cannot hold."""
    if isinstance(con, (FormatField, type(Flag))):
        return _fixed(con, wild)
    if isinstance(con, Uuid):
        return st.uuids()
    if isinstance(con, KafkaString):
        values: st.SearchStrategy[Any] = st.text(max_size=4) | st.text(min_size=126, max_size=130)
    elif isinstance(con, KafkaBytes):
        values = st.binary(max_size=6) | st.binary(min_size=126, max_size=130)
    elif isinstance(con, KafkaArray):
        values = st.lists(_value(con.element, tags, wild), max_size=3)
    elif isinstance(con, KafkaStruct):
        return _struct(con, tags, wild)
    else:
        raise TypeError(con)
    if con.nullable:
        values = st.none() | values
    return values | st.sampled_from([None, 5, {"a": 1}]) if wild else values


def _struct(ks: KafkaStruct, tags: bool, wild: bool) -> st.SearchStrategy[dict[str, Any]]:
    fields = {slot.name: _value(slot.con, tags, wild) for slot in ks.wire}
    optional = {slot.name: _value(slot.con, tags, wild) for slot in ks.tagged} if tags else {}
    return st.fixed_dictionaries(fields, optional=optional)


def _unviewed(value: Any) -> Any:
    """``value`` with every memoryview in it made bytes (a views decoder's result, comparable)."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return type(value)((k, _unviewed(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_unviewed(v) for v in value]
    return value


def _views_only_in_records(con: Any, value: Any) -> None:
    """A views decoder's ``value`` of ``con``: RECORDS are views, no other field is one."""
    if isinstance(con, KafkaRecords):
        assert value is None or type(value) is memoryview
    elif isinstance(con, KafkaArray) and value is not None:
        for item in value:
            _views_only_in_records(con.element, item)
    elif isinstance(con, KafkaStruct):
        for slot in con.wire:
            _views_only_in_records(slot.con, value[slot.name])
    else:
        assert type(value) is not memoryview


def _outcome(call: Callable[[], Any]) -> tuple[str, str]:
    try:
        return "ok", repr(call())
    except (KafkaError, EncodeError) as e:
        return type(e).__name__, str(e)


def _message_id(message: Message) -> str:
    return message.name


@pytest.mark.parametrize("message", MESSAGES, ids=_message_id)
def test_every_declared_version_compiles(message: Message) -> None:
    for version in _declared_versions(message):
        decode, encode = message.compiled(version)
        assert decode(message.encode_declared({}, version), 0)[0] == message.decode_declared(
            message.encode_declared({}, version), version)


@pytest.mark.parametrize("message", MESSAGES, ids=_message_id)
@SETTINGS
@given(data=st.data())
def test_bodies_without_tagged_fields_take_the_compiled_path_with_the_same_result(
        message: Message, data: Any) -> None:
    version = data.draw(st.sampled_from(_declared_versions(message)))
    body = data.draw(_struct(message.construct(version), tags=False, wild=False))
    declared = message.encode_declared(body, version)
    decode, encode = message.compiled(version)
    assert encode(body) == declared == message.encode(body, version)
    result, end = decode(declared, 0)
    assert end == len(declared)
    canonical = message.decode_declared(declared, version)
    assert repr(result) == repr(canonical) == repr(message.decode(declared, version))
    assert type(result) is type(canonical)
    for name, value in result.items():   # each field reads as an attribute too
        if name not in dir(dict):
            assert getattr(result, name) is value
    assert repr(pickle.loads(pickle.dumps(result))) == repr(copy.deepcopy(result)) == repr(result)
    framed = b"hdr" + declared + b"tail"
    for trailing in (False, True):
        assert _outcome(lambda: message.decode(framed, version, 3, trailing)) == \
            _outcome(lambda: message.decode_declared(framed, version, 3, trailing))
    # from a view (a lent Produce frame): the same fields, RECORDS left views into it
    viewed, end = message.views_decoder(version)(memoryview(bytearray(declared)), 0)
    assert end == len(declared)
    assert repr(_unviewed(viewed)) == repr(canonical)
    _views_only_in_records(message.construct(version), viewed)
    assert repr(_unviewed(message.decode(memoryview(bytearray(framed)), version, 3, True))) == repr(canonical)


def _with_large_records(con: Any, value: Any, large: list[bytes]) -> Any:
    """``value`` of ``con`` with every RECORDS value in it replaced by a large one (kept in ``large``)."""
    if isinstance(con, KafkaRecords):
        if value is None:
            return None
        large.append(bytes([len(large) % 256]) * (LARGE_PART + len(large)))
        return large[-1]
    if isinstance(con, KafkaArray) and value is not None:
        return [_with_large_records(con.element, item, large) for item in value]
    if isinstance(con, KafkaStruct):
        return {**value, **{slot.name: _with_large_records(slot.con, value[slot.name], large) for slot in con.wire}}
    return value


def _has_records(con: Any) -> bool:
    if isinstance(con, KafkaArray):
        return _has_records(con.element)
    if isinstance(con, KafkaStruct):
        return any(_has_records(slot.con) for slot in con.wire)
    return isinstance(con, KafkaRecords)


WITH_RECORDS = [m for m in MESSAGES if _has_records(m.construct(m.max_version))]


def test_messages_with_records_are_the_produce_request_and_the_fetch_response() -> None:
    assert {m.name for m in WITH_RECORDS} == {"ProduceRequest", "FetchResponse"}


@pytest.mark.parametrize("message", WITH_RECORDS, ids=_message_id)
@SETTINGS
@given(data=st.data())
def test_parts_encoding_joins_to_the_declared_bytes_with_large_records_apart(message: Message, data: Any) -> None:
    version = data.draw(st.sampled_from(_declared_versions(message)))
    ks = message.construct(version)
    large: list[bytes] = []
    body = _with_large_records(ks, data.draw(_struct(ks, tags=False, wild=False)), large)
    encoded = message.encode_parts(body, version, b"head")
    joined = encoded if type(encoded) is bytes else b"".join(encoded)
    assert joined == b"head" + message.encode_declared(body, version) == message.encode(body, version, b"head")
    if large:   # each large RECORDS value is a part of its own, the very object given
        assert isinstance(encoded, list) and [p for p in encoded if len(p) >= LARGE_PART] == large
        assert all(any(p is value for p in encoded) for value in large)
    else:
        assert type(encoded) is bytes


@pytest.mark.parametrize("message", MESSAGES, ids=_message_id)
@SETTINGS
@given(data=st.data())
def test_any_bytes_and_any_body_get_the_declared_answer(message: Message, data: Any) -> None:
    version = data.draw(st.sampled_from(_declared_versions(message)))
    ks = message.construct(version)
    body = data.draw(_struct(ks, tags=True, wild=True))
    assert _outcome(lambda: message.encode(body, version)) == \
        _outcome(lambda: message.encode_declared(body, version))
    tame = data.draw(_struct(ks, tags=True, wild=False))
    raw = bytearray(message.encode_declared(tame, version))
    for _ in range(data.draw(st.integers(1, 4))):   # flip bytes, cut, or append
        choice = data.draw(st.sampled_from(("flip", "cut", "append")))
        if choice == "flip" and raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        elif choice == "cut" and raw:
            del raw[data.draw(st.integers(0, len(raw) - 1)):]
        else:
            raw += data.draw(st.binary(min_size=1, max_size=4))
    frame = bytes(raw)
    trailing = data.draw(st.booleans())
    assert _outcome(lambda: message.decode(frame, version, 0, trailing)) == \
        _outcome(lambda: message.decode_declared(frame, version, 0, trailing)) == \
        _outcome(lambda: _unviewed(message.decode(memoryview(raw), version, 0, trailing)))
