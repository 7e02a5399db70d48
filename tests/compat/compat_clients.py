"""One adapter per Kafka client, so every client is driven the way its users drive it.

Invariant: adapters only use each library's public API (and kcat's command line);
they report what the client saw, never what we expect, so the tests compare the two.
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import time
from dataclasses import dataclass

from kafka.partitioner.default import murmur2 as kafka_python_murmur2

PARTITIONS = 3


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int | None  # None: the client cannot set it (CreateTime chosen by the client)


def expected_partition(key: bytes, partitions: int = PARTITIONS) -> int:
    """The Java client's default partition for a keyed record (computed by kafka-python)."""
    return (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions


def make_records(producer: str, codec: str, count: int, base_ts: int) -> list[Rec]:
    can_set_timestamps = producer != "kcat"
    out = []
    for i in range(count):
        headers = (("h", b"kcat"),) if producer == "kcat" else (("h", str(i).encode()), ("src", producer.encode()))
        out.append(Rec(key=f"key-{i % 37}".encode(), value=f"{producer}/{codec}/value-{i}".encode(),
                       headers=headers, timestamp=base_ts + i if can_set_timestamps else None))
    return out


# ------------------------------------------------------------------ producers

def produce_odradek(bootstrap: str, topic: str, records: list[Rec], codec: str) -> None:
    from odradek.client import Producer
    producer = Producer(bootstrap_servers=bootstrap, compression_type=codec, acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic, value=r.value, key=r.key, headers=list(r.headers), timestamp_ms=r.timestamp)
                   for r in records]
        producer.flush(60)
        for f in futures:
            f.get(timeout=60)
    finally:
        producer.close()


def produce_kafka_python(bootstrap: str, topic: str, records: list[Rec], codec: str) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                             acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic, value=r.value, key=r.key, headers=list(r.headers), timestamp_ms=r.timestamp)
                   for r in records]
        producer.flush(60)
        for f in futures:
            f.get(timeout=60)
    finally:
        producer.close()


def produce_confluent(bootstrap: str, topic: str, records: list[Rec], codec: str) -> None:
    from confluent_kafka import Producer
    errors: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "acks": "all",
                         "linger.ms": 5, "partitioner": "murmur2_random"})
    for r in records:
        while True:
            try:
                producer.produce(topic, value=r.value, key=r.key, headers=list(r.headers), timestamp=r.timestamp or 0,
                                 on_delivery=lambda err, msg: err and errors.append(err))
                break
            except BufferError:
                producer.poll(0.1)
    remaining = producer.flush(60)
    assert remaining == 0 and not errors, (remaining, errors[:3])


def produce_aiokafka(bootstrap: str, topic: str, records: list[Rec], codec: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                    compression_type=None if codec == "none" else codec)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=r.value, key=r.key, headers=list(r.headers),
                                           timestamp_ms=r.timestamp) for r in records]
            for f in futures:
                await f
        finally:
            await producer.stop()

    asyncio.run(run())


def produce_kcat(bootstrap: str, topic: str, records: list[Rec], codec: str) -> None:
    lines = b"".join(r.key + b"\t" + r.value + b"\n" for r in records)
    cmd = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-z", codec, "-H", "h=kcat",
           "-X", "partitioner=murmur2_random", "-X", "acks=all"]
    subprocess.run(cmd, input=lines, check=True, timeout=120, capture_output=True)


PRODUCERS = {
    "odradek": produce_odradek,
    "kafka-python": produce_kafka_python,
    "confluent-kafka": produce_confluent,
    "aiokafka": produce_aiokafka,
    "kcat": produce_kcat,
}


# ------------------------------------------------------------------ consumers
# Each returns {partition: [(offset, Rec)]} read from the beginning of every partition.

Seen = dict[int, list[tuple[int, Rec]]]


def _done(seen: Seen, total: int) -> bool:
    return sum(len(v) for v in seen.values()) >= total


def consume_odradek(bootstrap: str, topic: str, total: int, timeout: float = 60) -> Seen:
    from odradek.client import Consumer, TopicPartition
    seen: Seen = {p: [] for p in range(PARTITIONS)}
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout
        while not _done(seen, total) and time.monotonic() < deadline:
            for tp, recs in consumer.poll(timeout_ms=500).items():
                for m in recs:
                    seen[tp.partition].append((m.offset, Rec(m.key, m.value, tuple(m.headers), m.timestamp)))
    finally:
        consumer.close()
    return seen


def consume_kafka_python(bootstrap: str, topic: str, total: int, timeout: float = 60) -> Seen:
    from kafka import KafkaConsumer, TopicPartition
    seen: Seen = {p: [] for p in range(PARTITIONS)}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        while not _done(seen, total) and time.monotonic() < deadline:
            for tp, recs in consumer.poll(timeout_ms=500).items():
                for m in recs:
                    seen[tp.partition].append((m.offset, Rec(m.key, m.value, tuple(m.headers), m.timestamp)))
    finally:
        consumer.close()
    return seen


def consume_confluent(bootstrap: str, topic: str, total: int, timeout: float = 60) -> Seen:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    seen: Seen = {p: [] for p in range(PARTITIONS)}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"compat-{topic}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        while not _done(seen, total) and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                if m.error():
                    raise AssertionError(f"confluent-kafka consumer error: {m.error()}")
                headers = tuple((k, v) for k, v in (m.headers() or []))
                seen[m.partition()].append((m.offset(), Rec(m.key(), m.value(), headers, m.timestamp()[1])))
    finally:
        consumer.close()
    return seen


def consume_aiokafka(bootstrap: str, topic: str, total: int, timeout: float = 60) -> Seen:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    seen: Seen = {p: [] for p in range(PARTITIONS)}

    async def run() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + timeout
            while not _done(seen, total) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for tp, recs in batches.items():
                    for m in recs:
                        seen[tp.partition].append((m.offset, Rec(m.key, m.value, tuple(m.headers), m.timestamp)))
        finally:
            await consumer.stop()

    asyncio.run(run())
    return seen


def consume_kcat(bootstrap: str, topic: str, total: int, timeout: float = 60) -> Seen:
    seen: Seen = {p: [] for p in range(PARTITIONS)}
    out = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-J"],
                         check=True, timeout=timeout, capture_output=True).stdout
    for line in out.splitlines():
        m = json.loads(line)
        raw = m.get("headers") or []
        headers = tuple((raw[i], None if raw[i + 1] is None else raw[i + 1].encode()) for i in range(0, len(raw), 2))
        key = None if m["key"] is None else m["key"].encode()
        value = None if m["payload"] is None else m["payload"].encode()
        seen[m["partition"]].append((m["offset"], Rec(key, value, headers, m["ts"])))
    return seen


CONSUMERS = {
    "odradek": consume_odradek,
    "kafka-python": consume_kafka_python,
    "confluent-kafka": consume_confluent,
    "aiokafka": consume_aiokafka,
    "kcat": consume_kcat,
}
