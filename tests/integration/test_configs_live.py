"""Topic configs, and the broker defaults they fall back to, changed on a running cluster take
effect on every broker within seconds, with no restart, whichever way they are changed:
AlterConfigs (confluent-kafka), IncrementalAlterConfigs (confluent-kafka and kafka-python),
``odradek topics --alter``, ``odradek configs --zookeeper`` and ``--bootstrap-server``.

Invariant: one module-scoped 2-broker cluster; each test its own topic of 2 partitions, partition
0 led by broker 1 and partition 1 by broker 2, so an effect seen on both partitions was applied
by both brokers. Effects are what a producer or consumer sees (a broker's answer), never a
reading of the configuration itself.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from odradek.broker.log import OffsetCheckpointFile
from odradek.client import AdminClient, ErrorCode, KafkaError, NewTopic, Producer, TopicPartition
from odradek.client.consumer import Consumer
from odradek.testing import wait_until
from odradek_test_support import read_partition

pytestmark = pytest.mark.integration

ODRADEK = os.path.join(os.path.dirname(sys.executable), "odradek")
BOTH = (0, 1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from odradek.zk.cluster import LocalCluster
    c = LocalCluster(tmp_path_factory.mktemp("configs-live"), zookeepers=1, brokers=2,
                     overrides={"log.retention.check.interval.ms": "300", "replica.lag.time.max.ms": "1000",
                                "auto.leader.rebalance.enable": "false",
                                # the flusher checks flush.ms every 200 ms (flush.ms itself defaults to an hour,
                                # not to this interval); recovery points are written every 300 ms
                                "log.flush.scheduler.interval.ms": "200", "log.flush.interval.ms": "3600000",
                                "log.cleaner.backoff.ms": "200",
                                "log.flush.offset.checkpoint.interval.ms": "300"})
    c.start()
    try:
        yield c
    finally:
        c.stop()


def topic_on_both(cluster, name: str, configs: dict[str, str] | None = None) -> str:
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, topic_configs=configs or {}, replica_assignments={0: [1, 2], 1: [2, 1]})])
        wait_until(lambda: all(p["leader"] == p["replicas"][0] for p in admin.describe_topics([name])[0]["partitions"])
                   and len(admin.describe_topics([name])[0]["partitions"]) == 2, 60, f"leaders of {name}")
    return name


def produce_error(cluster, topic: str, partition: int, value: bytes, key: bytes | None = b"k", **config) -> int:
    """The error code the partition's leader answers a produce of one record with (0: appended)."""
    producer = Producer(bootstrap_servers=cluster.bootstrap_servers, retries=0, enable_idempotence=False,
                        linger_ms=0, **config)
    try:
        producer.send(topic, value, key=key, partition=partition).get(timeout=30)
        return 0
    except KafkaError as e:
        return int(e.code)
    finally:
        producer.close()


def eventually_on_both(cluster, topic: str, expected: int, value: bytes, key: bytes | None = b"k", **config) -> None:
    for p in BOTH:
        wait_until(lambda p=p: produce_error(cluster, topic, p, value, key, **config) == expected, 30,
                   f"{topic}-{p} (broker {p + 1} leads it) to answer a produce with error {expected}")


def odradek(cluster, *args: str) -> str:
    r = subprocess.run([ODRADEK, *args], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "ODRADEK_ZOOKEEPER": cluster.zookeeper_connect})
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout


def test_alter_configs_from_confluent_kafka_applies_live(cluster):
    from confluent_kafka.admin import AdminClient as RdAdmin, ConfigResource, ResourceType
    topic = topic_on_both(cluster, "live-legacy")
    eventually_on_both(cluster, topic, 0, b"x" * 5000)
    admin = RdAdmin({"bootstrap.servers": cluster.bootstrap_servers})
    [f] = admin.alter_configs([ConfigResource(ResourceType.TOPIC, topic,
                                              set_config={"max.message.bytes": "2000"})]).values()
    f.result(timeout=30)
    eventually_on_both(cluster, topic, ErrorCode.MESSAGE_TOO_LARGE, b"x" * 5000)
    assert all(produce_error(cluster, topic, p, b"x" * 500) == 0 for p in BOTH)

    # refusals change nothing
    bad = admin.alter_configs([ConfigResource(ResourceType.TOPIC, topic, set_config={"max.message.bytes": "big"})])
    with pytest.raises(Exception) as e:
        list(bad.values())[0].result(timeout=30)
    assert "INVALID_CONFIG" in str(e.value)
    dry = admin.alter_configs([ConfigResource(ResourceType.TOPIC, topic, set_config={"max.message.bytes": "100000"})],
                              validate_only=True)
    list(dry.values())[0].result(timeout=30)
    broker = admin.alter_configs([ConfigResource(ResourceType.BROKER, "1", set_config={"log.cleaner.threads": "2"})])
    with pytest.raises(Exception) as e:
        list(broker.values())[0].result(timeout=30)
    assert "Cannot update these configs dynamically" in str(e.value)
    assert all(produce_error(cluster, topic, p, b"x" * 5000) == ErrorCode.MESSAGE_TOO_LARGE for p in BOTH)


