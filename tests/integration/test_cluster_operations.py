"""Operating a live cluster, end to end: partition reassignment (KIP-455) — growing a cluster
under load with ``odradek reassign-partitions``, throttles applied live, kafka-python's admin
client, the ZooKeeper path, bad input, a controller failover in the middle of a reassignment —
and DeleteRecords (``odradek delete-records``, kafka-python, confluent-kafka).

One module-scoped cluster (1 ZooKeeper node, 3 brokers, later 4) serves every test; each test
uses topics of its own.
"""
from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from odradek.client import AdminClient, Consumer, ErrorCode, KafkaError, NewTopic, Producer, TopicPartition
from odradek.testing import create_topic, wait_until
from odradek.zk.znodes import DeleteTopicsTopicZNode, ReassignPartitionsZNode, TopicZNode


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from odradek.zk.cluster import LocalCluster
    c = LocalCluster(tmp_path_factory.mktemp("reassign"), zookeepers=1, brokers=3)
    c.start()
    try:
        yield c
    finally:
        c.stop()


def tool(cluster, *args: str, zookeeper: bool = False) -> subprocess.CompletedProcess:
    target = ["--zookeeper", cluster.zookeeper_connect] if zookeeper else ["--bootstrap-server", cluster.bootstrap_servers]
    return subprocess.run([sys.executable, "-m", "odradek.zk.cli", "reassign-partitions", *target, *args],
                          capture_output=True, text=True, timeout=120)


def replicas(admin: AdminClient, topic: str) -> dict[int, list[int]]:
    [t] = admin.describe_topics([topic])
    return {p["partition"]: p["replicas"] for p in t["partitions"]}


def wait_verified(cluster, plan: Path, **kw) -> str:
    """Run --verify until no partition of ``plan`` is in progress; its last output."""
    def done() -> str | None:
        r = tool(cluster, "--verify", "--reassignment-json-file", str(plan), **kw)
        assert r.returncode == 0, r.stderr
        return None if "still in progress" in r.stdout else r.stdout
    return wait_until(done, 120, f"the reassignment of {plan.name} to complete", interval=0.5)


def fill(bootstrap: str, topic: str) -> None:
    """3 MB in partition 0: more than one fetch (1 MB per partition), so a throttle can hold a copy back."""
    producer = Producer(bootstrap_servers=bootstrap, acks="all", batch_size=256 * 1024, linger_ms=20)
    for i in range(3000):
        producer.send(topic, b"x" * 1000, key=str(i).encode(), partition=0)
    producer.flush(60)
    producer.close()


def log_size(admin: AdminClient, broker: int, tp: tuple[str, int]) -> int | None:
    for d in admin.describe_log_dirs([broker], [tp[0]])[broker]:
        for p in d["partitions"]:
            if (p["topic"], p["partition"]) == tp:
                return p["size"]
    return None


