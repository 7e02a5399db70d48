"""Compiled codecs: each declared message version turned into straight-line Python (issue 17).

Invariant: for a ``KafkaStruct`` (one message at one version, ``protocol/schema.py``) the compiled
decoder and encoder are exactly equivalent to the construct ones on every input they take: the
same bytes decode to equal ``Struct`` objects (same keys in the same order, same values and types)
and the same bodies encode to the same bytes. They raise something, anything, on every input they
do not take: malformed or truncated bytes, tagged fields present, values the wire cannot hold or of
unusual types (a ``str`` subclass, a bytes-like string, a set for an array). ``Message.decode`` /
``encode`` then run the declared construct codec, which gives the canonical answer or error. So a
compiled codec can only ever be faster, never different; property tests over every message and
version hold them to that (``tests/unit/test_compiled_codecs.py``). The one difference allowed is
the views decoder's (``compile_decoder(..., views=True)``, for a lent frame): from a
``memoryview`` it gives RECORDS fields as views into it, equal to the bytes the others give.

The generated code reads with a ``struct.Struct``'s ``unpack_from`` at a position in one ``bytes``
object (runs of fixed-width fields in one call, each format compiled once), and writes a list of
chunks joined once (a parts encoder leaves large RECORDS out of the join: ``compile_encoder``).
Where the C module ``_codecs`` is built, the same codecs run in C from a program of nested tuples
(``c_program``), three to six times faster; they answer as the generated Python does wherever they
take an input, and raise for a few more (a mapping that is not a dict, a number of another type
than the field's), which the declared codec then answers. The tests run with both.
"""
from __future__ import annotations

import keyword
import struct
import uuid
from functools import partial
from itertools import groupby
from types import ModuleType
from typing import Any, Iterator

from construct import Flag, FormatField

from .primitives import KafkaArray, KafkaBytes, KafkaRecords, KafkaString, Uuid, encode_uvarint, uvarint_at
from .schema import Decoder, KafkaStruct, _Slot

_codecs: ModuleType | None
try:
    from . import _codecs
except ImportError:   # built without a C compiler: the generated Python codecs run
    _codecs = None

_SMALL = tuple(bytes((i,)) for i in range(128))


LARGE_PART = 65536   # RECORDS this large stay a part of their own in a parts encoder's output


class Declined(Exception):
    """An input the compiled codec leaves to the declared one."""


def _fixed_char(con: Any) -> str | None:
    """The ``struct`` format character of a fixed-width construct, None for any other type."""
    if con is Flag:
        return "?"   # unpacks any non-zero byte as True and packs truthiness, as Flag does
    if isinstance(con, FormatField) and con.fmtstr[0] == ">" and len(con.fmtstr) == 2:
        return str(con.fmtstr[1])
    return None


class _Source:
    """Python source being generated, with the objects it refers to."""

    def __init__(self, views: bool = False) -> None:
        self.views = views   # a decoder of memoryviews (see compile_decoder)
        self.parts = False   # an encoder that leaves large RECORDS unjoined (see compile_encoder)
        self.lines: list[str] = []
        self.names: dict[str, Any] = {
            "Declined": Declined, "uvarint": uvarint_at, "unpack_from": struct.unpack_from,
            "pack": struct.pack, "SMALL": _SMALL, "encode_uvarint": encode_uvarint, "UUID": uuid.UUID,
        }
        self._count = 0
        self._bound_names: dict[tuple[str, str], str] = {}

    def var(self, prefix: str = "v") -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def const(self, value: Any) -> str:
        name = self.var("k")
        self.names[name] = value
        return name

    def packer(self, fmt: str) -> str:
        """The name of ``struct.Struct(fmt).pack``, bound once (``struct.pack(fmt, ...)`` looks the
        format up in struct's cache at every call)."""
        return self._bound("pack", fmt)

    def unpacker(self, fmt: str) -> str:
        """The name of ``struct.Struct(fmt).unpack_from``, bound once."""
        return self._bound("unpack_from", fmt)

    def _bound(self, method: str, fmt: str) -> str:
        key = (method, fmt)
        name = self._bound_names.get(key)
        if name is None:
            name = self._bound_names[key] = self.const(getattr(struct.Struct(fmt), method))
        return name

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def function(self, name: str, label: str) -> Any:
        """Define the generated source, which defines ``name``, and return that function."""
        namespace = dict(self.names)
        exec(compile("\n".join(self.lines), f"<compiled {label}>", "exec"), namespace)  # noqa: S102
        return namespace[name]


