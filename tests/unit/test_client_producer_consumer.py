"""Producer and Consumer against the in-test fake broker: partitioning, retries, resets, seeks."""
from __future__ import annotations

import pytest
from client_fake_broker import FakeBroker

from odradek.client import Consumer, KafkaError, Producer, TopicPartition
from odradek.client.partitioner import partition_for_key
from odradek.protocol.errors import ErrorCode


@pytest.fixture
def broker():
    b = FakeBroker()
    b.create_topic("t", 4)
    yield b
    b.stop()


def producer(b, **kw):
    kw.setdefault("request_timeout_ms", 5000)
    kw.setdefault("max_block_ms", 5000)
    return Producer(bootstrap_servers=b.bootstrap, **kw)


def consumer(b, **kw):
    kw.setdefault("auto_offset_reset", "earliest")
    return Consumer(bootstrap_servers=b.bootstrap, **kw)


def drain(c, n, timeout_ms=5000):
    out = []
    import time
    deadline = time.monotonic() + timeout_ms / 1000
    while len(out) < n and time.monotonic() < deadline:
        for recs in c.poll(200).values():
            out.extend(recs)
    return out


def test_keyed_records_land_where_java_puts_them(broker):
    p = producer(broker, linger_ms=5)
    futs = [(f"key-{i}".encode(), p.send("t", b"v", key=f"key-{i}")) for i in range(200)]
    p.flush()
    for key, f in futs:
        assert f.get(0).partition == partition_for_key(key, 4)
    p.close()


def test_null_keys_stick_to_one_partition_per_batch(broker):
    p = producer(broker, linger_ms=1000, batch_size=100_000)
    parts = {p.send("t", b"x" * 10).batch for _ in range(50)}
    p.flush()
    assert len(parts) == 1
    p.close()


def test_roundtrip_keys_values_headers_timestamps(broker):
    p = producer(broker, compression_type="gzip", linger_ms=2)
    for i in range(300):
        p.send("t", f"value-{i}", key=f"k{i % 7}", headers=[("n", str(i).encode()), ("none", None)],
               timestamp_ms=1_600_000_000_000 + i)
    p.flush()
    p.close()
    c = consumer(broker)
    c.assign([TopicPartition("t", i) for i in range(4)])
    recs = drain(c, 300)
    assert len(recs) == 300
    by_partition = {}
    for r in recs:
        i = int(r.value.decode().split("-")[1])
        assert r.key == f"k{i % 7}".encode()
        assert r.headers == [("n", str(i).encode()), ("none", None)]
        assert r.timestamp == 1_600_000_000_000 + i and r.timestamp_type == 0
        assert r.partition == partition_for_key(r.key, 4)
        by_partition.setdefault(r.partition, []).append((r.offset, i))
    for rows in by_partition.values():
        assert [o for o, _ in rows] == list(range(len(rows)))
        assert [i for _, i in rows] == sorted(i for _, i in rows)     # order kept per partition
    c.close()


def test_retriable_error_is_retried(broker):
    broker.produce_errors = [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT]
    p = producer(broker, retry_backoff_ms=10)
    md = p.send("t", b"v", partition=1).get(10)
    assert md.offset == 0 and md.partition == 1
    assert broker.produce_errors == []
    p.close()


def test_non_retriable_error_fails_the_future(broker):
    broker.produce_errors = [ErrorCode.MESSAGE_TOO_LARGE]
    p = producer(broker)
    f = p.send("t", b"v", partition=0)
    with pytest.raises(KafkaError) as e:
        f.get(10)
    assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE
    p.close()


