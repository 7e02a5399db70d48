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


def test_kafka_python_sees_kafka_2_8_and_lists_groups_by_state(compat_cluster):
    """kafka-python, with no pinned api_version, infers a 2.8 broker from ApiVersions, and its
    admin's list_groups(states_filter=...) (ListGroups v4) lists only groups in those states."""
    from kafka import KafkaConsumer
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata, TopicPartition as KTP

    from odradek.testing import wait_until
    bootstrap, topic = compat_cluster.bootstrap_servers, "compat-group-states"
    _create_topic(bootstrap, topic)
    idle = KafkaConsumer(bootstrap_servers=bootstrap, group_id="compat-empty-group", enable_auto_commit=False)
    idle.assign([KTP(topic, 0)])
    idle.commit({KTP(topic, 0): OffsetAndMetadata(0, "", -1)})
    idle.close()
    live = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="compat-stable-group")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert admin._manager.broker_version == (2, 8)

        def listed(state: str) -> set[str]:
            return {g["group_id"] for g in admin.list_groups(states_filter=[state])}

        wait_until(lambda: live.poll(timeout_ms=200) is not None and "compat-stable-group" in listed("Stable"), 60,
                   "the live consumer's group to be Stable")
        assert "compat-empty-group" not in listed("Stable")
        empty = listed("Empty")
        assert "compat-empty-group" in empty and "compat-stable-group" not in empty
    finally:
        live.close()
        admin.close()