class RetriedErrors(logging.Handler):
    """The errors odradek's producer retried (its sender logs each retry)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.errors: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("retrying"):
            self.errors.append(record.getMessage())


def test_a_fourth_broker_takes_its_share_under_load_with_nothing_lost(cluster, tmp_path):
    """The issue's user story: grow 3 brokers to 4 while an acks=all producer runs."""
    bs = cluster.bootstrap_servers
    topic = "grow"
    create_topic(bs, topic, partitions=8, replication_factor=2, configs={"min.insync.replicas": "2"})
    pids_before = dict(cluster.broker_pids)
    sender_log = logging.getLogger("odradek.client.sender")
    retried = RetriedErrors()
    sender_log.addHandler(retried)
    level = sender_log.level
    sender_log.setLevel(logging.DEBUG)
    producer = Producer(bootstrap_servers=bs, acks="all", enable_idempotence=True, linger_ms=5,
                        retry_backoff_ms=50)
    acked: list[tuple[bytes, object]] = []
    stop = threading.Event()

    def load() -> None:   # a steady stream, ~1000 records/s, until told to stop
        i = 0
        while not stop.is_set():
            for _ in range(50):
                key = f"k{i}".encode()
                acked.append((key, producer.send(topic, b"v" * 200, key=key)))
                i += 1
            time.sleep(0.05)
    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    try:
        wait_until(lambda: len(acked) > 2000, 60, "the load to run")
        new = cluster.add_broker()
        (tmp_path / "topics.json").write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
        gen = tool(cluster, "--generate", "--topics-to-move-json-file", str(tmp_path / "topics.json"),
                   "--broker-list", ",".join(str(b) for b in sorted(cluster.brokers)))
        assert gen.returncode == 0, gen.stderr
        lines = gen.stdout.splitlines()
        assert lines[0] == "Current partition replica assignment"
        assert lines[3] == "Proposed partition reassignment configuration"
        plan = tmp_path / "plan.json"
        plan.write_text(lines[4])
        proposed = {e["partition"]: e["replicas"] for e in json.loads(lines[4])["partitions"]}
        assert sum(new in r for r in proposed.values()) == 4      # 8 partitions x 2 replicas / 4 brokers

        ex = tool(cluster, "--execute", "--reassignment-json-file", str(plan), "--throttle", "50000000")
        assert ex.returncode == 0, ex.stderr
        assert "The inter-broker throttle limit was set to 50000000 B/s" in ex.stdout
        assert ex.stdout.strip().endswith("Successfully started partition reassignments for " +
                                          ",".join(f"{topic}-{p}" for p in range(8)))
        out = wait_verified(cluster, plan)
        assert out.splitlines()[1:9] == [f"Reassignment of partition {topic}-{p} is complete." for p in range(8)]
        assert "Clearing broker-level throttles on brokers 1,2,3,4" in out
        wait_until(lambda: len(acked) > 2000 + 3000, 60, "more load after the move")
    finally:
        stop.set()
        loader.join(30)
        producer.flush(60)
        producer.close(10)
        sender_log.removeHandler(retried)
        sender_log.setLevel(level)

    # Every acknowledged record is read back exactly once.
    keys = [k for k, f in acked if f.get(0) is not None]
    assert len(keys) == len(acked)
    consumer = Consumer(bootstrap_servers=bs, auto_offset_reset="earliest", max_poll_records=5000)
    consumer.assign([TopicPartition(topic, p) for p in range(8)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < len(keys) and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            got.extend(r.key for r in records)
    consumer.close()
    assert sorted(got) == sorted(keys), f"{len(set(keys) - set(got))} lost, {len(got) - len(set(got))} duplicated"
    # The producer only ever saw errors it could retry (leaders moving), and nothing was stopped.
    assert all(("NOT_LEADER" in e or "LEADER_NOT_AVAILABLE" in e or "NOT_ENOUGH_REPLICAS" in e
                or "UNKNOWN_TOPIC_OR_PARTITION" in e or "disconnected" in e.lower() or "timed out" in e.lower())
               for e in retried.errors), retried.errors
    assert {b: p for b, p in cluster.broker_pids.items() if b in pids_before} == pids_before
    with AdminClient(bootstrap_servers=bs) as admin:
        assert replicas(admin, topic) == proposed
        assert admin.list_partition_reassignments() == {}
        sizes = [log_size(admin, new, (topic, p)) for p, r in proposed.items() if new in r]
        assert all(s and s > 0 for s in sizes), sizes     # broker 4 holds the data of its replicas
        [t] = admin.describe_topics([topic])
        assert all(sorted(p["isr"]) == sorted(p["replicas"]) for p in t["partitions"])
        # the throttles are gone again
        for b in cluster.brokers:
            entries = admin.describe_configs([("broker", str(b))])[("broker", str(b))]
            assert not [e for e in entries if "throttled" in e.name], b


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")   # AlterConfigs is what we test
def test_a_throttle_holds_the_new_replica_back_until_it_is_lifted(cluster, tmp_path):
    bs = cluster.bootstrap_servers
    topic = "throttled"
    create_topic(bs, topic, partitions=1, replication_factor=1)
    fill(bs, topic)
    with AdminClient(bootstrap_servers=bs) as admin:
        [source] = replicas(admin, topic)[0]
        target = next(b for b in sorted(cluster.brokers) if b != source)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [target]}]}))
        ex = tool(cluster, "--execute", "--reassignment-json-file", str(plan), "--throttle", "1")
        assert ex.returncode == 0, ex.stderr
        # The rate and the replica lists are the brokers' and the topic's dynamic configs now.
        for b in (source, target):
            entries = {e.name: e for e in admin.describe_configs([("broker", str(b))])[("broker", str(b))]}
            rate = entries["leader.replication.throttled.rate"]
            assert (rate.value, rate.source, rate.is_read_only) == ("1", "DYNAMIC_BROKER_CONFIG", False)
        topic_configs = {e.name: e.value for e in admin.describe_configs([("topic", topic)])[("topic", topic)]}
        assert topic_configs["leader.replication.throttled.replicas"] == f"0:{source}"
        assert topic_configs["follower.replication.throttled.replicas"] == f"0:{target}"
        listed = tool(cluster, "--list")
        assert listed.stdout.splitlines() == [
            "Current partition reassignments:",
            f"{topic}-0: replicas: {target},{source}. adding: {target}. removing: {source}."]
        # At 1 B/s the new replica gets at most one fetch's worth, then nothing: it stops short
        # of the 3 MB the leader holds (sizes read until three reads in a row agree).
        full = log_size(admin, source, (topic, 0))
        seen: list[int | None] = []

        def stalled() -> bool:
            seen.append(log_size(admin, target, (topic, 0)))
            return len(seen) >= 3 and seen[-1] is not None and seen[-1] == seen[-2] == seen[-3]
        wait_until(stalled, 60, "the throttled replica to stop growing", interval=1.0)
        assert seen[-1] < full
        assert "still in progress" in tool(cluster, "--verify", "--reassignment-json-file", str(plan),
                                           "--preserve-throttles").stdout
        # Refused broker config changes change nothing (Kafka's answers).
        from confluent_kafka.admin import AdminClient as RdAdmin, ConfigResource, ResourceType
        rd = RdAdmin({"bootstrap.servers": bs})
        for value in ("-5", "fast"):
            [f] = rd.alter_configs([ConfigResource(ResourceType.BROKER, str(source), set_config={
                "leader.replication.throttled.rate": value})]).values()
            with pytest.raises(Exception) as e:
                f.result(timeout=30)
            assert "INVALID_CONFIG" in str(e.value)
        with pytest.raises(KafkaError) as e:
            admin.incremental_alter_configs(("broker", ""), {"leader.replication.throttled.rate": "5"})
        assert e.value.code == ErrorCode.INVALID_REQUEST and "broker id must be specified" in e.value.message
        assert "still in progress" in tool(cluster, "--verify", "--reassignment-json-file", str(plan),
                                           "--preserve-throttles").stdout
        # Lifting the rate lets it finish, applied live whichever way it is changed: the leader's
        # through confluent-kafka (AlterConfigs), the new follower's with odradek configs --zookeeper.
        [f] = rd.alter_configs([ConfigResource(ResourceType.BROKER, str(source), set_config={
            "follower.replication.throttled.rate": "1"})]).values()   # leader rate not in the set: removed
        f.result(timeout=30)
        r = subprocess.run([sys.executable, "-m", "odradek.zk.cli", "configs", "--zookeeper", cluster.zookeeper_connect,
                            "--alter", "--entity-type", "brokers", "--entity-name", str(target), "--delete-config",
                            "leader.replication.throttled.rate,follower.replication.throttled.rate"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        out = wait_verified(cluster, plan)
        assert f"Reassignment of partition {topic}-0 is complete." in out
        assert replicas(admin, topic) == {0: [target]}
        assert log_size(admin, target, (topic, 0)) == full
        topic_configs = {e.name: e.value for e in admin.describe_configs([("topic", topic)])[("topic", topic)]}
        assert topic_configs["leader.replication.throttled.replicas"] == ""


def test_kafka_python_admin_alters_lists_and_cancels(cluster):
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP
    from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError
    bs = cluster.bootstrap_servers
    topic = "kp-reassign"
    create_topic(bs, topic, partitions=2, replication_factor=1)
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        with AdminClient(bootstrap_servers=bs) as ours:
            before = replicas(ours, topic)
        others = [b for b in sorted(cluster.brokers) if b != before[0][0]]
        result = admin.alter_partition_reassignments({KTP(topic, 0): [others[0], before[0][0]],
                                                      KTP(topic, 1): [1, 1]})
        assert result[KTP(topic, 0)] is None
        assert result[KTP(topic, 1)] is InvalidReplicationAssignmentError
        wait_until(lambda: admin.list_partition_reassignments() == {}, 60, "the reassignment to finish")
        with AdminClient(bootstrap_servers=bs) as ours:
            wait_until(lambda: replicas(ours, topic)[0] == [others[0], before[0][0]], 60, "the new replica set")
            assert replicas(ours, topic)[1] == before[1]           # the refused one changed nothing
        assert admin.alter_partition_reassignments({KTP(topic, 1): None})[KTP(topic, 1)] is \
            NoReassignmentInProgressError
        dead = max(cluster.brokers) + 10
        assert admin.alter_partition_reassignments({KTP(topic, 1): [dead]})[KTP(topic, 1)] is \
            InvalidReplicationAssignmentError
    finally:
        admin.close()


def test_the_zookeeper_path_and_bad_input(cluster, tmp_path):
    bs = cluster.bootstrap_servers
    topic = "zk-reassign"
    create_topic(bs, topic, partitions=1, replication_factor=2)
    zk = cluster.zk
    with AdminClient(bootstrap_servers=bs) as admin:
        current = replicas(admin, topic)[0]
        target = [b for b in sorted(cluster.brokers) if b not in current][:1] + current[:1]
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": target}]}))
        # Bad input: one line, exit 1, nothing written.
        for body, message in (({"version": 1, "partitions": []}, "Partition reassignment list cannot be empty"),
                              ({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 1]}]},
                               "may not contain duplicate entries"),
                              ({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [999]}]},
                               "Unknown broker id 999"),
                              ({"version": 1, "partitions": [{"topic": topic, "partition": 7, "replicas": [1]}]},
                               f"Unable to find partition: {topic}-7")):
            bad = tmp_path / "bad.json"
            bad.write_text(json.dumps(body))
            for zookeeper in (False, True):
                r = tool(cluster, "--execute", "--reassignment-json-file", str(bad), zookeeper=zookeeper)
                assert r.returncode == 1 and r.stdout == "", r.stdout
                assert r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
        assert zk.exists(ReassignPartitionsZNode.path) is None
        assert tool(cluster, "--list", zookeeper=True).stderr.strip() == \
            "Error: --list is only supported with --bootstrap-server"

        r = tool(cluster, "--execute", "--reassignment-json-file", str(plan), zookeeper=True)
        assert r.returncode == 0, r.stderr
        out = wait_verified(cluster, plan, zookeeper=True)
        assert f"Reassignment of partition {topic}-0 is complete." in out
        assert replicas(admin, topic)[0] == target
        wait_until(lambda: zk.exists(ReassignPartitionsZNode.path) is None, 30, "/admin/reassign_partitions to go")
        data, _ = zk.get(TopicZNode.path(topic))
        assert json.loads(data)["adding_replicas"] == {} and json.loads(data)["removing_replicas"] == {}


