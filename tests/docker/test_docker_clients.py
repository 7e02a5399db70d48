"""Clients on the host against the compose cluster, through the EXTERNAL listeners only.

Each client creates its own topic (3 partitions, replication factor 3) with its own admin
API, produces keyed records, and reads every one of them back; the brokers' metadata must
show three replicas per partition, all in sync, and advertise localhost:<published port>.
"""
from __future__ import annotations

import time

from compose_cluster import BROKERS, ComposeCluster, wait_until

N = 300
PARTITIONS = 3


def _expected(client: str) -> dict[bytes, bytes]:
    return {f"{client}-key-{i}".encode(): f"{client}-value-{i}".encode() for i in range(N)}


def _check_topic(cluster: ComposeCluster, topic: str) -> None:
    parts = cluster.wait_in_sync(topic, timeout=60)
    assert len(parts) == PARTITIONS
    for p in parts:
        assert sorted(p["replicas"]) == list(BROKERS), p


def _create_topic(cluster: ComposeCluster, topic: str) -> None:
    from odradek.client import NewTopic
    admin = cluster.admin()
    try:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3)])
    finally:
        admin.close()
    _check_topic(cluster, topic)


def test_metadata_advertises_external_listeners(cluster: ComposeCluster) -> None:
    admin = cluster.admin()
    try:
        desc = admin.describe_cluster()
    finally:
        admin.close()
    assert {(b["node_id"], b["host"], b["port"]) for b in desc["brokers"]} == \
        {(b, "localhost", cluster.ports[b]) for b in BROKERS}
    assert desc["controller_id"] in BROKERS


def test_odradek_client(cluster: ComposeCluster) -> None:
    from odradek.client import Consumer, Producer, TopicPartition

    topic, expected = "docker-odradek", _expected("odradek")
    _create_topic(cluster, topic)

    producer = Producer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic, key=k, value=v) for k, v in expected.items()]
        producer.flush(60)
        assert all(f.get(10).offset >= 0 for f in futures)
    finally:
        producer.close()

    consumer = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
    got: dict[bytes, bytes] = {}
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.update((r.key, r.value) for r in records)
    finally:
        consumer.close()
    assert got == expected


def test_kafka_python(cluster: ComposeCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    topic, expected = "docker-kafka-python", _expected("kafka-python")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3)])
    finally:
        admin.close()
    _check_topic(cluster, topic)

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic, key=k, value=v) for k, v in expected.items()]
        producer.flush(60)
        assert all(f.get(10).offset >= 0 for f in futures)
    finally:
        producer.close()

    consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                             group_id=None, enable_auto_commit=False, consumer_timeout_ms=1000)
    got: dict[bytes, bytes] = {}
    try:
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.update((r.key, r.value) for r in records)
    finally:
        consumer.close()
    assert got == expected


def test_confluent_kafka(cluster: ComposeCluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, expected = "docker-confluent", _expected("confluent")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3)],
                                  operation_timeout=30)
    futures[topic].result(60)
    _check_topic(cluster, topic)

    errors: list = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for k, v in expected.items():
        producer.produce(topic, key=k, value=v, on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(60) == 0
    assert errors == []

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "docker-confluent-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    got: dict[bytes, bytes] = {}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got[msg.key()] = msg.value()
    finally:
        consumer.close()
    assert got == expected


def test_healthchecks_report_roles(cluster: ComposeCluster) -> None:
    out = cluster.docker("exec", cluster.container("zookeeper-1"), "odradek-healthcheck").stdout
    assert out.startswith("zookeeper: ") and ("leader" in out or "follower" in out), out
    out = cluster.docker("exec", cluster.broker(1), "odradek-healthcheck").stdout
    assert out.startswith("broker: ApiVersions ok"), out
    # the image's user is not root
    assert cluster.docker("exec", cluster.broker(1), "id", "-u").stdout.strip() != "0"
    wait_until(lambda: cluster.health("broker-1") == "healthy", 30, "broker-1 healthy")


def test_prometheus_scrapes_every_broker(cluster: ComposeCluster) -> None:
    """Issue 18's acceptance: every broker's published /metrics parses with prometheus_client's
    parser, and its counters move with a produced load (MessagesIn by the exact count)."""
    from odradek.client import Producer
    from odradek.testing import scrape_all

    topic, n = "docker-metrics", 120
    btm = "kafka_server_brokertopicmetrics_"

    def totals(name: str, **labels: str) -> float:
        return sum(s.total(name, **labels) for s in scrape_all(cluster.metrics_urls).values())
    scrapes = wait_until(lambda: scrape_all(cluster.metrics_urls), 60, "every broker's /metrics to answer")
    assert set(scrapes) == set(BROKERS)
    assert sum(s.value("kafka_controller_kafkacontroller_activecontrollercount") for s in scrapes.values()) == 1
    produce_requests = totals("kafka_network_requestmetrics_requests_total", request="Produce")
    _create_topic(cluster, topic)
    producer = Producer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    try:
        for i in range(n):
            producer.send(topic, value=f"metrics-{i}".encode())
        producer.flush(60)
    finally:
        producer.close()
    wait_until(lambda: totals(btm + "messagesin_total", topic=topic) == n, 60,
               f"MessagesIn of {topic} to reach {n} across the brokers")
    assert totals(btm + "bytesin_total", topic=topic) > n * len("metrics-0")
    assert totals("kafka_network_requestmetrics_requests_total", request="Produce") > produce_requests
    assert totals("kafka_network_requestmetrics_requests_total", request="FetchFollower") > 0
