"""Kafka compression codecs for the records section of a RecordBatch v2.

Invariant: ``compress`` writes what the Java client writes (gzip stream, xerial
snappy framing, LZ4 *frame* with independent blocks, standard zstd frames) and
``decompress`` accepts that plus what other clients send (raw snappy from
librdkafka, linked-block LZ4 frames, zstd frames without a content size). Any
failure surfaces as KafkaError: UNSUPPORTED_COMPRESSION_TYPE for an unknown
codec id, CORRUPT_MESSAGE for data that does not decode. cramjam does the work.
"""
from __future__ import annotations

import struct
from typing import Any, Callable

import cramjam

from .errors import ErrorCode, KafkaError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES: dict[int, str] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS: dict[str, int] = {name: codec for codec, name in CODEC_NAMES.items()}

# xerial SnappyOutputStream: magic, version 1, min-compatible version 1, then
# [int32 compressed length, raw snappy block] per 32 KiB of input.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")

_BytesLike = bytes | bytearray | memoryview


def codec_id(name_or_id: str | int) -> int:
    """The codec id for a Kafka ``compression.type`` name (or an id); raises for unknown ones."""
    if isinstance(name_or_id, int):
        if name_or_id in CODEC_NAMES:
            return name_or_id
    elif name_or_id.lower() in CODEC_IDS:
        return CODEC_IDS[name_or_id.lower()]
    raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"compression {name_or_id!r}")


def codec_name(codec: int) -> str:
    """Kafka's name for a codec id ("none", "gzip", ...)."""
    try:
        return CODEC_NAMES[codec]
    except KeyError:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"codec id {codec}") from None


def _snappy_xerial_compress(data: _BytesLike) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + _XERIAL_BLOCK]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: _BytesLike) -> bytes:
    view = memoryview(data)
    if view[:8] != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    if len(view) < 16:
        raise ValueError("truncated xerial header")
    parts = []
    pos, end = 16, len(view)
    while pos < end:
        if end - pos < 4:
            raise ValueError("truncated xerial block length")
        (size,) = _INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise ValueError("xerial block exceeds the data")
        parts.append(bytes(cramjam.snappy.decompress_raw(view[pos:pos + size])))
        pos += size
    return b"".join(parts)


def _lz4_compress(data: _BytesLike) -> bytes:
    # Java's KafkaLZ4BlockInputStream rejects linked blocks; cramjam's one-shot
    # lz4.compress links them, so use a Compressor with independent blocks.
    compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
    compressor.compress(data if isinstance(data, bytes) else bytes(data))
    return bytes(compressor.finish())


def compress(codec: int, data: _BytesLike) -> bytes:
    """``data`` compressed with Kafka codec ``codec`` (NONE returns it unchanged)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return _snappy_xerial_compress(data)
    if codec == LZ4:
        return _lz4_compress(data)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3))
    raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"codec id {codec}")


_DECOMPRESSORS: dict[int, Callable[[bytes | bytearray | memoryview], Any]] = {
    GZIP: cramjam.gzip.decompress,
    SNAPPY: _snappy_decompress,
    LZ4: cramjam.lz4.decompress,
    ZSTD: cramjam.zstd.decompress,
}


def decompress(codec: int, data: _BytesLike, max_size: int | None = None) -> bytes:
    """``data`` decompressed with Kafka codec ``codec``; corrupt input raises CORRUPT_MESSAGE.

    With ``max_size`` (the broker's ``max.message.bytes``) no more than that is ever produced:
    larger output raises MESSAGE_TOO_LARGE (a decompression bomb costs at most that much memory).
    """
    if codec == NONE:
        return bytes(data)
    try:
        fn = _DECOMPRESSORS[codec]
    except KeyError:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"codec id {codec}") from None
    try:
        if max_size is not None:
            return _decompress_bounded(codec, data, max_size)
        return bytes(fn(data))
    except (cramjam.DecompressionError, ValueError, struct.error, OverflowError) as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{CODEC_NAMES[codec]}: {exc}") from None


def _too_large(codec: int, max_size: int) -> KafkaError:
    return KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                      f"{CODEC_NAMES[codec]} records decompress to more than {max_size} bytes")


def _decompress_bounded(codec: int, data: _BytesLike, max_size: int) -> bytes:
    if codec == SNAPPY:  # every raw snappy block states its length: check before decompressing
        view = memoryview(data)
        blocks = [view]
        if view[:8] == XERIAL_MAGIC:
            blocks, pos = [], 16
            while pos + 4 <= len(view):
                (size,) = _INT32.unpack_from(view, pos)
                blocks.append(view[pos + 4:pos + 4 + max(size, 0)])
                pos += 4 + max(size, 0)
        if sum(cramjam.snappy.decompress_raw_len(b) for b in blocks) > max_size:
            raise _too_large(codec, max_size)
        return _snappy_decompress(data)
    module = {GZIP: cramjam.gzip, LZ4: cramjam.lz4, ZSTD: cramjam.zstd}[codec]
    # a buffer for the usual ratios first, the whole allowance only if that is too small;
    # one spare byte tells "exactly max_size" from "more"
    size = min(max_size + 1, max(1 << 16, 8 * len(data)))
    while True:
        out = bytearray(size)
        try:
            n = module.decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if "whole buffer" not in str(exc):
                raise
            n = size
        if n < size:
            return bytes(memoryview(out)[:n])
        if size > max_size:
            raise _too_large(codec, max_size)
        size = max_size + 1
