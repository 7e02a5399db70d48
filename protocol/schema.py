"""Declarative Kafka message schemas compiled to ``construct`` types.

Invariant: a ``Message`` is an ordered list of ``Field`` declarations that mirrors a
Kafka JSON message declaration (names in snake_case). For every version it builds
(once, cached) one construct type that reads/writes exactly that version's wire layout:
fields outside the version are skipped on the wire and take their default on decode;
flexible versions use compact strings/bytes/arrays and a tagged-field section at the end
of every struct. ``decode`` raises only ``KafkaError`` (INVALID_REQUEST for malformed
input, UNSUPPORTED_VERSION for a version the message does not declare); ``encode``
raises ``EncodeError`` (a ``ValueError``) for values that cannot be written.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field as dc_field
from enum import Enum
from functools import lru_cache
from operator import itemgetter
from typing import IO, Any, Callable, Mapping, Sequence, Union

from construct import Construct, Float64b, Flag, Int8sb, Int16sb, Int16ub, Int32sb, Int32ub, Int64sb

from .errors import ErrorCode, KafkaError
from .primitives import (
    ZERO_UUID,
    KafkaArray,
    KafkaBytes,
    KafkaRecords,
    KafkaString,
    Uuid,
    read_tagged_section,
    write_tagged_section,
)

__all__ = [
    "Versions", "Type", "INT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "FLOAT64",
    "BOOL", "STRING", "BYTES", "RECORDS", "UUID", "ArrayOf", "StructOf", "Field", "F",
    "Message", "Struct", "EncodeError",
]


class EncodeError(ValueError):
    """A value could not be encoded for the requested message version."""


# ---------------------------------------------------------------------------
# version ranges
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Versions:
    """An inclusive version range as Kafka writes it: "3+", "0-4", "2", "none"."""

    low: int
    high: int  # inclusive; a large number for open ranges

    @classmethod
    def parse(cls, spec: "str | Versions | None") -> "Versions":
        if isinstance(spec, Versions):
            return spec
        if spec is None or spec == "none":
            return NO_VERSIONS
        spec = spec.strip()
        if spec.endswith("+"):
            return cls(int(spec[:-1]), 1 << 15)
        if "-" in spec:
            low, high = spec.split("-")
            return cls(int(low), int(high))
        return cls(int(spec), int(spec))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high


NO_VERSIONS = Versions(1, 0)


# ---------------------------------------------------------------------------
# field types
# ---------------------------------------------------------------------------

class Type(Enum):
    """Kafka's scalar field types (the JSON ``type`` strings)."""

    INT8 = "int8"
    INT16 = "int16"
    UINT16 = "uint16"
    INT32 = "int32"
    UINT32 = "uint32"
    INT64 = "int64"
    FLOAT64 = "float64"
    BOOL = "bool"
    STRING = "string"
    BYTES = "bytes"
    RECORDS = "records"
    UUID = "uuid"


INT8, INT16, UINT16, INT32, UINT32, INT64 = (
    Type.INT8, Type.INT16, Type.UINT16, Type.INT32, Type.UINT32, Type.INT64)
FLOAT64, BOOL, STRING, BYTES, RECORDS, UUID = (
    Type.FLOAT64, Type.BOOL, Type.STRING, Type.BYTES, Type.RECORDS, Type.UUID)

_FIXED: dict[Type, Construct] = {
    Type.INT8: Int8sb, Type.INT16: Int16sb, Type.UINT16: Int16ub, Type.INT32: Int32sb,
    Type.UINT32: Int32ub, Type.INT64: Int64sb, Type.FLOAT64: Float64b, Type.BOOL: Flag,
    Type.UUID: Uuid(),
}
_ZERO: dict[Type, Any] = {
    Type.INT8: 0, Type.INT16: 0, Type.UINT16: 0, Type.INT32: 0, Type.UINT32: 0,
    Type.INT64: 0, Type.FLOAT64: 0.0, Type.BOOL: False, Type.STRING: "", Type.BYTES: b"",
    Type.RECORDS: None, Type.UUID: ZERO_UUID,
}


