"""``docker compose restart`` of the whole cluster keeps everything in the named volumes:
every topic (with its partitions and replicas), every record, and the committed offsets of
a consumer group (when the brokers serve consumer groups: OffsetCommit/OffsetFetch)."""
from __future__ import annotations


from compose_cluster import BROKERS, ComposeCluster, read_partition, wait_until

TOPIC = "docker-restart"
PARTITIONS = 3
GROUP = "docker-restart-group"


def _topics(cluster: ComposeCluster, bootstrap: str | None = None) -> dict[str, list[tuple[int, list[int]]]]:
    admin = cluster.admin(bootstrap)
    try:
        return {d["topic"]: sorted((p["partition"], sorted(p["replicas"])) for p in d["partitions"])
                for d in admin.describe_topics() if not d["is_internal"] and d["error_code"] == 0}
    finally:
        admin.close()


def _commit(cluster: ComposeCluster, offsets: dict[int, int]) -> None:
    """Commit offsets for GROUP (raises if the brokers cannot)."""
    from odradek.client import Consumer, TopicPartition
    consumer = Consumer(bootstrap_servers=cluster.bootstrap, group_id=GROUP, enable_auto_commit=False,
                        default_api_timeout_ms=30000)
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in offsets])
        consumer.commit({TopicPartition(TOPIC, p): o for p, o in offsets.items()})
    finally:
        consumer.close(autocommit=False)


def _committed(cluster: ComposeCluster) -> dict[int, int | None]:
    from odradek.client import Consumer, TopicPartition
    consumer = Consumer(bootstrap_servers=cluster.bootstrap, group_id=GROUP, enable_auto_commit=False,
                        default_api_timeout_ms=30000)
    try:
        return {p: consumer.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
    finally:
        consumer.close(autocommit=False)


def test_compose_restart_keeps_topics_data_and_offsets(healthy_cluster: ComposeCluster) -> None:
    cluster = healthy_cluster
    from odradek.client import NewTopic, Producer
    admin = cluster.admin()
    try:
        admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3)])
    finally:
        admin.close()
    cluster.wait_in_sync(TOPIC)
    producer = Producer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    try:
        for i in range(300):
            producer.send(TOPIC, key=f"k{i}".encode(), value=f"restart-{i}".encode())
        producer.flush(60)
    finally:
        producer.close()
    topics = _topics(cluster)
    before = {p: read_partition(cluster.bootstrap, TOPIC, p) for p in range(PARTITIONS)}
    assert sum(len(r) for r in before.values()) == 300
    wanted = {p: min(len(before[p]), 10 + p) for p in range(PARTITIONS)}
    _commit(cluster, wanted)

    cluster.compose_cmd("restart", timeout=300)
    cluster.wait_healthy(timeout=180)
    # Every broker's own view: one just started answers from an empty metadata cache until the
    # controller's UpdateMetadata reaches it, as Kafka's brokers do.
    for b in BROKERS:
        own = f"localhost:{cluster.ports[b]}"
        wait_until(lambda: cluster.broker_count(own) == len(BROKERS), 60, f"broker {b} to see every broker again")
        wait_until(lambda: _topics(cluster, own) == topics, 120, f"broker {b} to serve every topic as before")
    for topic in topics:
        cluster.wait_in_sync(topic, timeout=120)

    after = {p: read_partition(cluster.bootstrap, TOPIC, p) for p in range(PARTITIONS)}
    assert after == before
    assert wait_until(lambda: _committed(cluster) == wanted, 60, "the committed offsets after restart")