def test_incremental_alter_configs_append_and_delete_apply_live(cluster):
    from confluent_kafka.admin import (AdminClient as RdAdmin, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)
    from kafka.admin import ConfigResource as KResource, ConfigResourceType, KafkaAdminClient
    topic = topic_on_both(cluster, "live-incremental", {"retention.ms": "86400000"})
    eventually_on_both(cluster, topic, 0, b"v", key=None)
    admin = RdAdmin({"bootstrap.servers": cluster.bootstrap_servers})
    append = ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)
    [f] = admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic,
                                                          incremental_configs=[append])]).values()
    f.result(timeout=30)
    eventually_on_both(cluster, topic, ErrorCode.INVALID_RECORD, b"v", key=None)   # delete,compact: keys needed
    assert all(produce_error(cluster, topic, p, b"v", key=b"k") == 0 for p in BOTH)

    kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        kadmin.alter_configs([KResource(ConfigResourceType.TOPIC, topic, configs={"cleanup.policy": ("DELETE", None)})],
                             incremental=True, raise_on_unknown=False)
        described = kadmin.describe_configs([KResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
    finally:
        kadmin.close()
    eventually_on_both(cluster, topic, 0, b"v", key=None)
    assert described == {"retention.ms": described["retention.ms"]}   # only the untouched override is left
    assert described["retention.ms"]["value"] == "86400000"


def test_cli_changes_apply_live_retention_and_min_insync(cluster):
    topic = topic_on_both(cluster, "live-cli", {"segment.bytes": "1024"})
    for p in BOTH:
        for i in range(30):
            assert produce_error(cluster, topic, p, b"r%03d" % i + b"." * 100) == 0

    def earliest() -> dict[int, int]:
        consumer = Consumer(bootstrap_servers=cluster.bootstrap_servers)
        try:
            return {tp.partition: o for tp, o in consumer.beginning_offsets([TopicPartition(topic, p) for p in BOTH]).items()}
        finally:
            consumer.close()
    assert earliest() == {0: 0, 1: 0}
    odradek(cluster, "topics", "--alter", "--topic", topic, "--config", "retention.ms=100")
    wait_until(lambda: all(o > 0 for o in earliest().values()), 30, "retention to delete old segments on both brokers")

    odradek(cluster, "configs", "--zookeeper", cluster.zookeeper_connect, "--alter", "--entity-type", "topics",
            "--entity-name", topic, "--add-config", "min.insync.replicas=3")
    eventually_on_both(cluster, topic, ErrorCode.NOT_ENOUGH_REPLICAS, b"v", acks="all")
    assert all(produce_error(cluster, topic, p, b"v", acks=1) == 0 for p in BOTH)
    assert odradek(cluster, "configs", "--bootstrap-server", cluster.bootstrap_servers, "--alter", "--entity-type",
                   "topics", "--entity-name", topic, "--delete-config", "min.insync.replicas") == (
        f"Completed updating config for topic {topic}.\n")
    eventually_on_both(cluster, topic, 0, b"v", acks="all")


def test_flush_settings_move_the_recovery_points_of_leaders_and_followers_live(cluster):
    """flush.messages fsyncs at the append; flush.ms, set live, at the flusher's next check. What
    shows it is each broker's recovery-point-offset-checkpoint, where recovery after a crash
    starts: at the log end once flushed, at 0 for a log never flushed (no segment rolled)."""
    flushed = topic_on_both(cluster, "live-flush-messages", {"flush.messages": "1"})
    unflushed = topic_on_both(cluster, "live-flush-ms")
    for topic in (flushed, unflushed):
        for p in BOTH:
            for i in range(5):
                assert produce_error(cluster, topic, p, b"v%d" % i, acks="all") == 0

    def recovery_points(topic: str) -> list[int | None]:
        """Partition 0 and 1 on broker 1, then on broker 2 (each broker holds a replica of both)."""
        points = [OffsetCheckpointFile(str(cluster.brokers[b].dir / "logs" / "recovery-point-offset-checkpoint"))
                  .read() for b in (1, 2)]
        return [found.get((topic, p)) for found in points for p in BOTH]
    wait_until(lambda: recovery_points(flushed) == [5, 5, 5, 5], 30,
               f"the recovery points of {flushed} (flush.messages=1) to reach the log end on both brokers")
    assert recovery_points(unflushed) == [0, 0, 0, 0]
    odradek(cluster, "topics", "--alter", "--topic", unflushed, "--config", "flush.ms=100")
    wait_until(lambda: recovery_points(unflushed) == [5, 5, 5, 5], 30,
               f"the recovery points of {unflushed} (flush.ms=100, set live) to reach the log end on both brokers")


def test_flush_messages_answers_every_record_of_producers_at_once_with_acks_all(cluster):
    """flush.messages is a group commit: Produces that arrive while a sync runs wait for the next
    one, on the leader and (before the follower fetches again) on the follower. Four librdkafka
    producers with five requests in flight each, acks=all: every record is acknowledged without
    error, is in its partition exactly once, in its producer's order, and both brokers' recovery
    points reach the log end."""
    from confluent_kafka import Producer as RdProducer
    topic = topic_on_both(cluster, "live-group-commit", {"flush.messages": "1", "min.insync.replicas": "2"})
    errors: list = []
    producers = [RdProducer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0,
                             "max.in.flight.requests.per.connection": 5, "enable.idempotence": True})
                 for _ in range(4)]
    for i in range(200):
        for n, producer in enumerate(producers):
            producer.produce(topic, b"p%d-%03d" % (n, i), key=b"p%d" % n, partition=i % 2,
                             on_delivery=lambda err, msg: err is not None and errors.append(err))
            producer.poll(0)
    assert all(producer.flush(60) == 0 for producer in producers)
    assert errors == []
    for p in BOTH:
        values = [v for _, v in read_partition(cluster.bootstrap_servers, topic, p)]
        for n in range(4):
            mine = [v for v in values if v.startswith(b"p%d-" % n)]
            assert mine == [b"p%d-%03d" % (n, i) for i in range(p, 200, 2)], (p, n)
        assert len(values) == 400

    def recovery_points() -> list[int | None]:
        points = [OffsetCheckpointFile(str(cluster.brokers[b].dir / "logs" / "recovery-point-offset-checkpoint"))
                  .read() for b in (1, 2)]
        return [found.get((topic, p)) for found in points for p in BOTH]
    wait_until(lambda: recovery_points() == [400] * 4, 30, f"the recovery points of {topic} to reach the log end")