@dataclass(frozen=True)
class ArrayOf:
    """An array of scalars, e.g. ``ArrayOf(INT32)`` for Kafka's ``[]int32``."""

    element: Type


@dataclass(frozen=True)
class StructOf:
    """A single (non-array) nested struct."""

    fields: tuple["Field", ...]

    def __init__(self, fields: Sequence["Field"]):
        object.__setattr__(self, "fields", tuple(fields))


FieldType = Union[Type, ArrayOf, StructOf, Sequence["Field"]]
_MISSING: Any = object()


@dataclass(frozen=True)
class Field:
    """One declared field. A list of Fields as ``type`` means an array of structs."""

    name: str
    type: Any
    versions: Versions = dc_field(default=Versions(0, 1 << 15))
    nullable: Versions = NO_VERSIONS
    default: Any = _MISSING
    tag: int | None = None
    tagged: Versions = NO_VERSIONS

    @property
    def struct_fields(self) -> tuple["Field", ...] | None:
        if isinstance(self.type, StructOf):
            return self.type.fields
        if isinstance(self.type, (list, tuple)):
            return tuple(self.type)
        return None


def F(name: str, type: FieldType, versions: str = "0+", *, nullable: str | None = None,  # noqa: N802
      default: Any = _MISSING, tag: int | None = None, tagged: str | None = None) -> Field:
    """Declare a field the way Kafka's JSON does: ``F("acks", INT16, "0+")``."""
    if isinstance(type, list):
        type = tuple(type)
    return Field(name, type, Versions.parse(versions), Versions.parse(nullable), default,
                 tag, Versions.parse(tagged))


# ---------------------------------------------------------------------------
# decoded values
# ---------------------------------------------------------------------------

class Struct(dict[str, Any]):
    """A decoded struct: a dict with attribute access (``s.topics[0].name``)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __repr__(self) -> str:
        return "Struct(" + ", ".join(f"{k}={v!r}" for k, v in self.items()) + ")"

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled (and deep-copied) as a plain Struct: a decoded struct's class is made at run time
        return (Struct, (dict(self),))


_DICT_NAMES = frozenset(dir(Struct))


@lru_cache(maxsize=None)
def record_class(names: tuple[str, ...]) -> type[Struct]:
    """The Struct subclass that decoding gives for a struct with these fields: each field is a
    class-level property reading its item (in C), so ``s.name`` does not first fail normal lookup
    and fall back to ``__getattr__`` (about 20 times the cost). Names that are dict methods stay
    dict methods, as on a plain Struct."""
    attrs: dict[str, Any] = {"__slots__": ()}
    for name in names:
        if name not in _DICT_NAMES and name.isidentifier():
            attrs[name] = property(itemgetter(name))
    return type("Struct", (Struct,), attrs)


Decoder = Callable[["bytes | memoryview", int], "tuple[Struct, int]"]   # (data, pos) -> (struct, end)
Encoder = Callable[[Mapping[str, Any], bytes], bytes]   # (body, head): head + the encoded body
BodyDecoder = Callable[..., "Struct"]   # Message.decoder(v): (data, offset=0, allow_trailing=False) -> body
BodyEncoder = Callable[..., bytes]      # Message.encoder(v): (body, head=b"") -> head + the encoded body


# ---------------------------------------------------------------------------
# per-version construct types
# ---------------------------------------------------------------------------

def _copy_default(value: Any) -> Any:
    if isinstance(value, Struct):
        return Struct((k, _copy_default(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_copy_default(v) for v in value]
    return value


def _copier(value: Any) -> Callable[[], Any]:
    """What returns fresh copies of a mutable default: one dict copy for a struct of plain values
    (the default of a struct-typed tagged field, copied into every element decoded without it:
    10,000 times per follower fetch response at 10,000 partitions), ``list`` for an empty list."""
    if isinstance(value, Struct) and not any(isinstance(v, (Struct, list)) for v in value.values()):
        cls = type(value)
        return lambda: cls(value)
    if isinstance(value, list) and not value:
        return list
    return lambda: _copy_default(value)


@dataclass
class _Slot:
    name: str
    con: Construct          # None only in the slot of a field absent at this version
    default: Any           # value template; copied for mutable values
    tag: int | None = None
    mutable: bool = dc_field(init=False)
    fresh_default: Callable[[], Any] = dc_field(init=False, repr=False, compare=False)   # the default, fresh

    def __post_init__(self) -> None:
        self.mutable = isinstance(self.default, (list, Struct))
        default = self.default
        self.fresh_default = _copier(default) if self.mutable else lambda: default


def _tag_of(slot: _Slot) -> int:
    """The tag number of a tagged field's slot (only tagged slots are asked)."""
    if slot.tag is None:
        raise ValueError(f"field {slot.name!r} is not tagged")
    return slot.tag


