"""A real broker refuses every class of bad record batch, changes nothing, and keeps serving.

Invariant: one shared 1-broker cluster (real ZooKeeper, real broker process) for the module;
bad batches go over raw sockets with our codec (test_broker_e2e.RawClient), each answered
with Kafka's error code while the log end offset stays where it was; the valid records
produced before and after are then read, without blocking, by odradek's Consumer,
kafka-python and confluent-kafka.
"""
from __future__ import annotations

import struct
import time

import pytest

from eos_support import END, read_until_end
from test_broker_e2e import RawClient, fetch_all, leader_ready, produce_one, wait_brokers

from odradek.client.consumer import Consumer
from odradek.client.structs import TopicPartition
from odradek.protocol import compression
from odradek.protocol import record_batch as rb
from odradek.protocol.apis import create_topics
from odradek.protocol.records import BatchBuilder
from odradek.testing import wait_until

pytestmark = pytest.mark.integration

TOPIC, COMPACTED = "validated", "validated-compacted"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from odradek.zk.cluster import LocalCluster
    cluster = LocalCluster(tmp_path_factory.mktemp("validation"), zookeepers=1, brokers=1)
    cluster.start()
    try:
        wait_brokers(cluster.broker_address(1), 1)
        c = RawClient(cluster.broker_address(1))
        resp = c.request(create_topics, 4, {"topics": [
            {"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []},
            {"name": COMPACTED, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": [
                {"name": "cleanup.policy", "value": "compact"},
                {"name": "message.timestamp.difference.max.ms", "value": "3600000"}]}],
            "timeout_ms": 30000, "validate_only": False})
        assert [t.error_code for t in resp.topics] == [0, 0]
        leader_ready(c, TOPIC)
        leader_ready(c, COMPACTED)
        c.close()
        yield cluster
    finally:
        cluster.stop()


def now_ms() -> int:
    return int(time.time() * 1000)


def valid(values: list[bytes], codec: int = compression.NONE, keys: list[bytes | None] | None = None,
          timestamps: list[int] | None = None) -> bytes:
    b = BatchBuilder(compression=codec)
    for i, v in enumerate(values):
        b.append(timestamps[i] if timestamps else now_ms(), keys[i] if keys else b"k%d" % i, v)
    return b.build()


def rebuild(raw: bytes, records: bytes | None = None, **fields) -> bytes:
    """``raw`` with header ``fields`` and/or records section replaced; length and CRC made valid."""
    h = rb.parse_header(raw)
    body = raw[rb.HEADER_SIZE:] if records is None else records
    h = h._replace(batch_length=rb.HEADER_SIZE - rb.LOG_OVERHEAD + len(body), crc=0, **fields)
    out = bytearray(rb.pack_header(h) + body)
    struct.pack_into(">I", out, 17, rb.compute_crc(out, 0, len(out)))
    return bytes(out)


def swapped_deltas(raw: bytes) -> bytes:
    """The first two records' offset deltas swapped (small records: 1-byte length and timestamp delta)."""
    records = bytearray(raw[rb.HEADER_SIZE:])
    second = 1 + (records[0] >> 1)
    records[3], records[second + 3] = records[second + 3], records[3]
    return rebuild(raw, records=bytes(records))


def bad_crc(raw: bytes) -> bytes:
    m = bytearray(raw)
    m[-1] ^= 0xFF
    return bytes(m)


BAD = {   # name -> (batch, Kafka's error code)
    "records count 2^31-1 holding one record": (
        lambda: rebuild(valid([b"x"]), last_offset_delta=2**31 - 2, records_count=2**31 - 1), 87),
    "records section truncated under a valid CRC": (
        lambda: rebuild(valid([b"a", b"b", b"c"]), records=valid([b"a", b"b", b"c"])[rb.HEADER_SIZE:-3]), 87),
    "bytes after the last record": (
        lambda: rebuild(valid([b"a"]), records=valid([b"a"])[rb.HEADER_SIZE:] + b"\x00\x00\x00"), 87),
    "offset deltas 1, 0": (lambda: swapped_deltas(valid([b"a", b"b"])), 87),
    "codec 5": (lambda: rebuild(valid([b"a"]), attributes=5), 76),
    "codec 7": (lambda: rebuild(valid([b"a"]), attributes=7), 76),
    "gzip that is not gzip": (lambda: rebuild(valid([b"a"]), attributes=compression.GZIP), 2),
    "CRC mismatch": (lambda: bad_crc(valid([b"a"])), 2),
    "gzip decompressing past 64 x max.message.bytes": (lambda: valid([bytes(80 << 20)], codec=compression.GZIP), 10),
    "magic 1 in a Produce v8": (lambda: rebuild(valid([b"a"]), magic=1), 87),
}


def end_offset(c: RawClient, topic: str) -> int:
    return fetch_all(c, topic).high_watermark   # RF 1, acks=all: the HW is the log end offset


def test_bad_batches_are_refused_and_consumers_read_around_them(broker):
    c = RawClient(broker.broker_address(1))
    before = [b"before-%d" % i for i in range(3)]
    assert produce_one(c, TOPIC, valid(before)).error_code == 0
    leo = end_offset(c, TOPIC)
    assert leo == 3
    for name, (make, code) in BAD.items():
        r = produce_one(c, TOPIC, make())
        assert (name, r.error_code, r.base_offset) == (name, code, -1)
        assert end_offset(c, TOPIC) == leo, name        # same connection, nothing appended
    after = [b"after-%d" % i for i in range(2)]
    r = produce_one(c, TOPIC, valid(after, codec=compression.LZ4))
    assert (r.error_code, r.base_offset) == (0, leo)
    assert produce_one(c, TOPIC, valid([END])).error_code == 0
    c.close()

    expected = [(i, v) for i, v in enumerate(before + after)]
    bootstrap = broker.bootstrap_servers
    for client in ("confluent-kafka", "kafka-python"):
        seen = read_until_end(client, bootstrap, TOPIC, 1, "read_uncommitted", timeout=60)
        assert [(o, v) for o, _, v in seen[0]] == expected, client
    assert read_with_odradek(bootstrap, TOPIC) == expected


def read_with_odradek(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    got: list[tuple[int, bytes]] = []
    try:
        def until_end() -> bool:
            for recs in consumer.poll(timeout_ms=500).values():
                got.extend((r.offset, r.value) for r in recs)
            return bool(got) and got[-1][1] == END
        wait_until(until_end, 60, "odradek's consumer reaching the end marker")
    finally:
        consumer.close()
    return got[:-1]


def test_per_record_errors_in_produce_v8(broker):
    c = RawClient(broker.broker_address(1))
    assert produce_one(c, COMPACTED, valid([b"v0"], keys=[b"a"])).error_code == 0
    r = produce_one(c, COMPACTED, valid([b"v1", b"v2", b"v3"], keys=[b"a", None, b"c"]))
    assert (r.error_code, r.error_message) == (87, "One or more records have been rejected")
    assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == [
        (1, f"Compacted topic cannot accept message without key in topic partition {COMPACTED}-0.")]
    old = now_ms() - 2 * 3600_000
    r = produce_one(c, COMPACTED, valid([b"v1", b"v2"], keys=[b"a", b"b"], timestamps=[now_ms(), old]))
    assert (r.error_code, r.error_message) == (32, "One or more records have been rejected due to invalid timestamp")
    assert [e.batch_index for e in r.record_errors] == [1]
    assert end_offset(c, COMPACTED) == 1
    assert produce_one(c, COMPACTED, valid([b"v4"], keys=[b"d"])).base_offset == 1
    c.close()
