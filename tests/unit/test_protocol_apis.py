"""Every API, every declared version: round trips of requests and responses.

Values come from the schema itself (a realistic deterministic sample per version and
Hypothesis strategies), so a new field or version is covered without new test code.
"""
from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from odradek.protocol import apis
from odradek.protocol.apis import API_BY_KEY
from odradek.protocol.schema import ArrayOf, Field, Message, StructOf, Type

ADVERTISED = {
    0: (0, 9), 1: (0, 12), 2: (0, 6), 3: (0, 11), 4: (0, 5), 5: (0, 3), 6: (0, 7), 7: (0, 3),
    8: (0, 8), 9: (0, 7), 10: (0, 3), 11: (0, 7), 12: (0, 4), 13: (0, 4), 14: (0, 5),
    15: (0, 5), 16: (0, 4), 18: (0, 3), 19: (0, 7), 20: (0, 6), 21: (0, 2), 22: (0, 4), 23: (0, 4),
    24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3),
    17: (0, 1), 29: (0, 2), 30: (0, 2), 31: (0, 2), 32: (0, 4), 36: (0, 2), 37: (0, 3), 42: (0, 2),
    33: (0, 2), 34: (0, 2), 35: (0, 2), 43: (0, 2), 44: (0, 1), 45: (0, 0), 46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1), 50: (0, 0),
    51: (0, 0), 56: (0, 0), 57: (0, 0), 60: (0, 0), 61: (0, 0),
    38: (0, 2), 39: (0, 2), 40: (0, 2), 41: (0, 2),
}

CASES = [(api, message, v) for api in apis.ALL_APIS for message in (api.Request, api.Response)
         for v in range(message.min_version, message.max_version + 1)]


def case_id(case) -> str:
    api, message, v = case
    return f"{message.name}-v{v}"


_SCALAR_SAMPLES: dict[Type, Any] = {
    Type.INT8: 3, Type.INT16: 7, Type.UINT16: 65000, Type.INT32: 123456,
    Type.UINT32: 4000000000, Type.INT64: (1 << 40) + 5, Type.FLOAT64: 1.5, Type.BOOL: True,
    Type.BYTES: b"\x00\x01payload", Type.RECORDS: b"\x00" * 12 + b"opaque-batch",
    Type.UUID: uuid.UUID("5f0f1d52-2c3e-4b8a-9a55-0c1f6e2d4a10"),
}


def sample(fields, version: int, flexible: bool, depth: int = 0) -> dict[str, Any]:
    """A realistic, fully non-default value for every field present in ``version``."""
    out: dict[str, Any] = {}
    for i, f in enumerate(fields):
        if version not in f.versions:
            continue
        if f.tag is not None and version in f.tagged and not flexible:
            continue
        out[f.name] = sample_value(f, version, flexible, depth, i)
    return out


def sample_value(f: Field, version: int, flexible: bool, depth: int, index: int) -> Any:
    sub = f.struct_fields
    if sub is not None:
        if isinstance(f.type, StructOf):
            return sample(sub, version, flexible, depth + 1)
        return [sample(sub, version, flexible, depth + 1) for _ in range(2 if depth < 2 else 1)]
    if isinstance(f.type, ArrayOf):
        if f.type.element is Type.STRING:
            return ["alpha", "beta"]
        return [_SCALAR_SAMPLES[f.type.element] - k for k in range(3)]
    if f.type is Type.STRING:
        if version in f.nullable and index % 3 == 2:
            return None
        return f"{f.name}-{version}-é"
    if f.type is Type.INT32 and f.name.endswith(("error_code",)):
        return 3
    return _SCALAR_SAMPLES[f.type]


def expected_subset(sent: Any, got: Any) -> None:
    """Every value we sent comes back (decoded structs also hold absent-field defaults)."""
    if isinstance(sent, dict):
        for key, value in sent.items():
            assert key in got, key
            expected_subset(value, got[key])
    elif isinstance(sent, list):
        assert len(sent) == len(got)
        for a, b in zip(sent, got):
            expected_subset(a, b)
    else:
        assert sent == got


