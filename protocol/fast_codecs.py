"""Hand-written ``struct`` codecs for the hottest messages (issue 17): ProduceRequest,
ProduceResponse, ApiVersionsRequest, HeartbeatRequest and HeartbeatResponse.

Invariant: exactly equivalent to the construct declarations in ``protocol/apis/produce.py``,
``api_versions.py`` and ``heartbeat.py`` for every version (Produce 0-9, flexible 9; ApiVersions
0-3, flexible 3; Heartbeat 0-4, flexible 4): the same bytes decode to equal ``Struct`` objects (same keys in
the same order, same values and types) and the same bodies encode to the same bytes, checked by
property tests (``tests/unit/test_fast_codecs.py``). They cover the common shapes only and raise
anything at all for the rest (malformed input, tagged fields, record errors, values the wire cannot
hold): ``Message.decode`` / ``encode_into`` then run the declared codec, which gives the canonical
result or error. So a fast codec can only ever be faster, never different.
"""
from __future__ import annotations

import struct
from typing import Any, Mapping

from .schema import Struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PARTITION_V0 = struct.Struct(">ihq")        # index, error_code, base_offset
_PARTITION_V2 = struct.Struct(">ihqq")       # + log_append_time_ms
_PARTITION_V5 = struct.Struct(">ihqqq")      # + log_start_offset
_THROTTLE_ERROR = struct.Struct(">ih")
FLEXIBLE_FROM = 9


class NotHandled(Exception):
    """A shape the fast codec leaves to the declared one."""


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    value, shift = byte & 0x7F, 7
    for _ in range(4):
        pos += 1
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos + 1
        shift += 7
    raise NotHandled("varint too long")


def _string(data: bytes, pos: int, flexible: bool, nullable: bool) -> tuple[str | None, int]:
    if flexible:
        n, pos = _uvarint(data, pos)
        n -= 1
    else:
        (n,) = _I16.unpack_from(data, pos)
        pos += 2
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise NotHandled("bad string length")
    end = pos + n
    if end > len(data):
        raise NotHandled("truncated string")
    return data[pos:end].decode("utf-8"), end