class KafkaStruct(Construct):  # type: ignore[misc]  # construct is untyped
    """One struct at one version: wire fields in order, then (flexible) tagged fields."""

    def __init__(self, wire: list[_Slot], absent: list[_Slot], tagged: list[_Slot],
                 flexible: bool):
        super().__init__()
        self.wire = wire
        self.absent = absent
        self.tagged = sorted(tagged, key=_tag_of)
        self.tagged_by_number = {_tag_of(s): s for s in self.tagged}
        self.flexible = flexible
        self.record = record_class(tuple(s.name for s in wire + absent + self.tagged))

    def _parse(self, stream: IO[bytes], context: Any, path: str) -> Any:
        result = self.record()
        for slot in self.wire:
            result[slot.name] = slot.con._parse(stream, context, path)
        for slot in self.absent:
            result[slot.name] = slot.fresh_default()
        if self.flexible:
            for slot in self.tagged:
                result[slot.name] = slot.fresh_default()
            for tag, raw in read_tagged_section(stream).items():
                known = self.tagged_by_number.get(tag)
                if known is not None:  # unknown tags are skipped, as Kafka does
                    result[known.name] = _parse_exact(known.con, raw)
        return result

    def _build(self, obj: Any, stream: IO[bytes], context: Any, path: str) -> Any:
        get = obj.get
        for slot in self.wire:
            value = get(slot.name, _MISSING)
            if value is _MISSING:
                value = slot.fresh_default()
            try:
                slot.con._build(value, stream, context, path)
            except EncodeError:
                raise
            except Exception as exc:
                raise EncodeError(f"field {slot.name!r}: {exc}") from exc
        if self.flexible:
            items: list[tuple[int, bytes]] = []
            for slot in self.tagged:
                value = get(slot.name, _MISSING)
                if value is _MISSING or value == slot.default:
                    continue
                sub = io.BytesIO()
                try:
                    slot.con._build(value, sub, context, path)
                except EncodeError:
                    raise
                except Exception as exc:
                    raise EncodeError(f"tagged field {slot.name!r}: {exc}") from exc
                items.append((_tag_of(slot), sub.getvalue()))
            write_tagged_section(stream, items)
        return obj


def _parse_exact(con: Construct, raw: bytes) -> Any:
    stream = io.BytesIO(raw)
    value = con._parse(stream, None, "(tagged)")
    if stream.tell() != len(raw):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "trailing bytes in tagged field")
    return value


class _Compiler:
    """Turns field declarations into construct types for one version."""

    def __init__(self, version: int, flexible: bool):
        self.version = version
        self.flexible = flexible

    def struct(self, fields: Sequence[Field]) -> KafkaStruct:
        wire, absent, tagged = [], [], []
        for f in fields:
            present = self.version in f.versions
            slot = _Slot(f.name, None, self.default(f), f.tag)
            if not present:
                absent.append(slot)
                continue
            slot.con = self.type_of(f)
            if self.flexible and f.tag is not None and self.version in f.tagged:
                tagged.append(slot)
            elif f.tag is not None and self.version in f.tagged:
                absent.append(slot)  # tagged-only field in a non-flexible version
            else:
                wire.append(slot)
        return KafkaStruct(wire, absent, tagged, self.flexible)

    def type_of(self, f: Field) -> Construct:
        nullable = self.version in f.nullable
        compact = self.flexible
        t = f.type
        sub = f.struct_fields
        if sub is not None:
            con = self.struct(sub)
            if isinstance(t, StructOf):
                return con
            return KafkaArray(con, nullable, compact)
        if isinstance(t, ArrayOf):
            return KafkaArray(self.scalar(t.element, False), nullable, compact)
        return self.scalar(t, nullable)

    def scalar(self, t: Type, nullable: bool) -> Construct:
        if t is Type.STRING:
            return KafkaString(nullable, self.flexible)
        if t is Type.BYTES:
            return KafkaBytes(nullable, self.flexible)
        if t is Type.RECORDS:
            return KafkaRecords(nullable, self.flexible)
        return _FIXED[t]

    def default(self, f: Field) -> Any:
        if f.default is not _MISSING:
            return f.default
        if self.version in f.nullable:
            return None
        sub = f.struct_fields
        if sub is not None:
            if isinstance(f.type, StructOf):
                return self.default_struct(sub)
            return []
        if isinstance(f.type, ArrayOf):
            return []
        return _ZERO[f.type]

    def default_struct(self, fields: Sequence[Field]) -> Struct:
        return Struct((f.name, self.default(f)) for f in fields)