def test_kafka_python_fetches_through_an_incremental_fetch_session(compat_cluster, caplog):
    """kafka-python 3.0.12 keeps fetch sessions (KIP-227) with the broker: one full fetch opens
    the session, the fetches after it are incremental and accepted as valid by the client, and
    every record arrives in order, those produced while it polls included."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KTP
    bootstrap, topic = compat_cluster.bootstrap_servers, "compat-fetch-session"
    _create_topic(bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    seen: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    caplog.set_level("DEBUG", logger="kafka.consumer.fetcher")
    try:
        for i in range(60):
            producer.send(topic, value=b"before-%d" % i, partition=i % PARTITIONS)
        producer.flush(30)
        consumer.assign([KTP(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        polls = 0
        while sum(map(len, seen.values())) < 120 and time.monotonic() < deadline:
            polls += 1
            if polls == 5:      # later records reach a session that is already open
                for i in range(60):
                    producer.send(topic, value=b"after-%d" % i, partition=i % PARTITIONS)
                producer.flush(30)
            for tp, recs in consumer.poll(timeout_ms=200).items():
                seen[tp.partition].extend(m.value for m in recs)
    finally:
        consumer.close()
        producer.close()
    for p in range(PARTITIONS):
        assert seen[p] == [b"before-%d" % i for i in range(p, 60, PARTITIONS)] + \
            [b"after-%d" % i for i in range(p, 60, PARTITIONS)]
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka.consumer.fetcher"]
    assert sum("created a new incremental fetch session" in m for m in lines) == 1, lines
    assert sum("incremental fetch response for session" in m for m in lines) >= 3, lines
    assert not [m for m in lines if "invalid" in m or "unable to process" in m]


def test_describe_cluster_on_the_wire(compat_cluster):
    """DescribeCluster (60) v0, as Java's AdminClient sends it: the cluster id and controller
    ZooKeeper holds, every broker's endpoint, and the Cluster operations allowed (all of them:
    no authorizer). (kafka-python's describe_cluster cannot read a v0 answer, Kafka 2.8's only
    version: it expects v1's endpoint_type; confluent-kafka's asks Metadata instead.)"""
    from kazoo.client import KazooClient

    from odradek.client.connection import BrokerConnection
    from odradek.protocol.apis import describe_cluster

    host, port = compat_cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(host, int(port), client_id="compat").connect()
    zk = KazooClient(hosts=compat_cluster.zookeeper_connect)
    zk.start()
    try:
        assert conn.version_for(describe_cluster) == 0
        with_ops = conn.request(describe_cluster, {"include_cluster_authorized_operations": True})
        without = conn.request(describe_cluster, {"include_cluster_authorized_operations": False})
        cluster_id = json.loads(zk.get("/cluster/id")[0])["id"]
        controller = json.loads(zk.get("/controller")[0])["brokerid"]
    finally:
        zk.stop()
        zk.close()
        conn.close()
    assert (with_ops.error_code, with_ops.cluster_id, with_ops.controller_id) == (0, cluster_id, controller)
    assert [(b.broker_id, b.host, b.port) for b in with_ops.brokers] == [(1, host, int(port))]
    # CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12
    assert with_ops.cluster_authorized_operations == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
    assert without.cluster_authorized_operations == -2**31


def test_broker_api_versions_and_get_offsets_tools(compat_cluster, capsys):
    """``odradek broker-api-versions`` prints kafka-broker-api-versions.sh's block for the broker;
    ``odradek get-offsets`` GetOffsetShell's topic:partition:offset lines for -1, -2 and a time."""
    from odradek.client import Producer
    from odradek.client import broker_api_versions_cli, get_offsets_cli

    bootstrap, topic = compat_cluster.bootstrap_servers, "compat-get-offsets"
    assert broker_api_versions_cli.main(["--bootstrap-server", bootstrap]) == 0
    out = capsys.readouterr().out.splitlines()
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    assert out[0] == f"{host}:{port} (id: 1 rack: null) -> (" and out[-1] == ")"
    lines = [ln.strip().rstrip(",") for ln in out[1:-1]]
    assert lines[0] == "Produce(0): 0 to 9 [usable: 9]"
    assert "ApiVersions(18): 0 to 3 [usable: 3]" in lines and "AlterReplicaLogDirs(34): 0 to 2 [usable: 2]" in lines
    assert "DeleteRecords(21): 0 to 2 [usable: 2]" in lines and "ListPartitionReassignments(46): 0 [usable: 0]" in lines
    assert "ElectLeaders(43): 0 to 2 [usable: 2]" in lines
    assert "DescribeClientQuotas(48): 0 to 1 [usable: 1]" in lines and "AlterClientQuotas(49): 0 to 1 [usable: 1]" in lines
    assert "DescribeCluster(60): 0 [usable: 0]" in lines and "OffsetDelete(47): 0 [usable: 0]" in lines
    assert "Fetch(1): 0 to 12 [usable: 12]" in lines and "DescribeProducers(61): 0 [usable: 0]" in lines
    assert "AlterIsr(56): 0 [usable: 0]" in lines and "UpdateFeatures(57): 0 [usable: 0]" in lines

    _create_topic(bootstrap, topic)
    producer = Producer(bootstrap_servers=bootstrap, acks="all")
    for i in range(9):   # partition p gets offsets 0..2 with timestamps 1000 + 10 * offset
        producer.send(topic, b"v%d" % i, partition=i % PARTITIONS, timestamp_ms=1000 + 10 * (i // PARTITIONS))
    producer.flush()
    producer.close()

    def offsets(*args: str) -> list[str]:
        assert get_offsets_cli.main(["--broker-list", bootstrap, "--topic", topic, *args]) == 0
        return capsys.readouterr().out.split()

    assert offsets() == [f"{topic}:{p}:3" for p in range(PARTITIONS)]
    assert offsets("--time", "-2", "--partitions", "1") == [f"{topic}:1:0"]
    assert offsets("--time", "1015") == [f"{topic}:{p}:2" for p in range(PARTITIONS)]
    assert offsets("--time", "5000") == [f"{topic}:{p}:" for p in range(PARTITIONS)]
    assert get_offsets_cli.main(["--bootstrap-server", bootstrap, "--topic", "no-such-topic"]) == 1
    assert capsys.readouterr().err.strip() == "Error: topic 'no-such-topic' does not exist"


def test_describe_configs_with_confluent_and_kafka_python(compat_cluster):
    """DescribeConfigs as admin clients use it: a topic's overrides (read from ZooKeeper) with
    their source and synonyms, its defaults, the broker's settings with secrets hidden."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType
    from kafka.admin import ConfigResource as KConfigResource, ConfigResourceType, KafkaAdminClient

    bootstrap, topic = compat_cluster.bootstrap_servers, "compat-configs"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact"})],
                        operation_timeout=30)[topic].result(timeout=30)
    from odradek.testing import wait_until
    wait_until(lambda: topic in admin.list_topics(timeout=10).topics, 30, "the topic in the metadata")
    [future] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    entries = future.result(timeout=30)
    retention = entries["retention.ms"]
    assert (retention.value, retention.source, retention.is_read_only) == (
        "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False)
    assert [(s.name, s.value, s.source) for s in retention.synonyms.values()][:1] == [
        ("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)]
    assert entries["cleanup.policy"].value == "compact"
    segment = entries["segment.bytes"]
    assert (segment.value, segment.source) == ("1073741824", ConfigSource.DEFAULT_CONFIG.value)
    assert set(entries) >= {"max.message.bytes", "min.insync.replicas", "message.timestamp.type"}

    [future] = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values()
    broker = future.result(timeout=30)
    assert (broker["broker.id"].value, broker["broker.id"].source) == ("1", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert broker["broker.id"].is_read_only
    assert broker["sasl.jaas.config"].is_sensitive and broker["sasl.jaas.config"].value is None
    assert broker["num.partitions"].source in (ConfigSource.DEFAULT_CONFIG.value, ConfigSource.STATIC_BROKER_CONFIG.value)

    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = kadmin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all",
                                            include_synonyms=True)["topic"][topic]
    finally:
        kadmin.close()
    assert {k: (v["value"], v["config_source"]) for k, v in described.items()
            if v["config_source"] != "DEFAULT_CONFIG"} == {
        "retention.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG"), "cleanup.policy": ("compact", "DYNAMIC_TOPIC_CONFIG")}
    assert described["segment.bytes"]["synonyms"] == [
        {"name": "log.segment.bytes", "value": "1073741824", "source": "DEFAULT_CONFIG"}]
    assert described["min.cleanable.dirty.ratio"]["config_type"] == "DOUBLE"


def test_describe_log_dirs_with_kafka_python_and_the_cli(compat_cluster, capsys):
    """DescribeLogDirs: the broker's log dir with each partition's size, through kafka-python's
    admin and ``odradek log-dirs`` (kafka-log-dirs.sh's output)."""
    from kafka.admin import KafkaAdminClient

    from odradek.client import Producer
    from odradek.client import log_dirs_cli
    bootstrap, topic = compat_cluster.bootstrap_servers, "compat-log-dirs"
    _create_topic(bootstrap, topic)
    producer = Producer(bootstrap_servers=bootstrap, acks="all")
    for i in range(PARTITIONS):
        producer.send(topic, b"x" * 1000, partition=i)
    producer.flush()
    producer.close()
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        [answer] = kadmin.describe_log_dirs()
    finally:
        kadmin.close()
    [log_dir] = answer["log_dirs"]
    sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in log_dir["topics"] for p in t["partitions"]}
    assert log_dir["error_code"] == 0 and all(sizes[(topic, p)] > 1000 for p in range(PARTITIONS))

    assert log_dirs_cli.main(["--describe", "--bootstrap-server", bootstrap, "--topic-list", topic]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 1"]
    [broker] = json.loads(lines[2])["brokers"]
    [d] = broker["logDirs"]
    assert broker["broker"] == 1 and d["logDir"] == log_dir["log_dir"] and d["error"] is None
    assert sorted((p["partition"], p["size"], p["offsetLag"], p["isFuture"]) for p in d["partitions"]) == [
        (f"{topic}-{p}", sizes[(topic, p)], 0, False) for p in range(PARTITIONS)]


def test_confluent_describe_cluster_and_topics_with_authorized_operations(compat_cluster):
    """confluent-kafka asks Metadata v8's include_*_authorized_operations: with no authorizer,
    every operation Kafka defines on the Cluster and on a topic."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    bootstrap, topic = compat_cluster.bootstrap_servers, "compat-authorized-ops"
    _create_topic(bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=30).result(timeout=30)
    assert {op.name for op in cluster.authorized_operations} == {
        "CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}
    assert [n.id for n in cluster.nodes] == [1]
    [future] = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True,
                                     request_timeout=30).values()
    described = future.result(timeout=30)
    assert {op.name for op in described.authorized_operations} == {
        "READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
    assert len(described.partitions) == PARTITIONS
