"""The common Produce request, read straight from its frame (one topic, one partition, no
transactional id, version 3-9), and its answer when it carries no message.

Invariant: ``read_produce_frame`` returns the request header and ``read_one_partition``'s answer
for a Produce frame of that shape whose header decodes, and None for every other frame; it never
raises. It runs in C (``_frames.c``) when that is built, which ``tests/unit/test_produce_one.py``
holds to the Python reader here. ``read_one_partition`` returns exactly the fields the declared
ProduceRequest codec decodes from the same bytes, or None for every other frame (another shape, a
transactional id, unknown tagged fields, a malformed or over-long body); it never raises and reads
nothing past the frame. The broker answers None by decoding the frame the general way, so a decline costs a
microsecond and changes no answer. ``encode_one_response`` writes exactly the bytes the declared
ProduceResponse codec writes for one topic of one partition without record errors or an error
message, and a throttle of 0 (``tests/unit/test_produce_one.py`` holds both to the declared codec);
``encode_answer`` writes that body behind its response header, the whole response (in C when
built, held to the Python here).
"""
from __future__ import annotations

import struct
from functools import partial
from typing import Callable, NamedTuple

from .apis import produce as _PRODUCE
from .errors import KafkaError
from .header import EncodedBody, RequestHeader, decode_request_header, encode_response
from .primitives import encode_uvarint, uvarint_at

FIRST_VERSION = 3     # v0-2 may carry magic 0/1 message sets: the general path takes them
FLEXIBLE_FROM = 9

_new_tuple = tuple.__new__   # a NamedTuple without its __new__'s Python frame
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_NULL_ID_ACKS_TIMEOUT_COUNT = struct.Struct(">hhii")   # v3-8: transactional_id (null), acks, timeout, topics
_ACKS_TIMEOUT = struct.Struct(">hi")
_COUNT_INDEX_SIZE = struct.Struct(">iii")              # v3-8: partitions, index, records' size
_COUNT_NAME_SIZE = struct.Struct(">ih")                # v3-8: topics (1), the name's size
# after the topic's name: partitions (1), index, error code, base offset, log append time,
# [log start offset (v5+), record errors (0) and error message (null) (v8+), tagged fields (v9)],
# throttle time (0) [, tagged fields (v9)]
_PARTITION_ANSWER = {3: struct.Struct(">iihqqi"), 4: struct.Struct(">iihqqi"), 5: struct.Struct(">iihqqqi"),
                     6: struct.Struct(">iihqqqi"), 7: struct.Struct(">iihqqqi"), 8: struct.Struct(">iihqqqihi"),
                     9: struct.Struct(">bihqqqbbbbib")}
_PARTITION_ANSWER_TAIL = {3: (0,), 4: (0,), 5: (0,), 6: (0,), 7: (0,), 8: (0, -1, 0), 9: (1, 0, 0, 0, 0, 0)}


class OnePartitionProduce(NamedTuple):
    acks: int
    timeout_ms: int
    topic: str
    partition: int
    records: bytes | memoryview   # a view into the frame when the frame is one


def read_one_partition(frame: bytes | memoryview, offset: int, version: int) -> OnePartitionProduce | None:
    """The request at ``frame[offset:]`` if it has the one-partition shape, else None."""
    if (type(frame) is not bytes and type(frame) is not memoryview) or not FIRST_VERSION <= version <= FLEXIBLE_FROM:
        return None
    try:
        if version == FLEXIBLE_FROM:
            return _flexible(frame, offset)
        null_id, acks, timeout_ms, topics = _NULL_ID_ACKS_TIMEOUT_COUNT.unpack_from(frame, offset)
        if null_id != -1 or topics != 1:
            return None
        (name_size,) = _I16.unpack_from(frame, offset + 12)
        pos = offset + 14
        end = pos + name_size
        if name_size < 0 or end > len(frame):
            return None
        name = frame[pos:end]
        topic = name.decode("utf-8") if type(name) is bytes else str(name, "utf-8")   # (bytes: faster)
        partitions, index, size = _COUNT_INDEX_SIZE.unpack_from(frame, end)
        pos = end + 12
        if partitions != 1 or size < 0 or pos + size != len(frame):
            return None
        return _new_tuple(OnePartitionProduce, (acks, timeout_ms, topic, index, frame[pos:]))
    except (struct.error, IndexError, ValueError):   # UnicodeDecodeError is a ValueError
        return None


PRODUCE_FRAME = b"\x00\x00"   # a Produce request frame begins with its api key, 0


def _read_frame_py(frame: bytes | memoryview) -> tuple[RequestHeader, OnePartitionProduce] | None:
    if type(frame) is memoryview:
        if frame.ndim != 1 or frame.format != "B" or not frame.c_contiguous:
            return None   # not one run of bytes: not a frame the reader cuts
    elif type(frame) is not bytes:
        return None
    if frame[:2] != PRODUCE_FRAME:
        return None
    try:
        header, offset = decode_request_header(frame)
    except KafkaError:
        return None
    one = read_one_partition(frame, offset, header.api_version)
    return None if one is None else (header, one)


def _encode_answer_py(version: int, correlation_id: int, topic: str, index: int, error_code: int, base_offset: int,
                      log_append_time_ms: int, log_start_offset: int) -> bytes:
    return encode_response(_PRODUCE, version, correlation_id, EncodedBody(encode_one_response(
        version, topic, index, error_code, base_offset, log_append_time_ms, log_start_offset)))


ReadFrame = Callable[[bytes | memoryview], "tuple[RequestHeader, OnePartitionProduce] | None"]
read_produce_frame: ReadFrame
encode_answer: Callable[[int, int, str, int, int, int, int, int], bytes]
try:
    from ._frames import encode_answer as _encode_answer_c, read_frame as _read_frame_c
    read_produce_frame, encode_answer = partial(_read_frame_c, RequestHeader, OnePartitionProduce), _encode_answer_c
except ImportError:   # built without a C compiler
    read_produce_frame, encode_answer = _read_frame_py, _encode_answer_py


def _flexible(frame: bytes | memoryview, pos: int) -> OnePartitionProduce | None:
    # compact lengths are uvarints of length + 1; a one-byte uvarint is below 0x80
    if frame[pos] != 0:                          # transactional_id: null
        return None
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, pos + 1)
    pos += 7
    if frame[pos] != 2:                          # one topic
        return None
    name_size = frame[pos + 1] - 1
    pos += 2
    end = pos + name_size
    if name_size < 0 or name_size >= 0x7F or end > len(frame):
        return None
    name = frame[pos:end]
    topic = name.decode("utf-8") if type(name) is bytes else str(name, "utf-8")
    if frame[end] != 2:                          # one partition
        return None
    (index,) = _I32.unpack_from(frame, end + 1)
    size, pos = uvarint_at(frame, end + 5)
    size -= 1
    end = pos + size
    # the records, then three empty tagged-field sections: the partition's, the topic's, the request's
    if size < 0 or end + 3 != len(frame) or frame[end:] != b"\x00\x00\x00":
        return None
    return _new_tuple(OnePartitionProduce, (acks, timeout_ms, topic, index, frame[pos:end]))


def encode_one_response(version: int, topic: str, index: int, error_code: int, base_offset: int,
                        log_append_time_ms: int, log_start_offset: int) -> bytes:
    """The ProduceResponse body of one partition (version 3-9), as the declared codec encodes it."""
    name = topic.encode("utf-8")
    if version < FLEXIBLE_FROM:
        head, partitions = _COUNT_NAME_SIZE.pack(1, len(name)), 1
    else:
        head, partitions = b"\x02" + encode_uvarint(len(name) + 1), 2
    answer = _PARTITION_ANSWER[version]
    if version < 5:
        tail = answer.pack(partitions, index, error_code, base_offset, log_append_time_ms,
                           *_PARTITION_ANSWER_TAIL[version])
    else:
        tail = answer.pack(partitions, index, error_code, base_offset, log_append_time_ms, log_start_offset,
                           *_PARTITION_ANSWER_TAIL[version])
    return head + name + tail