def _struct_call(src: _Source, ks: KafkaStruct, names: list[str], values: list[str]) -> str:
    record = src.const(ks.record)
    if all(n.isidentifier() and not keyword.iskeyword(n) for n in names):
        return record + "(" + ", ".join(f"{n}={v}" for n, v in zip(names, values)) + ")"
    return record + "({" + ", ".join(f"{n!r}: {v}" for n, v in zip(names, values)) + "})"


# ---------------------------------------------------------------------------
# decoding
# ---------------------------------------------------------------------------

def _decode_length(src: _Source, d: int, n: str, compact: bool, wide: bool) -> None:
    if compact:
        src.emit(d, f"{n} = data[pos]")
        src.emit(d, f"if {n} < 128:")
        src.emit(d + 1, "pos += 1")
        src.emit(d, "else:")
        src.emit(d + 1, f"{n}, pos = uvarint(data, pos)")
        src.emit(d, f"{n} -= 1")
    else:
        src.emit(d, f"{n}, = {src.unpacker('>i' if wide else '>h')}(data, pos)")
        src.emit(d, f"pos += {4 if wide else 2}")


def _decode_null(src: _Source, d: int, n: str, out: str, nullable: bool) -> None:
    """After a length ``n``: null (-1 when nullable) or decline; the ``else:`` branch follows."""
    src.emit(d, f"if {n} < 0:")
    if nullable:
        src.emit(d + 1, f"if {n} != -1:")
        src.emit(d + 2, "raise Declined")
        src.emit(d + 1, f"{out} = None")
    else:
        src.emit(d + 1, "raise Declined")
    src.emit(d, "else:")


def _decode_value(src: _Source, d: int, con: Any, out: str) -> None:
    """Code at depth ``d`` that reads one value of ``con`` at ``pos`` into variable ``out``."""
    char = _fixed_char(con)
    if char is not None:
        src.emit(d, f"{out}, = {src.unpacker('>' + char)}(data, pos)")
        src.emit(d, f"pos += {struct.calcsize('>' + char)}")
    elif isinstance(con, Uuid):
        end = src.var("e")
        src.emit(d, f"{end} = pos + 16")
        src.emit(d, f"if {end} > size:")
        src.emit(d + 1, "raise Declined")
        src.emit(d, f"{out} = UUID(bytes=bytes(data[pos:{end}]))" if src.views else
                 f"{out} = UUID(bytes=data[pos:{end}])")
        src.emit(d, f"pos = {end}")
    elif isinstance(con, (KafkaString, KafkaBytes)):
        n, end = src.var("n"), src.var("e")
        _decode_length(src, d, n, con.compact, isinstance(con, KafkaBytes))
        _decode_null(src, d, n, out, con.nullable)
        src.emit(d + 1, f"{end} = pos + {n}")
        src.emit(d + 1, f"if {end} > size:")
        src.emit(d + 2, "raise Declined")
        value = f"data[pos:{end}]"
        if isinstance(con, KafkaString):
            value = f"str({value}, 'utf-8')" if src.views else value + ".decode('utf-8')"
        elif src.views and not isinstance(con, KafkaRecords):
            value = f"bytes({value})"
        src.emit(d + 1, f"{out} = {value}")
        src.emit(d + 1, f"pos = {end}")
    elif isinstance(con, KafkaArray):
        n = src.var("n")
        _decode_length(src, d, n, con.compact, True)
        _decode_null(src, d, n, out, con.nullable)
        src.emit(d + 1, f"if {n} > size - pos:")   # a lying count: the declared codec answers
        src.emit(d + 2, "raise Declined")
        element = _fixed_char(con.element)
        if element is not None:
            src.emit(d + 1, f"{out} = list(unpack_from('>%d{element}' % {n}, data, pos))")
            src.emit(d + 1, f"pos += {struct.calcsize('>' + element)} * {n}")
        else:
            item = src.var("i")
            src.emit(d + 1, f"{out} = []")
            src.emit(d + 1, "for _ in range(" + n + "):")
            _decode_value(src, d + 2, con.element, item)
            src.emit(d + 2, f"{out}.append({item})")
    elif isinstance(con, KafkaStruct):
        _decode_struct(src, d, con, out)
    else:
        raise TypeError(f"no compiled decoder for {con!r}")


