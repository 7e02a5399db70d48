"""The producer and consumer follow a partition leader change (kill -9 of the leader)."""
from __future__ import annotations

import socket
import threading
import time

from odradek.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from odradek.testing import wait_until


def leader_of(admin: AdminClient, topic: str, partition: int) -> int:
    parts = admin.describe_topics([topic])[0]["partitions"]
    return next((p["leader"] for p in parts if p["partition"] == partition), -1)


def test_produce_and_consume_follow_the_new_leader(cluster_factory):
    cluster = cluster_factory(brokers=3)
    bootstrap = cluster.bootstrap_servers
    topic = "failover"
    tp = TopicPartition(topic, 0)
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 3)])
        old_leader = wait_until(lambda: max(leader_of(admin, topic, 0), 0), what="a leader")


    producer = Producer(bootstrap_servers=bootstrap, acks=1, retry_backoff_ms=50, request_timeout_ms=5000)
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                        request_timeout_ms=5000)
    consumer.assign([tp])
    seen: list[bytes] = []

    def consume_until(values: set[bytes], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not values <= set(seen) and time.monotonic() < deadline:
            seen.extend(r.value for r in consumer.poll(500).get(tp, []))
        assert values <= set(seen), f"missing {len(values - set(seen))} records"

    try:
        before = {f"before-{i}".encode() for i in range(200)}
        for v in sorted(before):
            producer.send(topic, v)
        producer.flush(30)
        consume_until(before)

        cluster.kill_broker(old_leader)
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            new_leader = wait_until(lambda: (lid := leader_of(admin, topic, 0)) not in (-1, old_leader) and lid,
                                    what="a new leader")
        assert new_leader != old_leader

        after = {f"after-{i}".encode() for i in range(200)}
        futures = [producer.send(topic, v) for v in sorted(after)]
        producer.flush(60)
        for f in futures:
            assert f.get(0).partition == 0          # acknowledged by the new leader
        consume_until(after)
    finally:
        producer.close(10)
        consumer.close()


def test_clients_survive_a_broker_restart(cluster_factory):
    """Connection loss: producer retries until the broker is back; the consumer resumes at its position."""
    cluster = cluster_factory(brokers=1)
    bootstrap = cluster.bootstrap_servers
    topic = "restart"
    tp = TopicPartition(topic, 0)
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        wait_until(lambda: leader_of(admin, topic, 0) >= 0, what="a leader")
    producer = Producer(bootstrap_servers=bootstrap, retry_backoff_ms=100, request_timeout_ms=3000,
                        reconnect_backoff_ms=100)
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                        request_timeout_ms=3000, reconnect_backoff_ms=100)
    consumer.assign([tp])
    try:
        for i in range(100):
            producer.send(topic, f"a-{i}".encode())
        producer.flush(30)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            got += consumer.poll(500).get(tp, [])
        assert [r.offset for r in got] == list(range(100))

        cluster.kill_broker(1)
        futures = [producer.send(topic, f"b-{i}".encode()) for i in range(100)]   # queued while it is down
        assert consumer.poll(300) == {}
        cluster.start_broker(1)
        producer.flush(90)
        assert [f.get(0).offset for f in futures] == list(range(100, 200))
        deadline = time.monotonic() + 60
        while len(got) < 200 and time.monotonic() < deadline:
            got += consumer.poll(500).get(tp, [])
        assert [r.offset for r in got] == list(range(200))
        assert [r.value for r in got[100:]] == [f"b-{i}".encode() for i in range(100)]
    finally:
        producer.close(10)
        consumer.close()


def test_a_restarted_broker_answers_metadata_with_the_cluster_from_its_first_request(cluster_factory):
    """After a kill -9 a restarted broker listens well before it can register (its old ZooKeeper
    session must expire first), and then before the controller's UpdateMetadata reaches it. A
    client that reaches it then must not be told the cluster has no brokers and no topics
    (librdkafka's list_topics failed with "Partial response"): its Metadata waits for the cluster."""
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    cluster = cluster_factory(brokers=2, overrides={"zookeeper.session.timeout.ms": 12000})   # a window of 12 s
    topic = "seen-after-restart"
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 2, 2)])
        wait_until(lambda: all(leader_of(admin, topic, p) >= 0 for p in (0, 1)), what="leaders")
    restarted = 3 - wait_until(cluster.controller, what="a controller")   # the broker that is not controller
    host, port = cluster.broker_address(restarted).rsplit(":", 1)
    registration = cluster.zk.exists(f"/brokers/ids/{restarted}").czxid
    cluster.kill_broker(restarted)
    starting = threading.Thread(target=cluster.start_broker, args=(restarted,))
    starting.start()
    try:
        def accepts() -> bool:
            with socket.socket() as s:
                return s.connect_ex((host, int(port))) == 0
        wait_until(accepts, 60, "the restarted broker's listener", interval=0.01)
        now = cluster.zk.exists(f"/brokers/ids/{restarted}")
        assert now is None or now.czxid == registration   # asked before it registered anew
        md = ConfluentAdmin({"bootstrap.servers": f"{host}:{port}"}).list_topics(timeout=60)
        assert sorted(md.brokers) == [1, 2]
        assert topic in md.topics and sorted(md.topics[topic].partitions) == [0, 1]
    finally:
        starting.join(120)
