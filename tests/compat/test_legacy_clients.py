"""Old clients (magic 0 and 1 message sets) against a real odradek broker, as Kafka 2.8 serves them.

kafka-python pinned to api_version (0, 10, 1) and (0, 10, 0) produces magic 1 (Produce v2) and
fetches with Fetch v3 / v2; pinned to (0, 9) it produces magic 0 (Produce v1) and fetches with
Fetch v1. Each writes keyed records (one without a key), uncompressed and compressed, into its
own topic; confluent-kafka (a modern consumer: magic 2) and the same old client (down-converted)
must read exactly them back: contiguous offsets from 0, keys, values, and the timestamps the
format carries. The other way, confluent-kafka writes (with headers and compression) and the old
clients read it down-converted. kcat (librdkafka) told the broker is 0.9.0 or 0.10.0 does the
same both ways, magic-0 LZ4 included (kafka-python needs the xxhash package for that one).
"""
from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.compat

COUNT = 60
BASE_TS = 1_700_000_000_000
OLD = {"0.10.1": (0, 10, 1), "0.10.0": (0, 10, 0), "0.9": (0, 9)}
CASES = [(v, c) for v in OLD for c in ("none", "gzip", "snappy", "lz4") if not (v == "0.9" and c == "lz4")]


def _records(tag: str) -> list[tuple[bytes | None, bytes, int]]:
    return [(None if i == 7 else b"key-%d" % i, b"%s-value-%d-" % (tag.encode(), i) + b"x" * (i % 13),
             BASE_TS + i * 1000) for i in range(COUNT)]


def _create_topic(bootstrap: str, topic: str, **configs: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs=configs)])
    finally:
        admin.close()


def _produce_old(bootstrap: str, topic: str, version: tuple, codec: str, records: list) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=version, acks="all", linger_ms=20,
                             compression_type=None if codec == "none" else codec)
    try:
        futures = [producer.send(topic, key=k, value=v, partition=0, timestamp_ms=ts) for k, v, ts in records]
        producer.flush(30)
        assert all(f.get(timeout=30) is not None for f in futures)
    finally:
        producer.close()


def _consume_old(bootstrap: str, topic: str, version: tuple, total: int, timeout: float = 60) -> list:
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=version, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    seen: list = []
    try:
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + timeout
        while len(seen) < total and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                seen += [(m.offset, m.key, m.value, m.timestamp) for m in batch]
    finally:
        consumer.close()
    return seen


def _consume_confluent(bootstrap: str, topic: str, total: int, timeout: float = 60) -> list:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"legacy-{topic}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    seen: list = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while len(seen) < total and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            seen.append((m.offset(), m.key(), m.value(), m.timestamp()[1], m.headers()))
    finally:
        consumer.close()
    return seen


@pytest.mark.parametrize("version,codec", CASES, ids=[f"{v}-{c}" for v, c in CASES])
def test_an_old_producer_is_read_by_modern_and_old_consumers(compat_cluster, version, codec):
    bootstrap, topic = compat_cluster.bootstrap_servers, f"legacy-{version}-{codec}"
    _create_topic(bootstrap, topic)
    records = _records(topic)
    _produce_old(bootstrap, topic, OLD[version], codec, records)
    magic0 = OLD[version] < (0, 10)
    expected = [(i, k, v, -1 if magic0 else ts) for i, (k, v, ts) in enumerate(records)]
    modern = _consume_confluent(bootstrap, topic, COUNT)
    assert [(o, k, v, ts) for o, k, v, ts, _ in modern] == expected
    # kafka-python reads "no timestamp" in magic 0 as None
    assert _consume_old(bootstrap, topic, OLD[version], COUNT) == [(o, k, v, None if magic0 else ts)
                                                                   for o, k, v, ts in expected]


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4"])
def test_old_consumers_read_what_a_modern_producer_wrote(compat_cluster, codec):
    from confluent_kafka import Producer
    bootstrap, topic = compat_cluster.bootstrap_servers, f"legacy-from-modern-{codec}"
    _create_topic(bootstrap, topic)
    records = _records(topic)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.codec": codec, "linger.ms": 20,
                         "enable.idempotence": True})
    for k, v, ts in records:   # headers: magic 0/1 cannot carry them, the old consumers just lose them
        producer.produce(topic, key=k, value=v, partition=0, timestamp=ts, headers=[("h", b"dropped")])
    assert producer.flush(30) == 0
    del producer   # its handle would keep trying the broker after the cluster stops
    for version in ("0.10.1", "0.10.0") if codec == "lz4" else ("0.10.1", "0.10.0", "0.9"):
        got = _consume_old(bootstrap, topic, OLD[version], COUNT)
        magic0 = OLD[version] < (0, 10)
        assert got == [(i, k, v, None if magic0 else ts) for i, (k, v, ts) in enumerate(records)], version


