"""Third-party clients against a real odradek broker, each used as its users use it.

Every producer (ours, kafka-python, confluent-kafka, aiokafka, kcat) writes 10,000
keyed records with and without gzip into its own 3-partition topic; every consumer
then reads every such topic from the beginning and must see exactly those records:
contiguous offsets from 0, the Java client's partition for each key, production
order within a partition, and the right keys, values, headers and timestamps.
"""
from __future__ import annotations

import json
import subprocess
import time

import pytest

from compat_clients import CONSUMERS, PARTITIONS, PRODUCERS, Rec, expected_partition, make_records

pytestmark = pytest.mark.compat

COUNT = 10_000
CODECS = ("none", "gzip")


def _create_topic(bootstrap: str, topic: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()


@pytest.fixture(scope="session", params=[(p, c) for p in PRODUCERS for c in CODECS], ids=lambda pc: f"{pc[0]}-{pc[1]}")
def produced(request, compat_cluster):
    """A topic written by one producer with one codec: (topic, records, produce window)."""
    producer, codec = request.param
    topic = f"compat-{producer}-{codec}"
    bootstrap = compat_cluster.bootstrap_servers
    _create_topic(bootstrap, topic)
    records = make_records(producer, codec, COUNT, base_ts=1_700_000_000_000)
    started = int(time.time() * 1000)
    PRODUCERS[producer](bootstrap, topic, records, codec)
    finished = int(time.time() * 1000)
    return topic, records, (started, finished)


@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_every_consumer_reads_every_producer(produced, consumer, compat_cluster):
    topic, records, (started, finished) = produced
    seen = CONSUMERS[consumer](compat_cluster.bootstrap_servers, topic, len(records))

    expected: dict[int, list[Rec]] = {p: [] for p in range(PARTITIONS)}
    for r in records:
        expected[expected_partition(r.key)].append(r)

    for p in range(PARTITIONS):
        got = seen[p]
        assert [o for o, _ in got] == list(range(len(expected[p]))), f"partition {p}: offsets not contiguous from 0"
        for (offset, g), e in zip(got, expected[p]):
            assert (g.key, g.value, g.headers) == (e.key, e.value, e.headers), f"partition {p} offset {offset}"
            if e.timestamp is not None:
                assert g.timestamp == e.timestamp, f"partition {p} offset {offset}: timestamp"
            else:
                assert started - 1000 <= g.timestamp <= finished + 1000, f"partition {p} offset {offset}: timestamp"


def test_kcat_lists_brokers_and_topics(compat_cluster):
    bootstrap = compat_cluster.bootstrap_servers
    _create_topic(bootstrap, "compat-kcat-metadata")
    meta = json.loads(subprocess.run(["kcat", "-L", "-b", bootstrap, "-J", "-t", "compat-kcat-metadata"],
                                     check=True, capture_output=True, timeout=30).stdout)
    assert [b["name"] for b in meta["brokers"]] == [bootstrap]
    (topic,) = meta["topics"]
    assert topic["topic"] == "compat-kcat-metadata"
    assert sorted(p["partition"] for p in topic["partitions"]) == list(range(PARTITIONS))
    assert all(p["leader"] == meta["brokers"][0]["id"] for p in topic["partitions"])


def test_confluent_admin_creates_topics(compat_cluster):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": compat_cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic("compat-confluent-admin", 4, 1)], operation_timeout=30)
    futures["compat-confluent-admin"].result(timeout=30)
    topics = admin.list_topics(timeout=10).topics
    assert len(topics["compat-confluent-admin"].partitions) == 4
    again = admin.create_topics([NewTopic("compat-confluent-admin", 4, 1)], operation_timeout=30)
    with pytest.raises(Exception) as err:
        again["compat-confluent-admin"].result(timeout=30)
    assert "TOPIC_ALREADY_EXISTS" in str(err.value)


def test_kafka_python_admin_rejects_bad_requests(compat_cluster):
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import InvalidReplicationFactorError, InvalidTopicError
    admin = KafkaAdminClient(bootstrap_servers=compat_cluster.bootstrap_servers)
    try:
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics([NewTopic("compat-too-many-replicas", 1, 3)])
        with pytest.raises(InvalidTopicError):
            admin.create_topics([NewTopic("bad/name", 1, 1)])
    finally:
        admin.close()