def test_delete_records_moves_the_log_start_on_every_replica(cluster, tmp_path):
    from confluent_kafka import TopicPartition as RdTP
    from confluent_kafka.admin import AdminClient as RdAdmin
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP
    bs = cluster.bootstrap_servers
    topic = "trimmed"
    create_topic(bs, topic, partitions=3, replication_factor=3)
    producer = Producer(bootstrap_servers=bs, acks="all")
    for p in range(3):
        for i in range(100):
            producer.send(topic, f"{p}-{i}".encode(), partition=p)
    producer.flush(60)
    producer.close()
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 40},
                                                                {"topic": topic, "partition": 1, "offset": 500}]}))
    r = subprocess.run([sys.executable, "-m", "odradek.zk.cli", "delete-records", "--bootstrap-server", bs,
                        "--offset-json-file", str(offsets)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1          # one partition failed (kafka-delete-records.sh would exit 0)
    assert r.stdout.splitlines() == [
        "Executing records delete operation", "Records delete operation completed:",
        f"partition: {topic}-0\tlow_watermark: 40",
        f"partition: {topic}-1\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 1}] * 2}))
    r = subprocess.run([sys.executable, "-m", "odradek.zk.cli", "delete-records", "--bootstrap-server", bs,
                        "--offset-json-file", str(bad)], capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stderr.strip()) == (
        1, f"Error: Offset json file contains duplicate topic partitions: {topic}-0")

    kadmin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        out = kadmin.delete_records({KTP(topic, 1): 10})
        assert out[KTP(topic, 1)]["low_watermark"] == 10
    finally:
        kadmin.close()
    rd = RdAdmin({"bootstrap.servers": bs})
    [f] = rd.delete_records([RdTP(topic, 2, -1)]).values()     # -1: everything up to the high watermark
    assert f.result(timeout=60).low_watermark == 100

    def first_offsets() -> dict[int, int]:
        consumer = Consumer(bootstrap_servers=bs, auto_offset_reset="earliest")
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        got: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while len(got) < 2 and time.monotonic() < deadline:
            for tp, records in consumer.poll(500).items():
                got.setdefault(tp.partition, records[0].offset)
        consumer.close()
        return got
    assert first_offsets() == {0: 40, 1: 10}
    # Every replica's log starts there (that is what the low watermark says): after the leader of
    # partition 0 stops, the new leader serves from 40 too.
    with AdminClient(bootstrap_servers=bs) as admin:
        [t] = admin.describe_topics([topic])
        leader = next(p["leader"] for p in t["partitions"] if p["partition"] == 0)
    cluster.kill_broker(leader, sig=15)
    try:
        with AdminClient(bootstrap_servers=",".join(cluster.broker_address(b) for b in cluster.brokers
                                                    if b != leader)) as admin:
            wait_until(lambda: next(p["leader"] for p in admin.describe_topics([topic])[0]["partitions"]
                                    if p["partition"] == 0) not in (-1, leader), 60, "a new leader")
        assert first_offsets()[0] == 40
    finally:
        cluster.start_broker(leader)


def test_topic_ids_from_zookeeper_to_every_client(cluster):
    """KIP-516 as Kafka 2.8 has it: a created topic gets an id in /brokers/topics/<t>, every broker
    answers it in Metadata v10+ (confluent-kafka's describe_topics reads it), and a deleted and
    re-created topic of the same name gets another, so clients can tell them apart."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient as RdAdmin
    from odradek.client.connection import BrokerConnection
    from odradek.protocol.apis import metadata
    bs, topic = cluster.bootstrap_servers, "with-id"

    def znode_id():
        return TopicZNode.decode_topic_id(cluster.zk.get(TopicZNode.path(topic))[0])

    def ids_seen() -> set:
        seen = set()
        for b in cluster.brokers:
            host, port = cluster.broker_address(b).rsplit(":", 1)
            conn = BrokerConnection(host, int(port), request_timeout_ms=5000).connect()
            try:
                [t] = conn.request(metadata, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                              "include_topic_authorized_operations": False}, version=11).topics
                seen.add(t.topic_id)
            finally:
                conn.close()
        return seen

    rd = RdAdmin({"bootstrap.servers": bs})

    def confluent_id() -> int:
        [f] = rd.describe_topics(TopicCollection([topic])).values()
        u = f.result(timeout=30).topic_id
        return (u.get_most_significant_bits() % 2 ** 64) << 64 | (u.get_least_significant_bits() % 2 ** 64)

    create_topic(bs, topic, partitions=2, replication_factor=2)
    first = znode_id()
    assert first is not None and first.int
    wait_until(lambda: ids_seen() == {first}, 30, "every broker to answer the topic id")
    assert confluent_id() == first.int
    with AdminClient(bootstrap_servers=bs) as admin:
        admin.delete_topics([topic])
        wait_until(lambda: cluster.zk.exists(TopicZNode.path(topic)) is None
                   and cluster.zk.exists(DeleteTopicsTopicZNode.path(topic)) is None, 60, f"{topic} deleted")
    create_topic(bs, topic, partitions=2, replication_factor=2)
    second = znode_id()
    assert second is not None and second != first
    wait_until(lambda: ids_seen() == {second}, 30, "every broker to answer the new id")
    assert confluent_id() == second.int


def test_a_new_controller_finishes_a_reassignment_the_old_one_started(cluster, tmp_path):
    bs = cluster.bootstrap_servers
    topic = "failover-reassign"
    with AdminClient(bootstrap_servers=bs) as admin:
        controller = admin.describe_cluster()["controller_id"]
        source, target = [b for b in sorted(cluster.brokers) if b != controller][:2]
        admin.create_topics([NewTopic(topic, replica_assignments={0: [source]})])
        wait_until(lambda: [p["leader"] for p in admin.describe_topics([topic])[0]["partitions"]] == [source], 60,
                   f"broker {source} to lead {topic}-0")
    fill(bs, topic)
    with AdminClient(bootstrap_servers=bs) as admin:
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [target]}]}))
        assert tool(cluster, "--execute", "--reassignment-json-file", str(plan), "--throttle", "1").returncode == 0
        assert TopicPartition(topic, 0) in admin.list_partition_reassignments()
    cluster.kill_broker(controller, sig=15)            # a clean stop: the controller moves at once
    try:
        with AdminClient(bootstrap_servers=",".join(cluster.broker_address(b) for b in cluster.brokers
                                                    if b != controller)) as admin:
            wait_until(lambda: admin.describe_cluster()["controller_id"] not in (-1, controller), 60,
                       "a new controller")
            # the new controller picked the reassignment up from /brokers/topics/<t>
            listed = wait_until(lambda: admin.list_partition_reassignments(), 60, "the reassignment to be listed")
            assert listed[TopicPartition(topic, 0)]["adding_replicas"] == [target]
            for b in (source, target):
                admin.incremental_alter_configs(("broker", str(b)), {}, ["leader.replication.throttled.rate",
                                                                         "follower.replication.throttled.rate"])
            wait_until(lambda: replicas(admin, topic) == {0: [target]} and not admin.list_partition_reassignments(),
                       120, "the new controller to finish the reassignment")
    finally:
        cluster.start_broker(controller)


def test_alter_isr_on_the_controller(cluster):
    """AlterIsr (56) as Kafka 2.8's controller serves it to a partition leader: a good update is
    written to the state znode and reaches every broker's metadata; a stale broker epoch, leader
    epoch or zk version is refused with nothing written; another broker answers NOT_CONTROLLER
    (UpdateFeatures too)."""
    from odradek.protocol.apis import alter_isr, metadata, update_features
    from test_broker_e2e import RawClient
    bs, topic = cluster.bootstrap_servers, "alter-isr"
    create_topic(bs, topic, partitions=1, replication_factor=3)
    zk = cluster.zk
    path = f"/brokers/topics/{topic}/partitions/0/state"
    wait_until(lambda: len(json.loads(zk.get(path)[0])["isr"]) == 3, 60, "a full ISR")
    data, stat = zk.get(path)
    state = json.loads(data)
    leader, epoch, isr = state["leader"], state["leader_epoch"], state["isr"]
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    broker_epoch = zk.exists(f"/brokers/ids/{leader}").czxid
    other = next(b for b in cluster.brokers if b != controller)
    shrunk = [leader] + [b for b in isr if b != leader][:1]

    def ask(client, leader_epoch=epoch, new_isr=shrunk, version=stat.version, b_epoch=broker_epoch):
        return client.request(alter_isr, 0, {"broker_id": leader, "broker_epoch": b_epoch, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "leader_epoch": leader_epoch, "new_isr": new_isr,
                                            "current_isr_version": version}]}]})

    def one(resp):
        assert resp.error_code == 0
        return resp.topics[0].partitions[0]

    elsewhere = RawClient(f"127.0.0.1:{cluster.brokers[other].port}")
    on_controller = RawClient(f"127.0.0.1:{cluster.brokers[controller].port}")
    try:
        assert ask(elsewhere).error_code == ErrorCode.NOT_CONTROLLER
        uf = elsewhere.request(update_features, 0, {"timeout_ms": 1000, "feature_updates": []})
        assert (uf.error_code, uf.error_message) == (ErrorCode.NOT_CONTROLLER,
                                                     "This is not the correct controller for this cluster.")
        assert ask(on_controller, b_epoch=broker_epoch - 1).error_code == ErrorCode.STALE_BROKER_EPOCH
        assert one(ask(on_controller, leader_epoch=epoch - 1)).error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert one(ask(on_controller, version=stat.version + 7)).error_code == ErrorCode.INVALID_UPDATE_VERSION
        assert zk.get(path)[1].mzxid == stat.mzxid   # nothing written
        done = one(ask(on_controller))
        assert (done.error_code, done.leader_id, done.leader_epoch, list(done.isr), done.current_isr_version) == \
            (0, leader, epoch, shrunk, stat.version + 1)
        assert json.loads(zk.get(path)[0])["isr"] == shrunk and zk.get(path)[1].version == stat.version + 1

        def isr_on(b: int) -> list[int]:
            c = RawClient(f"127.0.0.1:{cluster.brokers[b].port}")
            try:
                return list(c.request(metadata, 1, {"topics": [{"name": topic}]}).topics[0].partitions[0].isr_nodes)
            finally:
                c.close()
        wait_until(lambda: all(isr_on(b) == shrunk for b in cluster.brokers), 30, "every broker's metadata")
        back = one(ask(on_controller, new_isr=isr, version=stat.version + 1))
        assert (back.error_code, list(back.isr)) == (0, isr)
    finally:
        elsewhere.close()
        on_controller.close()
    with AdminClient(bootstrap_servers=bs) as admin:
        admin.delete_topics([topic])
