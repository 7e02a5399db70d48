"""Kafka's wire primitives as ``construct`` types.

Invariant: every type here reads exactly the bytes it owns from the stream or raises
``construct.ConstructError`` (never returns a short value), and writes exactly the
bytes ``parse`` would consume back. Values are plain Python: ``int``, ``bool``, ``float``,
``str`` (UTF-8 on the wire), ``bytes`` (bytes-like accepted on build), ``uuid.UUID``,
``list`` and ``None`` for the nullable variants. Sizes are validated on both sides.

Classic (non-flexible) forms use fixed-width length prefixes; flexible (compact) forms
use an unsigned varint holding N+1, with 0 meaning null.
"""
from __future__ import annotations

import struct
import uuid
from typing import IO, Any

from construct import (
    Construct,
    ConstructError,
    Flag,
    Float64b,
    Int8sb,
    Int16sb,
    Int16ub,
    Int32sb,
    Int32ub,
    Int64sb,
)

__all__ = [
    "INT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "FLOAT64", "BOOLEAN",
    "UVarInt", "VarInt", "VarLong", "UVARINT", "VARINT", "VARLONG",
    "KafkaString", "KafkaBytes", "KafkaRecords", "KafkaArray", "Uuid", "UUID_TYPE", "ZERO_UUID",
    "TaggedFields", "read_uvarint", "uvarint_at", "write_uvarint", "encode_uvarint",
    "zigzag_encode", "zigzag_decode",
]

# Fixed-width integers, big-endian, as in Kafka's Type.java.
INT8 = Int8sb
INT16 = Int16sb
UINT16 = Int16ub
INT32 = Int32sb
UINT32 = Int32ub
INT64 = Int64sb
FLOAT64 = Float64b
BOOLEAN = Flag  # parses any non-zero byte as True, builds 0/1

ZERO_UUID = uuid.UUID(int=0)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class FormatError(ConstructError):  # type: ignore[misc]  # construct is untyped
    """Malformed or truncated Kafka primitive."""


def read_exact(stream: IO[bytes], n: int) -> bytes:
    """Read exactly ``n`` bytes or raise FormatError."""
    if n < 0:
        raise FormatError(f"negative length {n}")
    data = stream.read(n)
    if len(data) != n:
        raise FormatError(f"truncated: wanted {n} bytes, got {len(data)}")
    return data


# ---------------------------------------------------------------------------
# varints
# ---------------------------------------------------------------------------

def read_uvarint(stream: IO[bytes], max_bytes: int = 5) -> int:
    """Read an unsigned LEB128 varint of at most ``max_bytes`` bytes (5 = 32 bit)."""
    value = 0
    shift = 0
    read = stream.read
    for _ in range(max_bytes):
        b = read(1)
        if not b:
            raise FormatError("truncated varint")
        byte = b[0]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
        shift += 7
    raise FormatError("varint too long")