def test_down_conversion_disabled_and_old_formats_refused_as_configs(compat_cluster):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource
    from kafka.errors import UnsupportedVersionError
    bootstrap, topic = compat_cluster.bootstrap_servers, "legacy-no-downconversion"
    _create_topic(bootstrap, topic, **{"message.downconversion.enable": "false"})
    records = _records(topic)[:5]
    _produce_old(bootstrap, topic, (0, 10, 0), "gzip", records)   # up-conversion is not affected
    assert [(o, k) for o, k, *_ in _consume_confluent(bootstrap, topic, 5)] == \
        [(i, k) for i, (k, _, _) in enumerate(records)]
    with pytest.raises(UnsupportedVersionError):   # what Kafka answers an old fetch of such a topic
        _consume_old(bootstrap, topic, (0, 10, 0), 5)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"message.format.version": "0.10.2"})
    with pytest.raises(KafkaException) as e:
        admin.alter_configs([resource])[resource].result(30)
    error = e.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG and "message format v2" in error.str()
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    [configs] = [f.result(30) for f in described.values()]
    assert configs["message.format.version"].value == "2.8-IV1"
    del admin


@pytest.mark.parametrize("fallback,codec", [("0.9.0", "lz4"), ("0.9.0", "snappy"), ("0.10.0", "lz4"),
                                            ("0.10.0", "gzip")])
def test_kcat_speaking_an_old_protocol(compat_cluster, fallback, codec):
    """librdkafka told the broker is old (no ApiVersions): Produce v1/v2 with magic 0/1 — magic-0 LZ4
    with the KAFKA-3160 header checksum — and Fetch v1/v2, both ways through the conversions."""
    import json
    import subprocess
    bootstrap, topic = compat_cluster.bootstrap_servers, f"legacy-kcat-{fallback}-{codec}"
    _create_topic(bootstrap, topic)
    old = ["-X", "api.version.request=false", "-X", f"broker.version.fallback={fallback}"]
    lines = [(b"key-%d" % i, b"value-%d-" % i + b"y" * (i % 17)) for i in range(COUNT)]
    subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-K", "\t", "-z", codec, *old],
                   input=b"".join(k + b"\t" + v + b"\n" for k, v in lines), check=True, timeout=120,
                   capture_output=True)
    modern = _consume_confluent(bootstrap, topic, COUNT)
    assert [(o, k, v) for o, k, v, _, _ in modern] == [(i, k, v) for i, (k, v) in enumerate(lines)]
    # magic 0 carries no timestamp: the proof librdkafka spoke the old format
    assert all((ts == -1) == (fallback == "0.9.0") for _, _, _, ts, _ in modern)
    out = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-J",
                          *old], check=True, timeout=120, capture_output=True).stdout
    got = [json.loads(line) for line in out.splitlines()]
    assert [(m["offset"], m["key"].encode(), m["payload"].encode()) for m in got] == \
        [(i, k, v) for i, (k, v) in enumerate(lines)]