def _wire_runs(ks: KafkaStruct) -> Iterator[tuple[str | None, list[_Slot]]]:
    """The struct's wire fields in order, as (the struct format of a run of fixed-width fields,
    read or written in one call, and its slots) or (None, [one slot of another type])."""
    for fixed, group in groupby(ks.wire, key=lambda slot: _fixed_char(slot.con) is not None):
        slots = list(group)
        if fixed:
            yield ">" + "".join(str(_fixed_char(slot.con)) for slot in slots), slots
        else:
            yield from ((None, [slot]) for slot in slots)


def _decode_struct(src: _Source, d: int, ks: KafkaStruct, out: str) -> None:
    names: list[str] = []
    values: list[str] = []
    for fmt, slots in _wire_runs(ks):
        targets = [src.var() for _ in slots]
        if fmt is None:
            _decode_value(src, d, slots[0].con, targets[0])
        else:
            src.emit(d, f"{', '.join(targets)}, = {src.unpacker(fmt)}(data, pos)")
            src.emit(d, f"pos += {struct.calcsize(fmt)}")
        names += [slot.name for slot in slots]
        values += targets
    for slot in list(ks.absent) + list(ks.tagged):
        names.append(slot.name)
        values.append(f"{src.const(slot)}.fresh_default()" if slot.mutable else src.const(slot.default))
    if ks.flexible:   # an empty tagged-field section only; tags present go to the declared codec
        src.emit(d, "if data[pos]:")
        src.emit(d + 1, "raise Declined")
        src.emit(d, "pos += 1")
    src.emit(d, f"{out} = {_struct_call(src, ks, names, values)}")


def compile_decoder(ks: KafkaStruct, name: str, views: bool = False) -> Decoder:
    """A function ``(data, pos) -> (Struct, end)`` reading one ``ks`` from ``data`` at ``pos``,
    a ``bytes``; with ``views``, from a ``memoryview``, whose RECORDS fields it leaves views into
    ``data`` (every other field is what the ``bytes`` decoder gives). It runs in C
    (``protocol/_codecs.c``) where that is built, else it is ``compile_python_decoder``'s."""
    if _codecs is not None:
        try:
            return partial(_codecs.decode, c_program(ks), views)
        except TypeError:
            pass   # a type the C codec does not know: the generated Python reads it
    return compile_python_decoder(ks, name, views)


# codes of the ops of a C program (protocol/_codecs.c)
_FIXED_CODES = {"b": 0, "h": 1, "i": 2, "l": 2, "q": 3, "?": 4, "d": 5}
_UUID, _STRING, _BYTES, _RECORDS, _ARRAY, _STRUCT = range(6, 12)
_ZERO_UUID = uuid.UUID(int=0)