def test_max_compaction_lag_set_live_compacts_logs_their_dirty_ratio_never_would(cluster):
    """KIP-354: with min.cleanable.dirty.ratio 1.0 no log is ever dirty enough to clean (Kafka
    cleans above the ratio, never at it); max.compaction.lag.ms, set live, has each broker clean its
    partition anyway, down to the latest value per key, plus what its active segment holds."""
    topic = topic_on_both(cluster, "live-compaction-lag", {"cleanup.policy": "compact", "segment.bytes": "1024",
                                                           "min.cleanable.dirty.ratio": "1.0"})
    keys, rounds = 20, 10
    latest: dict[int, dict[bytes, bytes]] = {p: {} for p in BOTH}
    producer = Producer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5)
    try:
        for r in range(rounds):
            for p in BOTH:
                for k in range(keys):
                    key, value = b"key-%02d" % k, b"value-%02d-%02d-" % (k, r) + b"." * 20
                    producer.send(topic, value, key=key, partition=p)
                    latest[p][key] = value
            producer.flush(30)
    finally:
        producer.close()
    assert all(len(read_partition(cluster.bootstrap_servers, topic, p)) == keys * rounds for p in BOTH)
    odradek(cluster, "topics", "--alter", "--topic", topic, "--config", "max.compaction.lag.ms=1000")
    most = keys + 1024 // 40   # one record per key below the active segment, which holds 1 KiB at most
    for p in BOTH:
        state = wait_until(lambda p=p: len(records := read_partition(cluster.bootstrap_servers, topic, p)) <= most
                           and records, 60, f"{topic}-{p} (broker {p + 1} leads it) to be compacted")
        assert dict(state) == latest[p]


