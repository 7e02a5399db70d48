"""odradek.protocol.compression: round trips, wire framing, interop with other implementations."""
from __future__ import annotations

import gzip
import io
import os
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import compression as C
from odradek.protocol.errors import ErrorCode, KafkaError

CODECS = [C.NONE, C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]
COMPRESSED = [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]
SAMPLES = [b"x", b"kafka " * 20000, os.urandom(70000), bytes(range(256)) * 300]


def test_ids_and_names():
    assert (C.NONE, C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD) == (0, 1, 2, 3, 4)
    assert [C.codec_name(c) for c in CODECS] == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert [C.codec_id(n) for n in ("none", "gzip", "snappy", "lz4", "zstd")] == CODECS
    assert C.codec_id("LZ4") == C.LZ4 and C.codec_id(4) == C.ZSTD


@pytest.mark.parametrize("call", [
    lambda: C.compress(5, b"x"), lambda: C.decompress(7, b"x"),
    lambda: C.codec_id("brotli"), lambda: C.codec_id(9), lambda: C.codec_name(-1),
])
def test_unknown_codec(call):
    with pytest.raises(KafkaError) as info:
        call()
    assert info.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000))
def test_round_trip(codec, data):
    assert C.decompress(codec, C.compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_accepts_any_buffer(codec, kind):
    data = b"buffer " * 1000
    assert C.decompress(codec, kind(C.compress(codec, kind(data)))) == data


# --- framing: what the Java client writes ----------------------------------

def test_snappy_is_xerial_framed():
    data = os.urandom(100_000)  # 4 blocks of 32 KiB
    out = C.compress(C.SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (size,) = struct.unpack_from(">i", out, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4:pos + 4 + size])))
        pos += 4 + size
    assert [len(b) for b in blocks] == [32768, 32768, 32768, 100_000 - 3 * 32768]
    assert b"".join(blocks) == data


def test_snappy_accepts_raw_blocks_as_librdkafka_writes():
    data = b"librdkafka writes raw snappy " * 500
    assert C.decompress(C.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_lz4_frame_has_independent_blocks():
    lz4_frame = pytest.importorskip("lz4.frame")
    out = C.compress(C.LZ4, os.urandom(200_000))
    assert out[:4] == struct.pack("<I", 0x184D2204)
    info = lz4_frame.get_frame_info(out)
    # Java's KafkaLZ4BlockInputStream refuses linked blocks
    assert info["block_linked"] is False
    assert info["block_size_id"] == 4  # 64 KiB, as KafkaLZ4BlockOutputStream


def test_gzip_is_a_gzip_stream():
    data = b"gzip " * 1000
    out = C.compress(C.GZIP, data)
    assert out[:2] == b"\x1f\x8b"
    assert gzip.decompress(out) == data


def test_zstd_is_a_standard_frame():
    zstandard = pytest.importorskip("zstandard")
    data = b"zstd " * 1000
    out = C.compress(C.ZSTD, data)
    assert out[:4] == b"\x28\xb5\x2f\xfd"
    assert zstandard.ZstdDecompressor().decompress(out) == data


# --- decoding what other implementations write -----------------------------

def test_gzip_multi_member():
    data = b"first member " * 100 + b"second member " * 100
    assert C.decompress(C.GZIP, gzip.compress(data[:1300]) + gzip.compress(data[1300:])) == data


@pytest.mark.parametrize("linked", [True, False])
@pytest.mark.parametrize("checksums", [True, False])
def test_lz4_frames_from_python_lz4(linked, checksums):
    lz4_frame = pytest.importorskip("lz4.frame")
    data = b"lz4 frame " * 30000
    frame = lz4_frame.compress(data, block_linked=linked, content_checksum=checksums,
                               block_checksum=checksums, store_size=checksums)
    assert C.decompress(C.LZ4, frame) == data
    assert lz4_frame.decompress(C.compress(C.LZ4, data)) == data


def test_zstd_frames_without_content_size():
    zstandard = pytest.importorskip("zstandard")
    data = b"no content size " * 5000
    one_shot = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    sink = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(sink, closefd=False) as writer:
        writer.write(data)  # streaming: size unknown up front, as librdkafka writes
    for frame in (one_shot, sink.getvalue()):
        assert zstandard.get_frame_parameters(frame).content_size in (0, zstandard.CONTENTSIZE_UNKNOWN)
        assert C.decompress(C.ZSTD, frame) == data
    assert C.decompress(C.ZSTD, one_shot + one_shot) == data * 2


@pytest.mark.parametrize("data", SAMPLES, ids=["1B", "text", "random", "bytes"])
def test_kafka_python_codecs_both_ways(data):
    codec = pytest.importorskip("kafka.codec")
    if not (codec.has_snappy() and codec.has_lz4() and codec.has_zstd()):
        pytest.skip("kafka-python codec libraries (python-snappy, lz4, zstandard) missing")
    pairs = [
        (C.GZIP, codec.gzip_encode, codec.gzip_decode),
        (C.SNAPPY, codec.snappy_encode, codec.snappy_decode),
        (C.LZ4, codec.lz4_encode, codec.lz4_decode),
        (C.ZSTD, codec.zstd_encode, codec.zstd_decode),
    ]
    for ours, their_encode, their_decode in pairs:
        assert C.decompress(ours, their_encode(data)) == data
        assert their_decode(C.compress(ours, data)) == data
    # kafka-python's non-default raw snappy and small xerial blocks
    assert C.decompress(C.SNAPPY, codec.snappy_encode(data, xerial_compatible=False)) == data
    assert C.decompress(C.SNAPPY, codec.snappy_encode(data, xerial_blocksize=1000)) == data


@pytest.mark.parametrize("codec", COMPRESSED)
def test_cramjam_one_shot_output_decodes(codec):
    data = b"cramjam " * 10000
    module = {C.GZIP: cramjam.gzip, C.SNAPPY: cramjam.snappy, C.LZ4: cramjam.lz4, C.ZSTD: cramjam.zstd}[codec]
    if codec == C.SNAPPY:
        produced = bytes(module.compress_raw(data))
        ours = C.compress(codec, data)
        (first,) = struct.unpack_from(">i", ours, 16)
        assert bytes(module.decompress_raw(ours[20:20 + first])) == data[:32768]
    else:
        produced = bytes(module.compress(data))
        assert bytes(module.decompress(C.compress(codec, data))) == data
    assert C.decompress(codec, produced) == data


# --- corrupt input ---------------------------------------------------------

@pytest.mark.parametrize("codec", COMPRESSED)
def test_garbage_is_corrupt_message(codec):
    for bad in (b"", b"garbage that is not compressed at all", b"\x82SNAPPY\x00\x00\x00\x00\x01"):
        if codec == C.SNAPPY and bad == b"":
            continue  # raw snappy of nothing is an error, covered below
        with pytest.raises(KafkaError) as info:
            C.decompress(codec, bad)
        assert info.value.code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncated_is_corrupt_message(codec):
    out = C.compress(codec, os.urandom(50_000))
    for cut in (len(out) // 2, len(out) - 3):
        with pytest.raises(KafkaError) as info:
            C.decompress(codec, out[:cut])
        assert info.value.code == ErrorCode.CORRUPT_MESSAGE


def test_snappy_xerial_block_overrun_is_corrupt():
    bad = b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 1000) + b"\x05abc"
    with pytest.raises(KafkaError) as info:
        C.decompress(C.SNAPPY, bad)
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE
