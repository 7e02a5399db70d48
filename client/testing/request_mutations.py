"""Valid requests of every API a broker serves, and the mutations the request fuzzer sends.

Invariant: ``base_requests`` builds, with odradek's own codec, one valid request per advertised
API and version it samples, in a form that cannot legitimately damage the cluster it is sent
to; ``mutate`` derives a mutant from one of them using only the ``random.Random`` it is given,
so the same seed gives the same frames (Hypothesis's ``st.randoms()`` drives it in the test
suite, a seeded Random in the standalone runner, ``odradek.testing.request_fuzzer``).

Never sent: ControlledShutdown (key 7; v0-1 carry no epoch, so a mutated Metadata frame can become
a real shutdown request for the broker), in any form. Other requests that could legitimately change
the shared cluster are built in a harmless form: the controller-only APIs (LeaderAndIsr,
StopReplica, UpdateMetadata) carry controller id and epoch -100 (refused as stale, and many bits
away from a valid value), DeleteTopics, DeleteRecords, AlterReplicaLogDirs, AlterPartitionReassignments
and AlterIsr (whose broker epoch -1 is refused anyway) name a topic that does not exist, CreatePartitions asks
for 0 partitions, CreateTopics names the fuzz topic (which exists) with validate_only where the
version has it, AlterClientQuotas is validate_only about an entity type Kafka refuses.
"""
from __future__ import annotations

import copy
import random
import struct
import time
import zlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Sequence

from odradek.protocol import apis as protocol_apis
from odradek.protocol.errors import KafkaError
from odradek.protocol.compression import GZIP, NONE
from odradek.protocol.header import encode_request
from odradek.protocol.legacy_records import MAGIC_AT as LEGACY_MAGIC_AT
from odradek.protocol.legacy_records import build_set
from odradek.protocol.primitives import ZERO_UUID
from odradek.protocol.record_batch import CRC_START, LOG_OVERHEAD, compute_crc
from odradek.protocol.records import BatchBuilder
from odradek.protocol.schema import ArrayOf, Field, Message, StructOf, Type

PRODUCE_KEY = 0
NEVER_SENT = frozenset({7})                  # ControlledShutdown: see the module docstring
FOREIGN_ID = -100                           # controller id / epoch: never this cluster's
# DeleteTopics, DeleteRecords, AlterReplicaLogDirs, AlterPartitionReassignments, AlterIsr: only ever about a
# topic that does not exist
ABSENT_TOPIC_ONLY = frozenset({20, 21, 34, 45, 56})


@dataclass(frozen=True)
class BaseRequest:
    """One valid request: the API module, its version and the encoded frame (no size prefix)."""
    api: ModuleType
    version: int
    frame: bytes
    body: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def name(self) -> str:
        return f"{self.api.NAME} v{self.version}"


def sample_legacy_set(magic: int) -> bytes:
    """An old client's message set: magic 0 uncompressed, or magic 1 as one gzip wrapper."""
    ts = int(time.time() * 1000)
    return build_set(magic, GZIP if magic else NONE, [(0, ts, b"k", b"fuzz"), (1, ts, None, b"fuzz")])


def sample_batch(value: bytes = b"fuzz") -> bytes:
    b = BatchBuilder()
    b.append(int(time.time() * 1000), b"k", value)
    return b.build()


def _int_value(name: str, t: Type) -> int:
    if name in ("controller_id", "controller_epoch"):
        return FOREIGN_ID
    if "timeout" in name or "wait" in name:
        return 100
    if name in ("replica_id", "producer_id", "producer_epoch", "generation_id", "timestamp",
                "log_start_offset", "num_partitions", "replication_factor", "current_leader_epoch",
                "leader_epoch", "broker_epoch", "max_timestamp"):
        return -1
    if name in ("acks", "max_num_offsets"):
        return 1
    if "max_bytes" in name:
        return 1 << 20
    return 0


class _Sampler:
    """Fills a request message with one plausible value per field (arrays get one element)."""

    def __init__(self, version: int, flexible: bool, topic: str, group: str):
        self.version, self.flexible, self.topic, self.group = version, flexible, topic, group

    def struct(self, fields: Sequence[Field]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields:
            if self.version not in f.versions or (f.tag is not None and self.version in f.tagged):
                continue
            out[f.name] = self.value(f)
        return out

    def value(self, f: Field) -> Any:
        sub = f.struct_fields
        if sub is not None:
            return self.struct(sub) if isinstance(f.type, StructOf) else [self.struct(sub)]
        if isinstance(f.type, ArrayOf):
            return [self.scalar(f.name, f.type.element)]
        return self.scalar(f.name, f.type)

    def scalar(self, name: str, t: Type) -> Any:
        if t == Type.STRING:
            if "group" in name or name in ("key", "coordinator_key"):
                return self.group
            if "topic" in name or name == "name":
                return self.topic
            if "software_version" in name:
                return "1.0"
            if name == "protocol_type":
                return "consumer"
            return "fuzz"
        if t == Type.BYTES:
            return b"fuzz"
        if t == Type.RECORDS:
            return sample_batch()
        if t == Type.BOOL:
            return name == "validate_only"
        if t == Type.FLOAT64:
            return 0.0
        if t == Type.UUID:
            return ZERO_UUID
        return _int_value(name, t)


def sample_body(api: ModuleType, version: int, topic: str, group: str, absent_topic: str) -> dict[str, Any]:
    """A request body of ``api`` at ``version`` in its harmless valid form (module docstring)."""
    request: Message = api.Request
    body = _Sampler(version, request.is_flexible(version), topic, group).struct(request.fields)
    if api.API_KEY in ABSENT_TOPIC_ONLY:
        if "topic_names" in body:
            body["topic_names"] = [absent_topic]
        for t in body.get("topics", []) + [t for d in body.get("dirs", []) for t in d["topics"]]:
            t["name"] = absent_topic
    return body


def base_requests(served: dict[int, tuple[int, int]], topic: str, group: str = "fuzz-group",
                  absent_topic: str = "fuzz-absent-topic") -> list[BaseRequest]:
    """Valid requests of every API in ``served`` (key -> advertised version range) that
    odradek's codec knows, at its lowest, middle and highest version, plus Produce with acks 0,
    1 and -1."""
    out: list[BaseRequest] = []
    cid = 1
    for key in sorted(served):
        api = protocol_apis.API_BY_KEY.get(key)
        if api is None or key in NEVER_SENT:
            continue
        lo, hi = served[key]
        for version in sorted({lo, (lo + hi) // 2, hi}):
            bodies = [sample_body(api, version, topic, group, absent_topic)]
            if key == PRODUCE_KEY:
                for acks in (0, -1):
                    bodies.append({**bodies[0], "acks": acks})
            for body in bodies:
                out.append(BaseRequest(api, version, encode_request(api, version, cid, "fuzz", body), body))
                cid += 1
        if key == PRODUCE_KEY:   # old clients' message sets: magic 0 in v1, a magic-1 gzip wrapper in v2
            for version in (v for v in (1, 2) if lo <= v <= hi):
                body = sample_body(api, version, topic, group, absent_topic)
                body["topic_data"][0]["partition_data"][0]["records"] = sample_legacy_set(version - 1)
                out.append(BaseRequest(api, version, encode_request(api, version, cid, "fuzz", body), body))
                cid += 1
    return out


# ---------------------------------------------------------------- mutations

HUGE_INTS = (0x7FFF, 0xFFFF, 0x8000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE, 0x10000000)


def truncate(frame: bytes, rng: random.Random) -> bytes:
    return frame[:rng.randrange(len(frame))]


def flip_bits(frame: bytes, rng: random.Random) -> bytes:
    out = bytearray(frame)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def huge_length(frame: bytes, rng: random.Random) -> bytes:
    """A length-like field (int16, int32 or unsigned varint) somewhere in the body made huge or negative."""
    if len(frame) <= 10:
        return frame + struct.pack(">i", 0x7FFFFFFF)
    at = rng.randrange(10, len(frame))
    kind = rng.randrange(3)
    if kind == 0:
        patch = struct.pack(">H", rng.choice(HUGE_INTS) & 0xFFFF)
    elif kind == 1:
        patch = struct.pack(">I", rng.choice(HUGE_INTS))
    else:
        patch = rng.choice((b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\x7f", b"\x80\x80\x80\x80\x80\x01"))
    return frame[:at] + patch + frame[at + len(patch):]


def wrong_version(frame: bytes, rng: random.Random) -> bytes:
    version = rng.choice((-1, 0, 1, 3, 9, 12, 99, 32767, -32768, rng.randint(-32768, 32767)))
    return frame[:2] + struct.pack(">h", version) + frame[4:]


def wrong_api_key(frame: bytes, rng: random.Random) -> bytes:
    key = rng.choice((-1, 7, 99, 32767, -32768, rng.randint(0, 70), rng.randint(0, 70)))
    return struct.pack(">h", key) + frame[2:]


def append_random(frame: bytes, rng: random.Random) -> bytes:
    return frame + rng.randbytes(rng.randint(1, 64))


def random_body(frame: bytes, rng: random.Random) -> bytes:
    keep = min(len(frame), rng.choice((2, 4, 8, 10)))
    return frame[:keep] + rng.randbytes(rng.randint(0, 256))


def splice(frame: bytes, rng: random.Random) -> bytes:
    a = rng.randrange(len(frame))
    b = rng.randrange(a, min(len(frame), a + 64) + 1)
    return frame[:a] + frame[b:] if rng.random() < 0.5 else frame[:b] + frame[a:b] + frame[b:]


EXTREME_INTS = (0, -1, 1, 2, 127, 255, -128, 2**15 - 1, -2**15, 2**31 - 1, -2**31, 2**63 - 1, -2**63, 10**9)
EXTREME_STRINGS = ("", "x" * 32767, "a/b", "..", "caf\u00e9", "\x00", "fuzz-other", "x" * 250)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every value inside a request body (dict keys and list indexes), containers too."""
    out = [path] if path else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _leaves(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _leaves(v, path + (i,))
    return out


def _extreme(old: Any, rng: random.Random) -> Any:
    if isinstance(old, bool):
        return not old
    if isinstance(old, int):
        return rng.choice(EXTREME_INTS)
    if isinstance(old, str):
        return rng.choice(EXTREME_STRINGS)
    if isinstance(old, (bytes, bytearray)):
        return rng.choice((b"", None, rng.randbytes(rng.randint(1, 64)), bytes(old[:len(old) // 2])))
    if isinstance(old, list):
        return rng.choice(([], None, old * 2, old * 100))
    return None


def field_value(base: BaseRequest, rng: random.Random) -> bytes | None:
    """``base`` re-encoded with one to three values inside its body made extreme (empty, huge,
    illegal, duplicated, null); None if the codec cannot write them in this version."""
    body = copy.deepcopy(base.body)
    for _ in range(rng.choice((1, 1, 2, 3))):
        paths = _leaves(body)
        if not paths:
            return None
        path = rng.choice(paths)
        holder: Any = body
        for step in path[:-1]:
            holder = holder[step]
        holder[path[-1]] = _extreme(holder[path[-1]], rng)
    try:
        return encode_request(base.api, base.version, rng.randint(0, 1 << 20), "fuzz", body)
    except (ValueError, TypeError, KafkaError, OverflowError, struct.error):
        return None


def batch_value(base: BaseRequest, rng: random.Random) -> bytes | None:
    """A Produce request whose record batch is mutated past its header fields (bits flipped,
    cut, a field made huge, bytes appended) with the CRC made valid again, so the broker's
    batch validation, not the CRC, has to refuse it (for a magic 0/1 set: past the first
    message's magic, its CRC32 made valid over the rest)."""
    body = copy.deepcopy(base.body)
    try:
        partition = body["topic_data"][0]["partition_data"][0]
    except (KeyError, IndexError):
        return None
    batch = bytes(partition["records"] or b"")
    if len(batch) <= CRC_START:
        return None
    legacy = batch[LEGACY_MAGIC_AT] < 2
    start = LEGACY_MAGIC_AT + 1 if legacy else CRC_START
    name = rng.choice(("flip_bits", "truncate", "huge_length", "append_random", "splice"))
    head, tail = batch[:start], MUTATIONS[name](batch[start:], rng)
    out = bytearray(head + tail)
    if rng.random() < 0.5 and len(out) >= LOG_OVERHEAD:   # the batch length agreeing with the bytes, or not
        struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)
    if legacy:
        struct.pack_into(">I", out, 12, zlib.crc32(out[LEGACY_MAGIC_AT:]))
    elif len(out) > CRC_START:
        struct.pack_into(">I", out, 17, compute_crc(out, 0, len(out)))
    partition["records"] = bytes(out)
    try:
        return encode_request(base.api, base.version, rng.randint(0, 1 << 20), "fuzz", body)
    except (ValueError, TypeError, KafkaError):
        return None


MUTATIONS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "truncate": truncate, "flip_bits": flip_bits, "huge_length": huge_length, "wrong_version": wrong_version,
    "wrong_api_key": wrong_api_key, "append_random": append_random, "random_body": random_body, "splice": splice,
}
FRAME_SIZES = (0x7FFFFFFF, -1, -0x80000000)  # declared frame sizes past any socket.request.max.bytes


@dataclass(frozen=True)
class Mutant:
    """A mutated request: the bytes after the size prefix, and the size declared (None: the real one)."""
    base: BaseRequest
    data: bytes
    mutations: tuple[str, ...]
    declared_size: int | None = None

    def wire(self) -> bytes:
        size = len(self.data) if self.declared_size is None else self.declared_size
        return struct.pack(">i", size) + self.data

    def describe(self) -> str:
        return f"{self.base.name} {'+'.join(self.mutations)}: {self.wire()[:512].hex()}"


def mutate(base: BaseRequest, rng: random.Random) -> Mutant | None:
    """One to three mutations of ``base``; None when the result must not be sent (module docstring)."""
    if rng.random() < 0.01:
        return Mutant(base, base.frame[:64], ("frame_size",), rng.choice(FRAME_SIZES))
    data, names = base.frame, []
    if base.api.API_KEY == PRODUCE_KEY and rng.random() < 0.5:
        changed = batch_value(base, rng)
        if changed is not None:
            return Mutant(base, changed, ("batch_value",))
    if base.body and rng.random() < 0.4:
        changed = field_value(base, rng)
        if changed is not None:
            data, names = changed, ["field_value"]
            if rng.random() < 0.7:
                return Mutant(base, data, tuple(names))
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if not data:
            break
        name = rng.choice(sorted(MUTATIONS))
        data = MUTATIONS[name](data, rng)
        names.append(name)
    if len(data) >= 2 and struct.unpack_from(">h", data)[0] in NEVER_SENT:
        return None
    return Mutant(base, data, tuple(names))