def test_api_registry_matches_advertised_ranges():
    assert {k: (m.MIN_VERSION, m.MAX_VERSION) for k, m in API_BY_KEY.items()} == ADVERTISED
    for api in apis.ALL_APIS:
        assert api.Request.max_version >= api.MAX_VERSION
        assert api.Response.max_version >= api.MAX_VERSION
        assert api.Request.flexible_from == api.FLEXIBLE_FROM == api.Response.flexible_from
        assert api.NAME + "Request" == api.Request.name


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_roundtrip_sample(case):
    api, message, v = case
    value = sample(message.fields, v, message.is_flexible(v))
    data = message.encode(value, v)
    decoded = message.decode(data, v)
    expected_subset(value, decoded)
    assert message.encode(decoded, v) == data
    # attribute access mirrors item access
    for key in value:
        assert getattr(decoded, key) == decoded[key]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_roundtrip_defaults(case):
    api, message, v = case
    data = message.encode({}, v)
    assert message.decode(data, v) == message.default(v)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_truncated_and_trailing_bytes_rejected(case):
    from odradek.protocol.errors import ErrorCode, KafkaError

    api, message, v = case
    data = message.encode(sample(message.fields, v, message.is_flexible(v)), v)
    step = max(1, len(data) // 40)
    for cut in range(0, len(data), step):
        with pytest.raises(KafkaError) as info:
            message.decode(data[:cut], v)
        assert info.value.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(KafkaError) as info:
        message.decode(data + b"\x00", v)
    assert info.value.code == ErrorCode.INVALID_REQUEST


# --- Hypothesis: schema-driven random values --------------------------------------------

_SCALAR_STRATEGIES = {
    Type.INT8: st.integers(-(2**7), 2**7 - 1),
    Type.INT16: st.integers(-(2**15), 2**15 - 1),
    Type.UINT16: st.integers(0, 2**16 - 1),
    Type.INT32: st.integers(-(2**31), 2**31 - 1),
    Type.UINT32: st.integers(0, 2**32 - 1),
    Type.INT64: st.integers(-(2**63), 2**63 - 1),
    Type.FLOAT64: st.floats(allow_nan=False),
    Type.BOOL: st.booleans(),
    Type.STRING: st.text(max_size=12),
    Type.BYTES: st.binary(max_size=40),
    Type.RECORDS: st.binary(max_size=200),
    Type.UUID: st.uuids(),
}


def strategy(fields, version: int, flexible: bool) -> st.SearchStrategy:
    members = {}
    for f in fields:
        if version not in f.versions:
            continue
        if f.tag is not None and version in f.tagged and not flexible:
            continue
        members[f.name] = field_strategy(f, version, flexible)
    return st.fixed_dictionaries(members)


def field_strategy(f: Field, version: int, flexible: bool) -> st.SearchStrategy:
    sub = f.struct_fields
    if sub is not None:
        inner = strategy(sub, version, flexible)
        base = inner if isinstance(f.type, StructOf) else st.lists(inner, max_size=3)
    elif isinstance(f.type, ArrayOf):
        base = st.lists(_SCALAR_STRATEGIES[f.type.element], max_size=5)
    else:
        base = _SCALAR_STRATEGIES[f.type]
    if version in f.nullable and not isinstance(f.type, StructOf):
        return st.one_of(st.none(), base)
    return base


HYPOTHESIS_CASES = [c for c in CASES if c[0].API_KEY in (0, 1, 3, 4, 6, 18, 19)]


@pytest.mark.parametrize("case", HYPOTHESIS_CASES, ids=case_id)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_roundtrip_hypothesis(case, data):
    api, message, v = case
    value = data.draw(strategy(message.fields, v, message.is_flexible(v)))
    encoded = message.encode(value, v)
    decoded = message.decode(encoded, v)
    expected_subset(value, decoded)
    assert message.encode(decoded, v) == encoded


def test_every_message_is_a_message():
    for api in apis.ALL_APIS:
        assert isinstance(api.Request, Message) and isinstance(api.Response, Message)