class Message:
    """A Kafka request or response body declaration, valid for ``versions``."""

    def __init__(self, name: str, versions: str, fields: Sequence[Field],
                 flexible: str | None = None):
        self.name = name
        self.versions = Versions.parse(versions)
        self.flexible = Versions.parse(flexible)
        self.fields = tuple(fields)
        self._cache: dict[int, KafkaStruct] = {}
        self._compiled: dict[int, tuple[Decoder, Encoder]] = {}
        self._views: dict[int, Decoder] = {}
        self._parts: dict[int, Callable[..., Any]] = {}
        self._decoders: dict[int, BodyDecoder] = {}
        self._encoders: dict[int, BodyEncoder] = {}

    @property
    def min_version(self) -> int:
        return self.versions.low

    @property
    def max_version(self) -> int:
        return self.versions.high

    @property
    def flexible_from(self) -> int | None:
        return self.flexible.low if self.flexible is not NO_VERSIONS else None

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible

    def construct(self, version: int) -> KafkaStruct:
        """The construct type for ``version`` (built once, then cached)."""
        con = self._cache.get(version)
        if con is None:
            if version not in self.versions:
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                                 f"{self.name} has no version {version}")
            con = _Compiler(version, version in self.flexible).struct(self.fields)
            self._cache[version] = con
        return con

    def compiled(self, version: int) -> tuple[Decoder, Encoder]:
        """The compiled decoder and encoder of ``version`` (``protocol/compiled_codecs.py``): tried
        first; any exception from them means "not this input", and the declared codec decides."""
        codecs = self._compiled.get(version)
        if codecs is None:
            from .compiled_codecs import compile_decoder, compile_encoder
            con = self.construct(version)
            label = f"{self.name} v{version}"
            codecs = compile_decoder(con, label), compile_encoder(con, label)
            self._compiled[version] = codecs
        return codecs

    def views_decoder(self, version: int) -> Decoder:
        """The compiled decoder of ``version`` that reads a memoryview and leaves its RECORDS fields
        views into it (``compile_decoder(..., views=True)``)."""
        decoder = self._views.get(version)
        if decoder is None:
            from .compiled_codecs import compile_decoder
            decoder = self._views[version] = compile_decoder(self.construct(version), f"{self.name} v{version}",
                                                             views=True)
        return decoder

    def default(self, version: int) -> Struct:
        """A struct holding every field's default at ``version``."""
        return _Compiler(version, version in self.flexible).default_struct(self.fields)

    def encode(self, obj: Mapping[str, Any], version: int, head: bytes = b"") -> bytes:
        """Encode ``obj`` (missing fields take their defaults) as ``version``, after ``head`` (a
        header: joined with the body in one copy)."""
        return (self._encoders.get(version) or self.encoder(version))(obj, head)

    def encoder(self, version: int) -> BodyEncoder:
        """``encode`` of one version, its lookups done once: (obj, head) -> bytes."""
        encoder = self._encoders.get(version)
        if encoder is not None:
            return encoder
        try:
            compiled = self.compiled(version)[1]
        except KafkaError as exc:
            raise EncodeError(str(exc)) from None

        def encode(obj: Mapping[str, Any], head: bytes = b"") -> bytes:
            try:
                return compiled(obj, head)
            except Exception:
                return head + self.encode_declared(obj, version)   # not an input the compiled codec takes

        self._encoders[version] = encode
        return encode

    def encode_parts(self, obj: Mapping[str, Any], version: int, head: bytes = b"") -> "bytes | list[Any]":
        """``encode``, but RECORDS of at least 64 KiB are left unjoined: the bytes, or the list of
        parts whose concatenation they are (``compile_encoder(..., parts=True)``; a socket takes
        the parts as they are, so a fetch's records are copied only into the kernel)."""
        encode = self._parts.get(version)
        if encode is None:
            try:
                con = self.construct(version)
            except KafkaError as exc:
                raise EncodeError(str(exc)) from None
            from .compiled_codecs import compile_encoder
            encode = self._parts[version] = compile_encoder(con, f"{self.name} v{version}", parts=True)
        try:
            result: bytes | list[Any] = encode(obj, head)
            return result
        except Exception:
            return head + self.encode_declared(obj, version)   # not an input the compiled codec takes

    def encode_declared(self, obj: Mapping[str, Any], version: int) -> bytes:
        """``encode`` through the declared construct codec alone (the canonical answer)."""
        stream = io.BytesIO()
        try:
            self.construct(version)._build(obj, stream, None, self.name)
        except EncodeError as exc:
            raise EncodeError(f"{self.name} v{version}: {exc}") from exc.__cause__
        except Exception as exc:
            raise EncodeError(f"{self.name} v{version}: {exc}") from exc
        return stream.getvalue()

    def decode(self, data: bytes | bytearray | memoryview, version: int,
               offset: int = 0, allow_trailing: bool = False) -> Struct:
        """Decode a whole body (from ``offset`` to the end of ``data``).

        Malformed, truncated or (unless ``allow_trailing``) over-long input ->
        KafkaError(INVALID_REQUEST). Pass a ``bytes`` frame plus ``offset`` to avoid copying the body.
        From a ``memoryview`` (a lent frame, ``protocol/connection.py:FrameReader``), RECORDS fields
        are views into it, as long as the views decoder takes the input (else they are bytes).
        """
        return (self._decoders.get(version) or self.decoder(version))(data, offset, allow_trailing)

    def decoder(self, version: int) -> BodyDecoder:
        """``decode`` of one version, its lookups done once: (data, offset, allow_trailing) -> Struct."""
        decoder = self._decoders.get(version)
        if decoder is not None:
            return decoder
        compiled = self.compiled(version)[0]

        def decode(data: bytes | bytearray | memoryview, offset: int = 0, allow_trailing: bool = False) -> Struct:
            if type(data) is not bytes:
                if type(data) is memoryview and data.format == "B":
                    try:
                        result, end = self.views_decoder(version)(data, offset)
                        if end == len(data) or allow_trailing:
                            return result
                    except Exception:
                        pass   # the bytes decoders below decide
                data = bytes(data)  # BytesIO shares a bytes object; other buffers are copied
            try:
                result, end = compiled(data, offset)
                if end == len(data) or allow_trailing:
                    return result
            except Exception:
                pass   # not an input the compiled codec takes: the declared one decides
            return self.decode_declared(data, version, offset, allow_trailing)

        self._decoders[version] = decode
        return decode

    def decode_declared(self, data: bytes, version: int, offset: int = 0,
                        allow_trailing: bool = False) -> Struct:
        """``decode`` through the declared construct codec alone (the canonical answer or error)."""
        stream = io.BytesIO(data)
        if offset:
            stream.seek(offset)
        try:
            result: Struct = self.construct(version)._parse(stream, None, self.name)
        except KafkaError:
            raise
        except Exception as exc:  # construct, struct, unicode, overflow...
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"malformed {self.name} v{version}: {exc}") from None
        if stream.tell() != len(data) and not allow_trailing:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{len(data) - stream.tell()} "
                             f"trailing bytes after {self.name} v{version}")
        return result

    def __repr__(self) -> str:
        return f"Message({self.name!r}, {self.versions.low}-{self.versions.high})"

