"""Request and response headers, and which header version each API version uses.

Invariant: request header v0 = api_key, api_version, correlation_id (ControlledShutdown
v0 only); v1 adds a NULLABLE_STRING client_id; v2 adds a tagged-field section (client_id
stays a classic int16 string). Flexible API versions use request header v2 and response
header v1 (correlation_id + tagged fields), except ApiVersions responses, which always
use response header v0. Nothing here adds the int32 frame-size prefix. ``header_reader`` is
``decode_request_header`` in C where that is built (``tests/unit/test_protocol_header.py`` holds
the two to the same answers).
"""
from __future__ import annotations

import io
import struct
from functools import partial
from types import ModuleType
from typing import Any, Callable, Mapping, NamedTuple

from .errors import ErrorCode, KafkaError
from .primitives import KafkaString, uvarint_at, write_tagged_section
from .schema import Struct

__all__ = [
    "RequestHeader", "request_header_version", "response_header_version",
    "decode_request_header", "encode_request_header", "encode_request", "encode_response",
    "response_encoder",
    "decode_response", "decode_request",
]

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7

_FIXED = struct.Struct(">hhi")
_new_tuple = tuple.__new__   # a NamedTuple without its __new__'s Python frame
_CORRELATION = struct.Struct(">i")
_I16 = struct.Struct(">h")
_CLIENT_ID = KafkaString(nullable=True, compact=False)


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


_API_BY_KEY: dict[int, ModuleType] = {}


def _api_module(api_key: int) -> ModuleType | None:
    if not _API_BY_KEY:
        from .apis import API_BY_KEY  # late import (once): apis import schema, not header
        _API_BY_KEY.update(API_BY_KEY)
    return _API_BY_KEY.get(api_key)


_REQUEST_HEADER_VERSION: dict[tuple[int, int], int] = {}   # (key, version) of known APIs -> header version
_RESPONSE_HEADER_VERSION: dict[tuple[int, int], int] = {}


def request_header_version(api_key: int, api_version: int) -> int:
    """Header version for a request; defined for unknown keys and versions too."""
    cached = _REQUEST_HEADER_VERSION.get((api_key, api_version))
    if cached is None:
        cached = _remember(_REQUEST_HEADER_VERSION, api_key, api_version, _request_header_version)
    return cached


def _remember(table: dict[tuple[int, int], int], api_key: int, api_version: int, compute: Any) -> int:
    """``compute(api_key, api_version)``, kept in ``table`` for a known API's declared version
    (so garbage keys and versions cannot grow it)."""
    version: int = compute(api_key, api_version)
    api = _api_module(api_key)
    if api is not None and api.MIN_VERSION <= api_version <= api.MAX_VERSION:
        table[(api_key, api_version)] = version
    return version