def c_program(ks: KafkaStruct) -> tuple[Any, ...]:
    """The program ``_codecs.decode`` and ``_codecs.encode`` read and write ``ks`` by (its layout:
    ``protocol/_codecs.c``); TypeError for a struct holding a type they do not know."""
    slots = list(ks.absent) + list(ks.tagged)
    return (ks.record, ks.flexible, tuple(_op(slot.con) for slot in ks.wire),
            tuple(slot.name for slot in list(ks.wire) + slots),
            tuple((slot.fresh_default, None) if slot.mutable else (None, slot.default) for slot in slots),
            tuple(slot.default for slot in ks.wire), tuple((slot.name, slot.default) for slot in ks.tagged))


def _op(con: Any) -> tuple[int, bool, bool, Any]:
    char = _fixed_char(con)
    if char in _FIXED_CODES:
        return _FIXED_CODES[char], False, False, None
    if isinstance(con, Uuid):
        return _UUID, False, False, (uuid.UUID, _ZERO_UUID)   # (UUIDs are immutable: one zero is shared)
    if isinstance(con, KafkaStruct):
        return _STRUCT, False, False, c_program(con)
    if isinstance(con, KafkaArray):
        code, argument = _ARRAY, _op(con.element)
    elif isinstance(con, (KafkaString, KafkaBytes)):
        code = _RECORDS if isinstance(con, KafkaRecords) else _BYTES if isinstance(con, KafkaBytes) else _STRING
        argument = None
    else:
        raise TypeError(f"no C codec for {con!r}")
    return code, bool(con.compact), bool(con.nullable), argument


def compile_python_decoder(ks: KafkaStruct, name: str, views: bool = False) -> Decoder:
    """``compile_decoder`` as generated Python."""
    src = _Source(views)
    src.emit(0, "def decode(data, pos):")
    src.emit(1, "size = len(data)")
    _decode_struct(src, 1, ks, "result")
    src.emit(1, "return result, pos")
    decoder: Decoder = src.function("decode", f"decoder of {name}")
    return decoder


# ---------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------

def _encode_length(src: _Source, d: int, n: str, compact: bool, wide: bool) -> None:
    if compact:
        src.emit(d, f"put(SMALL[{n} + 1] if {n} < 127 else encode_uvarint({n} + 1))")
    else:
        src.emit(d, f"put({src.packer('>i' if wide else '>h')}({n}))")


def _encode_null(src: _Source, d: int, value: str, con: Any) -> None:
    """``if value is None:`` write null or decline; the ``else:`` branch follows."""
    src.emit(d, f"if {value} is None:")
    if con.nullable:
        null = b"\x00" if con.compact else (b"\xff\xff\xff\xff" if con.wide else b"\xff\xff")
        src.emit(d + 1, f"put({null!r})")
    else:
        src.emit(d + 1, "raise Declined")
    src.emit(d, "else:")


def _encode_value(src: _Source, d: int, con: Any, value: str) -> None:
    """Code at depth ``d`` that writes ``value`` as ``con``."""
    char = _fixed_char(con)
    if char is not None:
        src.emit(d, f"put({src.packer('>' + char)}({value}))")
    elif isinstance(con, Uuid):
        src.emit(d, f"if type({value}) is not UUID:")
        src.emit(d + 1, "raise Declined")
        src.emit(d, f"put({value}.bytes)")
    elif isinstance(con, KafkaString):
        raw = src.var("b")
        _encode_null(src, d, value, con)
        src.emit(d + 1, f"if type({value}) is not str:")
        src.emit(d + 2, "raise Declined")
        src.emit(d + 1, f"{raw} = {value}.encode('utf-8')")
        src.emit(d + 1, f"if len({raw}) > 0x7FFF:")
        src.emit(d + 2, "raise Declined")
        _encode_length(src, d + 1, f"len({raw})", con.compact, False)
        src.emit(d + 1, f"put({raw})")
    elif isinstance(con, KafkaBytes):
        _encode_null(src, d, value, con)
        src.emit(d + 1, f"if type({value}) is not bytes:")
        src.emit(d + 2, f"{value} = memoryview({value}).cast('B')")
        _encode_length(src, d + 1, f"len({value})", con.compact, True)
        if src.parts and isinstance(con, KafkaRecords):   # large records: a part of their own, not copied
            src.emit(d + 1, f"if len({value}) >= LARGE_PART:")
            src.emit(d + 2, "parts.append(b''.join(out))")
            src.emit(d + 2, "out.clear()")
            src.emit(d + 2, f"parts.append({value})")
            src.emit(d + 1, "else:")
            src.emit(d + 2, f"put({value})")
        else:
            src.emit(d + 1, f"put({value})")
    elif isinstance(con, KafkaArray):
        _encode_null(src, d, value, con)
        src.emit(d + 1, f"if type({value}) is not list and type({value}) is not tuple:")
        src.emit(d + 2, "raise Declined")
        _encode_length(src, d + 1, f"len({value})", con.compact, True)
        element = _fixed_char(con.element)
        if element is not None:
            src.emit(d + 1, f"put(pack('>%d{element}' % len({value}), *{value}))")
        else:
            item = src.var("i")
            src.emit(d + 1, f"for {item} in {value}:")
            _encode_value(src, d + 2, con.element, item)
    elif isinstance(con, KafkaStruct):
        _encode_struct(src, d, con, value)
    else:
        raise TypeError(f"no compiled encoder for {con!r}")