def _count(data: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    """A non-nullable array's element count (or a nullable bytes' length, -1 = null)."""
    if flexible:
        n, pos = _uvarint(data, pos)
        return n - 1, pos
    (n,) = _I32.unpack_from(data, pos)
    return n, pos + 4


def _no_tags(data: bytes, pos: int) -> int:
    if data[pos] != 0:
        raise NotHandled("tagged fields")
    return pos + 1


def decode_request(data: bytes, version: int, offset: int = 0, allow_trailing: bool = False) -> Struct:
    """A ProduceRequest body from ``data[offset:]`` (``Message.decode``'s contract)."""
    if not 0 <= version <= 9:
        raise NotHandled("version")
    flexible = version >= FLEXIBLE_FROM
    pos = offset
    transactional_id = None
    if version >= 3:
        transactional_id, pos = _string(data, pos, flexible, True)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(data, pos)
    pos += 6
    topics, pos = _count(data, pos, flexible)
    if topics < 0:
        raise NotHandled("null array")
    topic_data = []
    size = len(data)
    for _ in range(topics):
        name, pos = _string(data, pos, flexible, False)
        count, pos = _count(data, pos, flexible)
        if count < 0:
            raise NotHandled("null array")
        partition_data = []
        for _ in range(count):
            (index,) = _I32.unpack_from(data, pos)
            n, pos = _count(data, pos + 4, flexible)
            if n < 0:
                if n != -1:
                    raise NotHandled("bad length")
                records = None
            else:
                end = pos + n
                if end > size:
                    raise NotHandled("truncated records")
                records, pos = data[pos:end], end
            if flexible:
                pos = _no_tags(data, pos)
            partition_data.append(Struct(index=index, records=records))
        if flexible:
            pos = _no_tags(data, pos)
        topic_data.append(Struct(name=name, partition_data=partition_data))
    if flexible:
        pos = _no_tags(data, pos)
    if pos > size or (pos != size and not allow_trailing):
        raise NotHandled("trailing bytes")
    if version >= 3:
        return Struct(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=topic_data)
    return Struct(acks=acks, timeout_ms=timeout_ms, topic_data=topic_data, transactional_id=None)


def _put_string(out: list[bytes], value: str, flexible: bool) -> None:
    raw = value.encode("utf-8")
    _put_count(out, len(raw), flexible, _I16)
    out.append(raw)


def _put_count(out: list[bytes], n: int, flexible: bool, classic: struct.Struct = _I32) -> None:
    """An array's count (or, with ``classic`` int16, a string's length): a one-byte uvarint N+1
    when flexible (longer ones go to the declared codec)."""
    if flexible:
        if n >= 0x7F:
            raise NotHandled("long count")
        out.append(bytes((n + 1,)))
    else:
        out.append(classic.pack(n))


def encode_response(body: Mapping[str, Any], version: int) -> bytes:
    """A ProduceResponse body (``Message.encode_into``'s contract: missing fields take defaults)."""
    if not 0 <= version <= 9:
        raise NotHandled("version")
    flexible = version >= FLEXIBLE_FROM
    out: list[bytes] = []
    responses = body.get("responses", [])
    _put_count(out, len(responses), flexible)
    for topic in responses:
        _put_string(out, topic["name"], flexible)
        partitions = topic.get("partition_responses", [])
        _put_count(out, len(partitions), flexible)
        for p in partitions:
            get = p.get
            if version >= 5:
                out.append(_PARTITION_V5.pack(get("index", 0), get("error_code", 0), get("base_offset", 0),
                                              get("log_append_time_ms", -1), get("log_start_offset", -1)))
            elif version >= 2:
                out.append(_PARTITION_V2.pack(get("index", 0), get("error_code", 0), get("base_offset", 0),
                                              get("log_append_time_ms", -1)))
            else:
                out.append(_PARTITION_V0.pack(get("index", 0), get("error_code", 0), get("base_offset", 0)))
            if version >= 8:
                if get("record_errors", []) != [] or get("error_message") is not None:
                    raise NotHandled("record errors or an error message")
                out.append(b"\x01\x00\x00" if flexible else b"\x00\x00\x00\x00\xff\xff")
        if flexible:
            out.append(b"\x00")
    if version >= 1:
        out.append(_I32.pack(body.get("throttle_time_ms", 0)))
    if flexible:
        out.append(b"\x00")
    return b"".join(out)


def decode_api_versions_request(data: bytes, version: int, offset: int = 0, allow_trailing: bool = False) -> Struct:
    """An ApiVersionsRequest body from ``data[offset:]`` (``Message.decode``'s contract)."""
    if version == 3:
        name, pos = _string(data, offset, True, False)
        software, pos = _string(data, pos, True, False)
        pos = _no_tags(data, pos)
        if pos != len(data) and not allow_trailing:
            raise NotHandled("trailing bytes")
        return Struct(client_software_name=name, client_software_version=software)
    if 0 <= version <= 2 and (offset == len(data) or allow_trailing):
        return Struct(client_software_name="", client_software_version="")
    raise NotHandled("version or trailing bytes")


def decode_heartbeat_request(data: bytes, version: int, offset: int = 0, allow_trailing: bool = False) -> Struct:
    """A HeartbeatRequest body from ``data[offset:]`` (``Message.decode``'s contract)."""
    if not 0 <= version <= 4:
        raise NotHandled("version")
    flexible = version >= 4
    group_id, pos = _string(data, offset, flexible, False)
    (generation_id,) = _I32.unpack_from(data, pos)
    member_id, pos = _string(data, pos + 4, flexible, False)
    instance_id = None
    if version >= 3:
        instance_id, pos = _string(data, pos, flexible, True)
    if flexible:
        pos = _no_tags(data, pos)
    if pos > len(data) or (pos != len(data) and not allow_trailing):
        raise NotHandled("trailing bytes")
    return Struct(group_id=group_id, generation_id=generation_id, member_id=member_id,
                  group_instance_id=instance_id)


def encode_heartbeat_response(body: Mapping[str, Any], version: int) -> bytes:
    """A HeartbeatResponse body (``Message.encode_into``'s contract: missing fields take defaults)."""
    if version == 0:
        return _I16.pack(body.get("error_code", 0))
    if not 1 <= version <= 4:
        raise NotHandled("version")
    fixed = _THROTTLE_ERROR.pack(body.get("throttle_time_ms", 0), body.get("error_code", 0))
    return fixed + b"\x00" if version >= 4 else fixed