def _request_header_version(api_key: int, api_version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    api = _api_module(api_key)
    if api is None:
        return 1
    if api_key == API_VERSIONS_KEY:
        # Unsupported ApiVersions versions are answered without parsing the body, so
        # only a version we understand is read with the flexible header.
        supported = api.MIN_VERSION <= api_version <= api.MAX_VERSION
        return 2 if supported and api_version >= 3 else 1
    flexible_from = api.FLEXIBLE_FROM
    return 2 if flexible_from is not None and api_version >= flexible_from else 1


def response_header_version(api_key: int, api_version: int) -> int:
    cached = _RESPONSE_HEADER_VERSION.get((api_key, api_version))
    if cached is None:
        cached = _remember(_RESPONSE_HEADER_VERSION, api_key, api_version, _response_header_version)
    return cached


def _response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    api = _api_module(api_key)
    flexible_from = api.FLEXIBLE_FROM if api is not None else None
    return 1 if flexible_from is not None and api_version >= flexible_from else 0


def decode_request_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Parse a request header from a frame (no size prefix) -> (header, body_offset).

    Reads the frame in place (no copy of the body).
    """
    buf = frame if type(frame) is bytes else memoryview(frame).cast("B")
    try:
        api_key, api_version, correlation_id = _FIXED.unpack_from(buf, 0)
        offset = 8
        version = _REQUEST_HEADER_VERSION.get((api_key, api_version))
        if version is None:
            version = request_header_version(api_key, api_version)
        client_id = None
        if version >= 1:
            (length,) = _I16.unpack_from(buf, offset)
            offset += 2
            if length >= 0:
                end = offset + length
                if end > len(buf):
                    raise ValueError("truncated client_id")
                client_id = str(buf[offset:end], "utf-8")
                offset = end
            elif length != -1:
                raise ValueError(f"invalid client_id length {length}")
        if version >= 2:
            if buf[offset] == 0:   # no tagged fields: what every client sends
                return _new_tuple(RequestHeader, (api_key, api_version, correlation_id, client_id)), offset + 1
            offset = _after_tagged_section(buf, offset)
    except KafkaError:
        raise
    except Exception as exc:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"malformed request header: {exc}") from None
    return _new_tuple(RequestHeader, (api_key, api_version, correlation_id, client_id)), offset


HEADER_TABLE_VERSIONS = 32   # versions per api key in request_header_table (_frames.c's TABLE_VERSIONS)
HeaderReader = Callable[[bytes | memoryview], "tuple[RequestHeader, int] | None"]


def request_header_table() -> bytes:
    """The request header version of each declared version of each known API, at byte
    ``api_key * HEADER_TABLE_VERSIONS + api_version``; 255 where there is none."""
    from .apis import API_BY_KEY
    table = bytearray(b"\xff" * (HEADER_TABLE_VERSIONS * (max(API_BY_KEY) + 1)))
    for key, api in API_BY_KEY.items():
        for version in range(api.MIN_VERSION, min(api.MAX_VERSION, HEADER_TABLE_VERSIONS - 1) + 1):
            table[key * HEADER_TABLE_VERSIONS + version] = _request_header_version(key, version)
    return bytes(table)


def header_reader() -> HeaderReader | None:
    """``decode_request_header`` in C (``_frames.c:read_header``) for the known APIs' declared
    versions, answering exactly as it does, or None for any frame it leaves to it (another key or
    version, a header that does not decode: its error is the Python reader's); None when not built."""
    try:
        from ._frames import read_header
    except ImportError:
        return None
    return partial(read_header, request_header_table(), RequestHeader)


def _after_tagged_section(buf: bytes | memoryview, offset: int) -> int:
    """Where the tagged-field section at ``offset`` ends (a header's: its fields are skipped)."""
    count, offset = uvarint_at(buf, offset)
    for _ in range(count):
        _tag, offset = uvarint_at(buf, offset)
        size, offset = uvarint_at(buf, offset)
        offset += size
        if offset > len(buf):
            raise ValueError("truncated header tagged fields")
    return offset


def encode_request_header(api_key: int, api_version: int, correlation_id: int,
                          client_id: str | None, stream: io.BytesIO) -> None:
    version = request_header_version(api_key, api_version)
    stream.write(_FIXED.pack(api_key, api_version, correlation_id))
    if version >= 1:
        _CLIENT_ID._build(client_id, stream, None, "client_id")
    if version >= 2:
        write_tagged_section(stream, [])


def encode_request(api: ModuleType, version: int, correlation_id: int, client_id: str | None,
                   body: Mapping[str, Any]) -> bytes:
    """Request header + body for ``api`` at ``version`` (no size prefix)."""
    stream = io.BytesIO()
    encode_request_header(api.API_KEY, version, correlation_id, client_id, stream)
    stream.write(api.Request.encode(body, version))
    return stream.getvalue()


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, Struct]:
    """Header and body of a request for a known API and version (convenience)."""
    header, offset = decode_request_header(frame)
    api = _api_module(header.api_key)
    if api is None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown API key {header.api_key}")
    return header, api.Request.decode(frame, header.api_version, offset)


class EncodedBody(bytes):
    """A response body encoded once, ahead of time (an answer that does not change, such as
    ApiVersions'), which ``encode_response`` sends as it is after the response header."""

    @classmethod
    def of(cls, api: ModuleType, version: int, body: Mapping[str, Any]) -> "EncodedBody":
        return cls(api.Response.encode(body, version))


ResponseEncoder = Callable[[int, "Mapping[str, Any] | EncodedBody"], "bytes | list[Any]"]
_RESPONSE_ENCODERS: dict[tuple[int, int, bool], ResponseEncoder] = {}


def response_encoder(api: ModuleType, version: int, parts: bool = False) -> ResponseEncoder:
    """``encode_response`` of one API version, its lookups done once: (correlation id, body) ->
    response header + body. With ``parts``, RECORDS of 64 KiB or more are left parts of their own:
    the bytes, or the list of parts they join to (``Message.encode_parts``)."""
    key = (api.API_KEY, version, parts)
    cached = _RESPONSE_ENCODERS.get(key)
    if cached is not None:
        return cached
    message = api.Response
    encode = message.encoder(version)
    pack = _CORRELATION.pack
    tagged = response_header_version(api.API_KEY, version) >= 1   # then: no tagged fields, one byte

    def encoder(correlation_id: int, body: Mapping[str, Any] | EncodedBody) -> bytes | list[Any]:
        head = pack(correlation_id) + b"\x00" if tagged else pack(correlation_id)
        if isinstance(body, EncodedBody):
            return head + body
        if parts:
            result: bytes | list[Any] = message.encode_parts(body, version, head)
            return result
        framed: bytes = encode(body, head)   # one copy of the body, header included
        return framed

    _RESPONSE_ENCODERS[key] = encoder
    return encoder


def encode_response(api: ModuleType, version: int, correlation_id: int,
                    body: Mapping[str, Any] | EncodedBody) -> bytes:
    """Response header + body for ``api`` at ``version`` (no size prefix)."""
    return response_encoder(api, version)(correlation_id, body)   # type: ignore[return-value]


def decode_response(api: ModuleType, version: int,
                    frame: bytes | bytearray | memoryview) -> tuple[int, Struct]:
    """Parse a response frame (no size prefix) -> (correlation_id, body). Reads the frame in place:
    a lent frame (a memoryview, ``connection.py:FrameReader``) leaves RECORDS views into it."""
    buf = frame if type(frame) is bytes or type(frame) is memoryview else bytes(frame)
    try:
        (correlation_id,) = _CORRELATION.unpack_from(buf, 0)
        offset = 4
        if response_header_version(api.API_KEY, version) >= 1:
            offset = _after_tagged_section(buf, offset)
    except Exception as exc:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"malformed response header: {exc}") from None
    return correlation_id, api.Response.decode(buf, version, offset)