def uvarint_at(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """The unsigned varint of at most 5 bytes at ``pos`` of ``buf`` -> (value, next position);
    IndexError past the end, ValueError when longer."""
    value = 0
    for shift in (0, 7, 14, 21, 28):
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
    raise ValueError("varint too long")


def encode_uvarint(value: int) -> bytes:
    """Unsigned LEB128 encoding of a non-negative int."""
    if value < 0:
        raise FormatError(f"unsigned varint cannot hold {value}")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_uvarint(stream: IO[bytes], value: int) -> None:
    stream.write(encode_uvarint(value))


def zigzag_encode(value: int, bits: int) -> int:
    return (value << 1) ^ (value >> (bits - 1))


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


class UVarInt(Construct):  # type: ignore[misc]  # construct is untyped
    """Unsigned varint (LEB128); 5 bytes max for 32-bit values, 10 for 64-bit."""

    def __init__(self, bits: int = 32):
        super().__init__()
        self.bits = bits
        self.max_bytes = (bits + 6) // 7

    def _parse(self, stream: IO[bytes], context: Any, path: str) -> Any:
        value = read_uvarint(stream, self.max_bytes)
        if value >> self.bits:
            raise FormatError(f"varint exceeds {self.bits} bits")
        return value

    def _build(self, obj: Any, stream: IO[bytes], context: Any, path: str) -> Any:
        if not 0 <= obj < (1 << self.bits):
            raise FormatError(f"uvarint{self.bits} out of range: {obj}")
        stream.write(encode_uvarint(obj))
        return obj


class ZigZagVarInt(Construct):  # type: ignore[misc]  # construct is untyped
    """Signed zig-zag varint (``bits=32``: VARINT, ``bits=64``: VARLONG)."""

    def __init__(self, bits: int):
        super().__init__()
        self.bits = bits
        self.max_bytes = (bits + 6) // 7

    def _parse(self, stream: IO[bytes], context: Any, path: str) -> Any:
        raw = read_uvarint(stream, self.max_bytes)
        if raw >> self.bits:
            raise FormatError(f"varint exceeds {self.bits} bits")
        return zigzag_decode(raw)

    def _build(self, obj: Any, stream: IO[bytes], context: Any, path: str) -> Any:
        limit = 1 << (self.bits - 1)
        if not -limit <= obj < limit:
            raise FormatError(f"varint{self.bits} out of range: {obj}")
        stream.write(encode_uvarint(zigzag_encode(obj, self.bits)))
        return obj


def VarInt() -> ZigZagVarInt:  # noqa: N802 - construct-style factory
    return ZigZagVarInt(32)


def VarLong() -> ZigZagVarInt:  # noqa: N802
    return ZigZagVarInt(64)


UVARINT = UVarInt(32)
VARINT = ZigZagVarInt(32)
VARLONG = ZigZagVarInt(64)


# ---------------------------------------------------------------------------
# length-prefixed values
# ---------------------------------------------------------------------------

def _read_length(stream: IO[bytes], compact: bool, wide: bool) -> int:
    """Length prefix: -1 means null. Classic: int16 (strings) / int32 (bytes, arrays)."""
    if compact:
        return read_uvarint(stream) - 1
    n: int
    if wide:
        (n,) = _I32.unpack(read_exact(stream, 4))
    else:
        (n,) = _I16.unpack(read_exact(stream, 2))
    return n


def _write_length(stream: IO[bytes], n: int, compact: bool, wide: bool) -> None:
    if compact:
        stream.write(encode_uvarint(n + 1))
    elif wide:
        stream.write(_I32.pack(n))
    else:
        stream.write(_I16.pack(n))


class _LengthPrefixed(Construct):  # type: ignore[misc]  # construct is untyped
    wide = True

    def __init__(self, nullable: bool = False, compact: bool = False):
        super().__init__()
        self.nullable = nullable
        self.compact = compact

    def _length(self, stream: IO[bytes]) -> int | None:
        n = _read_length(stream, self.compact, self.wide)
        if n < 0:
            if n == -1 and self.nullable:
                return None
            raise FormatError(f"invalid length {n} for {'nullable ' if self.nullable else ''}"
                              f"{type(self).__name__}")
        return n

    def _null(self, stream: IO[bytes]) -> None:
        if not self.nullable:
            raise FormatError(f"null given for non-nullable {type(self).__name__}")
        _write_length(stream, -1, self.compact, self.wide)


class KafkaString(_LengthPrefixed):
    """STRING / NULLABLE_STRING (int16 length) or COMPACT_(NULLABLE_)STRING."""

    wide = False

    def _parse(self, stream: IO[bytes], context: Any, path: str) -> Any:
        n = self._length(stream)
        if n is None:
            return None
        return read_exact(stream, n).decode("utf-8")

    def _build(self, obj: Any, stream: IO[bytes], context: Any, path: str) -> Any:
        if obj is None:
            self._null(stream)
            return obj
        if isinstance(obj, str):
            data = obj.encode("utf-8")
        elif isinstance(obj, (bytes, bytearray, memoryview)):
            data = bytes(obj)
        else:
            raise FormatError(f"string expected, got {type(obj).__name__}")
        if len(data) > 0x7FFF:
            raise FormatError(f"string too long ({len(data)} bytes)")
        _write_length(stream, len(data), self.compact, False)
        stream.write(data)
        return obj


class KafkaBytes(_LengthPrefixed):
    """BYTES / NULLABLE_BYTES (int32 length) or COMPACT_(NULLABLE_)BYTES.

    Parses to ``bytes``; builds from any bytes-like object without re-encoding it.
    """

    def _parse(self, stream: IO[bytes], context: Any, path: str) -> Any:
        n = self._length(stream)
        if n is None:
            return None
        return read_exact(stream, n)

    def _build(self, obj: Any, stream: IO[bytes], context: Any, path: str) -> Any:
        if obj is None:
            self._null(stream)
            return obj
        view = memoryview(obj)
        _write_length(stream, view.nbytes, self.compact, True)
        stream.write(view)
        return obj


class KafkaRecords(KafkaBytes):
    """RECORDS: BYTES on the wire; a compiled decoder reading a memoryview leaves it a view into it."""


class KafkaArray(_LengthPrefixed):
    """ARRAY (int32 count, -1 = null) or COMPACT_ARRAY (uvarint N+1) of ``element``."""

    def __init__(self, element: Construct, nullable: bool = False, compact: bool = False):
        super().__init__(nullable, compact)
        self.element = element

    def _parse(self, stream: IO[bytes], context: Any, path: str) -> Any:
        n = self._length(stream)
        if n is None:
            return None
        parse = self.element._parse
        # Each element takes at least one byte, so a lying count fails on the first
        # missing element instead of allocating a huge list up front.
        return [parse(stream, context, path) for _ in range(n)]

    def _build(self, obj: Any, stream: IO[bytes], context: Any, path: str) -> Any:
        if obj is None:
            self._null(stream)
            return obj
        if isinstance(obj, (str, bytes, bytearray, dict)):
            raise FormatError(f"array expected, got {type(obj).__name__}")
        _write_length(stream, len(obj), self.compact, True)
        build = self.element._build
        for item in obj:
            build(item, stream, context, path)
        return obj


class Uuid(Construct):  # type: ignore[misc]  # construct is untyped
    """UUID: 16 raw bytes, as ``uuid.UUID`` (bytes-like of length 16 also accepted)."""

    def _parse(self, stream: IO[bytes], context: Any, path: str) -> Any:
        return uuid.UUID(bytes=read_exact(stream, 16))

    def _build(self, obj: Any, stream: IO[bytes], context: Any, path: str) -> Any:
        if isinstance(obj, uuid.UUID):
            data = obj.bytes
        elif isinstance(obj, (bytes, bytearray, memoryview)):
            data = bytes(obj)
        else:
            raise FormatError(f"UUID expected, got {type(obj).__name__}")
        if len(data) != 16:
            raise FormatError("UUID must be 16 bytes")
        stream.write(data)
        return obj


UUID_TYPE = Uuid()


class TaggedFields(Construct):  # type: ignore[misc]  # construct is untyped
    """A tagged-field section: uvarint count, then (uvarint tag, uvarint size, bytes).

    Standalone it parses to ``{tag: raw_bytes}`` and builds from such a dict (sorted by
    tag); the schema layer decodes known tags with their own types.
    """

    def _parse(self, stream: IO[bytes], context: Any, path: str) -> Any:
        return read_tagged_section(stream)

    def _build(self, obj: Any, stream: IO[bytes], context: Any, path: str) -> Any:
        write_tagged_section(stream, sorted((obj or {}).items()))
        return obj


def read_tagged_section(stream: IO[bytes]) -> dict[int, bytes]:
    count = read_uvarint(stream)
    fields: dict[int, bytes] = {}
    for _ in range(count):
        tag = read_uvarint(stream)
        size = read_uvarint(stream)
        fields[tag] = read_exact(stream, size)
    return fields


def write_tagged_section(stream: IO[bytes], items: list[tuple[int, bytes]]) -> None:
    stream.write(encode_uvarint(len(items)))
    for tag, data in items:
        stream.write(encode_uvarint(tag))
        stream.write(encode_uvarint(len(data)))
        stream.write(data)


def build_value(con: Construct, value: Any) -> bytes:
    """Build one value with ``con`` into bytes (helper for tagged fields and tests)."""
    import io

    stream = io.BytesIO()
    con._build(value, stream, None, "(building)")
    return stream.getvalue()


def parse_value(con: Construct, data: bytes) -> Any:
    """Parse ``data`` fully with ``con``; trailing bytes are an error."""
    import io

    stream = io.BytesIO(data)
    value = con._parse(stream, None, "(parsing)")
    if stream.tell() != len(data):
        raise FormatError(f"{len(data) - stream.tell()} trailing bytes")
    return value