def _encode_struct(src: _Source, d: int, ks: KafkaStruct, obj: str) -> None:
    get = src.var("g")
    src.emit(d, f"{get} = {obj}.get")
    for fmt, slots in _wire_runs(ks):
        values = [src.var() for _ in slots]
        for slot, value in zip(slots, values):   # a missing field's default is only read: no fresh copy
            src.emit(d, f"{value} = {get}({slot.name!r}, {src.const(slot.default)})")
        if fmt is None:
            _encode_value(src, d, slots[0].con, values[0])
        else:
            src.emit(d, f"put({src.packer(fmt)}({', '.join(values)}))")
    if ks.flexible:   # no tagged field written: a value other than its default declines
        for slot in ks.tagged:
            value = src.var()
            src.emit(d, f"{value} = {get}({slot.name!r}, MISSING)")
            src.emit(d, f"if {value} is not MISSING and {value} != {src.const(slot.default)}:")
            src.emit(d + 1, "raise Declined")
        src.emit(d, "put(b'\\x00')")


def compile_encoder(ks: KafkaStruct, name: str, parts: bool = False) -> Any:
    """A function ``(obj, head) -> bytes`` writing ``head`` then ``obj`` as ``ks`` (missing fields
    take defaults), joined once: a response's header goes in front without another copy of a
    fetch's records. With ``parts``, RECORDS of at least ``LARGE_PART`` bytes are not joined: the
    function then returns the list of parts (the joined bytes before each such records value, the
    value itself, the joined bytes after), whose concatenation is what it would have returned.
    It runs in C (``protocol/_codecs.c``) where that is built, else it is
    ``compile_python_encoder``'s."""
    if _codecs is not None:
        try:
            return partial(_codecs.encode, c_program(ks), LARGE_PART if parts else 0)
        except TypeError:
            pass   # a type the C codec does not know: the generated Python writes it
    return compile_python_encoder(ks, name, parts)


def compile_python_encoder(ks: KafkaStruct, name: str, parts: bool = False) -> Any:
    """``compile_encoder`` as generated Python."""
    src = _Source()
    src.parts = parts
    src.names["MISSING"] = object()
    src.names["LARGE_PART"] = LARGE_PART
    src.emit(0, "def encode(obj, head=b''):")
    src.emit(1, "out = [head]")
    src.emit(1, "put = out.append")
    if parts:
        src.emit(1, "parts = []")
    _encode_struct(src, 1, ks, "obj")
    if parts:
        src.emit(1, "if parts:")
        src.emit(2, "parts.append(b''.join(out))")
        src.emit(2, "return parts")
    src.emit(1, "return b''.join(out)")
    return src.function("encode", f"{'parts ' if parts else ''}encoder of {name}")