def test_retries_zero_fails_at_once(broker):
    broker.produce_errors = [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    p = producer(broker, retries=0)
    with pytest.raises(KafkaError) as e:
        p.send("t", b"v", partition=0).get(10)
    assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    p.close()


def test_acks_zero_gives_offset_minus_one(broker):
    p = producer(broker, acks=0)
    md = p.send("t", b"v", partition=2).get(10)
    assert md.offset == -1
    p.flush()
    p.close()


def test_unknown_partition_and_oversized_record_raise(broker):
    p = producer(broker, max_request_size=1000)
    with pytest.raises(KafkaError):
        p.send("t", b"v", partition=99)
    with pytest.raises(KafkaError) as e:
        p.send("t", b"x" * 2000)
    assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE
    p.close()


def test_auto_created_topic_and_callbacks(broker):
    p = producer(broker)
    got = []
    p.send("fresh", b"v", callback=lambda md, exc: got.append((md, exc)))
    p.flush()
    assert got and got[0][1] is None and got[0][0].topic == "fresh"
    assert p.partitions_for("fresh") == {0}
    p.close()


def test_consumer_positions_seek_and_offsets(broker):
    p = producer(broker)
    for i in range(10):
        p.send("t", str(i), partition=0)
    p.flush()
    p.close()
    tp = TopicPartition("t", 0)
    c = consumer(broker, auto_offset_reset="latest")
    c.assign([tp])
    assert c.position(tp) == 10
    assert c.beginning_offsets([tp]) == {tp: 0} and c.end_offsets([tp]) == {tp: 10}
    c.seek(tp, 4)
    recs = drain(c, 6)
    assert [r.offset for r in recs] == list(range(4, 10)) and recs[0].value == b"4"
    c.seek_to_beginning(tp)
    assert c.position(tp) == 0
    assert [r.offset for r in c.poll(2000, max_records=3)[tp]] == [0, 1, 2]
    c.seek(tp, 50)                                   # out of range -> auto.offset.reset (latest)
    assert c.poll(1500) == {}                        # (a prefetch from offset 10 may be pending first)
    assert c.position(tp) == 10
    c.close()


def test_check_crcs_refuses_a_corrupt_batch_and_false_hands_it_out(broker):
    p = producer(broker)
    p.send("t", b"value", partition=0).get(10)
    p.close()
    with broker.lock:                                # a byte of the stored value flipped, CRC unchanged
        base, batch = broker.logs[("t", 0)][0]
        broker.logs[("t", 0)][0] = (base, batch.replace(b"value", b"Value"))
    tp = TopicPartition("t", 0)
    checking = consumer(broker)
    checking.assign([tp])
    with pytest.raises(KafkaError) as e:
        drain(checking, 1)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaError):                  # again: the batch is not skipped unseen
        checking.poll(200)
    assert checking.position(tp) == 0
    checking.seek(tp, 1)                             # past it: no error, nothing to read
    assert checking.poll(500) == {} and checking.position(tp) == 1
    checking.close()
    trusting = consumer(broker, check_crcs=False)
    trusting.assign([tp])
    assert [r.value for r in drain(trusting, 1)] == [b"Value"]
    trusting.close()


def test_offset_reset_none_raises(broker):
    tp = TopicPartition("t", 3)
    c = consumer(broker, auto_offset_reset="none")
    c.assign([tp])
    with pytest.raises(KafkaError):
        c.poll(100)
    c.close()


def test_iteration_stops_after_consumer_timeout(broker):
    p = producer(broker)
    for i in range(5):
        p.send("t", str(i), partition=2)
    p.close()
    c = consumer(broker, consumer_timeout_ms=300)
    c.assign([TopicPartition("t", 2)])
    assert [r.value for r in c] == [str(i).encode() for i in range(5)]
    c.close()


def test_deserializers_and_topics(broker):
    p = producer(broker, value_serializer=lambda v: v.upper().encode())
    p.send("t", "abc", partition=0).get(5)
    p.close()
    c = consumer(broker, value_deserializer=bytes.decode)
    c.assign([TopicPartition("t", 0)])
    assert drain(c, 1)[0].value == "ABC"
    assert "t" in c.topics()
    assert c.partitions_for_topic("t") == {0, 1, 2, 3}
    assert c.partitions_for_topic("nope") is None
    c.close()