def test_dynamic_broker_configs_apply_live_cluster_wide_and_per_broker(cluster):
    """The broker defaults topics fall back to, changed on the running cluster: the cluster-wide
    default (/config/brokers/<default>) reaches both brokers, one broker's own beats it, a topic's
    own beats both; removing them brings server.properties back."""
    from kafka.admin import ConfigResource as KResource, ConfigResourceType, KafkaAdminClient
    bs = cluster.bootstrap_servers
    plain = topic_on_both(cluster, "live-broker-defaults")
    own = topic_on_both(cluster, "live-broker-own", {"max.message.bytes": "100000"})
    eventually_on_both(cluster, plain, 0, b"x" * 5000)
    assert odradek(cluster, "configs", "--bootstrap-server", bs, "--alter", "--entity-type", "brokers",
                   "--entity-default", "--add-config", "message.max.bytes=2000") == (
        "Completed updating default config for brokers in the cluster.\n")
    eventually_on_both(cluster, plain, ErrorCode.MESSAGE_TOO_LARGE, b"x" * 5000)
    assert all(produce_error(cluster, own, p, b"x" * 5000) == 0 for p in BOTH)
    kadmin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        kadmin.alter_configs([KResource(ConfigResourceType.BROKER, "2", configs={"message.max.bytes": ("SET", "100000")})],
                             incremental=True, raise_on_unknown=False)
    finally:
        kadmin.close()
    wait_until(lambda: produce_error(cluster, plain, 1, b"x" * 5000) == 0, 30, "broker 2 to take its own value")
    assert produce_error(cluster, plain, 0, b"x" * 5000) == ErrorCode.MESSAGE_TOO_LARGE   # broker 1: the default
    described = odradek(cluster, "configs", "--bootstrap-server", bs, "--describe", "--entity-type", "brokers",
                        "--entity-name", "2")
    assert described.splitlines() == [
        "Dynamic configs for broker 2 are:",
        "  message.max.bytes=100000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes=100000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=2000, DEFAULT_CONFIG:message.max.bytes=1048588}"]
    assert "  message.max.bytes=2000 sensitive=false" in odradek(
        cluster, "configs", "--bootstrap-server", bs, "--describe", "--entity-type", "brokers", "--entity-default")
    refused = subprocess.run([ODRADEK, "configs", "--bootstrap-server", bs, "--alter", "--entity-type", "brokers",
                              "--entity-name", "1", "--add-config", "num.io.threads=4"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert "Cannot update these configs dynamically: num.io.threads" in refused.stderr
    for entity in (["--entity-default"], ["--entity-name", "2"]):
        odradek(cluster, "configs", "--bootstrap-server", bs, "--alter", "--entity-type", "brokers", *entity,
                "--delete-config", "message.max.bytes")
    eventually_on_both(cluster, plain, 0, b"x" * 5000)


def test_enabling_unclean_election_brings_an_offline_partition_back(cluster):
    """Last in the module (it restarts both brokers): a partition whose only in-sync replica died
    stays offline while unclean.leader.election.enable is false; setting it to true elects the
    surviving out-of-sync replica at once, as Kafka's controller does."""
    from confluent_kafka.admin import AdminClient as RdAdmin, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("live-unclean", replica_assignments={0: [2, 1]})])

        def partition() -> tuple[int, list[int]]:
            parts = admin.describe_topics(["live-unclean"])[0]["partitions"]   # empty until the metadata has it
            return (parts[0]["leader"], sorted(parts[0]["isr"])) if parts else (-2, [])
        wait_until(lambda: partition() == (2, [1, 2]), 60, "leader 2, ISR [1, 2]")
        cluster.kill_broker(1)
        wait_until(lambda: partition() == (2, [2]), 60, "broker 1 to leave the ISR")
        cluster.kill_broker(2)
        cluster.start_broker(1)
        wait_until(lambda: partition() == (-1, [2]), 60, "the partition offline")
    try:
        admin_rd = RdAdmin({"bootstrap.servers": cluster.broker_address(1)})
        enable = ConfigEntry("unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET)
        [f] = admin_rd.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "live-unclean",
                                                                 incremental_configs=[enable])]).values()
        f.result(timeout=30)
        with AdminClient(bootstrap_servers=cluster.broker_address(1)) as admin:
            wait_until(lambda: admin.describe_topics(["live-unclean"])[0]["partitions"][0]["leader"] == 1, 30,
                       "broker 1 elected uncleanly")
        assert produce_error(cluster, "live-unclean", 0, b"after") == 0
    finally:
        cluster.start_broker(2)
