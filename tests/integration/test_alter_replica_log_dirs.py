"""Moving a replica between a broker's log dirs while it serves (AlterReplicaLogDirs, KIP-113), end to end.

One module-scoped cluster (1 ZooKeeper node, 2 brokers, two log dirs each) serves every test;
each test uses topics of its own. What a user checks: a move under a steady acks=all producer
and a consumer loses and duplicates nothing and leaves the partition's files only in the new
dir; DescribeLogDirs shows the future replica while it moves (held back with
replica.alter.log.dirs.io.max.bytes.per.second); bad requests get Kafka's codes and change
nothing (through kafka-python's admin client, which has the API); a broker restarted in the
middle of a move resumes and completes it; ``odradek reassign-partitions`` with ``log_dirs``
moves replicas within a broker and onto another broker's chosen dir, and ``--verify`` reports
the moves and clears the throttle. Last (it restarts a broker), an I/O error in one broker's log
cleaner takes that log dir offline, as Kafka's cleaner does: the partition in it moves to the
other replica, the broker keeps its other dir, nothing acknowledged is lost, and after a restart
the replica is back in the ISR. Meanwhile a new topic's replica on that broker goes to its live
dir (LeaderAndIsr's is_new), and the replica in the offline dir is not made again elsewhere.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from odradek.client import AdminClient, Consumer, ErrorCode, KafkaError, NewTopic, Producer, TopicPartition, TopicPartitionReplica
from odradek.testing import wait_until
from odradek.zk.cluster import LocalCluster

RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


class TwoDirCluster(LocalCluster):
    """Brokers with two log dirs each: ``<broker dir>/logs-a`` and ``logs-b``."""

    def server_properties(self, broker):
        props = super().server_properties(broker)
        props["log.dirs"] = ",".join(str(d) for d in dirs_of(broker.dir))
        return props


def dirs_of(broker_dir: Path) -> list[Path]:
    return [broker_dir / "logs-a", broker_dir / "logs-b"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = TwoDirCluster(tmp_path_factory.mktemp("log-dirs"), zookeepers=1, brokers=2,
                      overrides={"controlled.shutdown.retry.backoff.ms": 200, "log.cleaner.backoff.ms": 200})
    c.start()
    try:
        yield c
    finally:
        c.stop()


def broker_dirs(cluster, broker: int) -> list[str]:
    return [str(d) for d in dirs_of(cluster.brokers[broker].dir)]


def create(cluster, topic: str, assignment: dict[int, list[int]], configs: dict[str, str] | None = None) -> None:
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, replica_assignments=assignment, topic_configs=configs)])
        wait_until(lambda: all(p["leader"] >= 0 for t in admin.describe_topics([topic]) for p in t["partitions"])
                   and len(admin.describe_topics([topic])[0]["partitions"]) == len(assignment),
                   60, f"{topic} to have leaders")
        # A broker's metadata can name the leader before the leader has made the log (the controller
        # sends LeaderAndIsr and UpdateMetadata at once, as Kafka's does): wait for every replica's log.
        wait_until(lambda: all(where(admin, b, (topic, p)) for p, replicas in assignment.items() for b in replicas),
                   60, f"{topic}'s replicas to show in DescribeLogDirs")


def fill(cluster, topic: str, partition: int = 0, mb: int = 3) -> int:
    """``mb`` MB in the partition: more than one chunk (1 MB), so a throttle can hold a move back."""
    producer = Producer(bootstrap_servers=cluster.bootstrap_servers, acks="all", batch_size=256 * 1024, linger_ms=20)
    for i in range(mb * 1000):
        producer.send(topic, b"x" * 1000, key=f"fill-{i}".encode(), partition=partition)
    producer.flush(60)
    producer.close()
    return mb * 1000


def where(admin: AdminClient, broker: int, tp: tuple[str, int]) -> dict[bool, tuple[str, int, int]]:
    """{is_future: (log dir, size, offset lag)} of one replica, as DescribeLogDirs shows it."""
    out = {}
    for d in admin.describe_log_dirs([broker], [tp[0]])[broker]:
        for p in d["partitions"]:
            if (p["topic"], p["partition"]) == tp:
                out[p["is_future"]] = (d["log_dir"], p["size"], p["offset_lag"])
    return out


def files(dir_: str, tp: tuple[str, int]) -> list[str]:
    prefix = f"{tp[0]}-{tp[1]}"
    return sorted(n for n in os.listdir(dir_) if n == prefix or n.startswith(prefix + "."))


def set_rate(admin: AdminClient, broker: int, rate: int | None) -> None:
    """Set (None: remove) the broker's log dir move rate; wait until the broker applies it."""
    if rate is None:
        admin.incremental_alter_configs(("broker", str(broker)), {}, [RATE])
    else:
        admin.incremental_alter_configs(("broker", str(broker)), {RATE: str(rate)})

    def applied() -> bool:
        entries = {e.name: e for e in admin.describe_configs([("broker", str(broker))])[("broker", str(broker))]}
        e = entries.get(RATE)
        return (e is None or e.source != "DYNAMIC_BROKER_CONFIG") if rate is None else (
            e is not None and e.value == str(rate) and e.source == "DYNAMIC_BROKER_CONFIG")
    wait_until(applied, 30, f"broker {broker} to apply {RATE}={rate}")


def read_all(cluster, topic: str, expected: int, partitions: int = 1) -> list[bytes]:
    consumer = Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                        max_poll_records=5000)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < expected and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            got.extend(r.key for r in records)
    consumer.close()
    return got


def test_a_move_under_load_loses_nothing_and_leaves_files_only_in_the_new_dir(cluster):
    topic, tp = "moving", ("moving", 0)
    create(cluster, topic, {0: [1, 2]})
    filled = fill(cluster, topic)
    bs = cluster.bootstrap_servers
    producer = Producer(bootstrap_servers=bs, acks="all", enable_idempotence=True, linger_ms=5)
    acked: list[tuple[bytes, object]] = []
    seen: list[bytes] = []
    stop = threading.Event()

    def load() -> None:
        i = 0
        while not stop.is_set():
            for _ in range(20):
                key = f"k{i}".encode()
                acked.append((key, producer.send(topic, b"v" * 200, key=key, partition=0)))
                i += 1
            time.sleep(0.02)

    def consume() -> None:   # a consumer reading along while the log moves under it
        consumer = Consumer(bootstrap_servers=bs, auto_offset_reset="earliest", max_poll_records=5000)
        consumer.assign([TopicPartition(topic, 0)])
        while not stop.is_set():
            for records in consumer.poll(200).values():
                seen.extend(r.key for r in records)
        consumer.close()
    threads = [threading.Thread(target=load, daemon=True), threading.Thread(target=consume, daemon=True)]
    for t in threads:
        t.start()
    with AdminClient(bootstrap_servers=bs) as admin:
        leader = 1
        [(src, _, _)] = where(admin, leader, tp).values()
        dst = next(d for d in broker_dirs(cluster, leader) if d != src)
        set_rate(admin, leader, 1)      # 1 B/s: one chunk, then the move waits
        try:
            wait_until(lambda: len(acked) > 500, 60, "the load to run")
            assert admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, leader): dst}) == {
                TopicPartitionReplica(topic, 0, leader): None}
            moving = wait_until(lambda: where(admin, leader, tp).get(True), 30, "the future replica to show")
            assert moving[0] == dst and moving[1] > 0 and moving[2] > 0     # in the new dir, behind
            assert where(admin, leader, tp)[False][0] == src
            assert [n for n in files(dst, tp) if n.endswith("-future")]
            shown = subprocess.run([sys.executable, "-m", "odradek.zk.cli", "log-dirs", "--describe", "--bootstrap-server",
                                    bs, "--topic-list", topic, "--broker-list", str(leader)],
                                   capture_output=True, text=True, timeout=60)
            assert shown.returncode == 0, shown.stderr
            [broker_info] = json.loads(shown.stdout.splitlines()[-1])["brokers"]
            assert {(d["logDir"], p["isFuture"]) for d in broker_info["logDirs"] for p in d["partitions"]} == {
                (src, False), (dst, True)}
            wait_until(lambda: len(acked) > 1500, 60, "more load while the move is held")
            assert where(admin, leader, tp)[True][0] == dst, "the throttle holds the move back"
            set_rate(admin, leader, None)   # lifted: the move completes under the load
            wait_until(lambda: set(where(admin, leader, tp)) == {False} and where(admin, leader, tp)[False][0] == dst,
                       120, "the move to complete")
            wait_until(lambda: len(acked) > 2500, 60, "more load after the move")
        finally:
            stop.set()
            for t in threads:
                t.join(30)
            producer.flush(60)
            producer.close(10)
        wait_until(lambda: files(src, tp) == [], 30, "the old dir to be deleted")
        assert files(dst, tp) == [f"{topic}-0"]
        [t] = admin.describe_topics([topic])
        assert sorted(t["partitions"][0]["isr"]) == [1, 2]
    keys = [k for k, f in acked if f.get(0) is not None]
    assert len(keys) == len(acked)
    got = read_all(cluster, topic, filled + len(keys))
    assert len(got) == filled + len(keys) and len(set(got)) == len(got), "every record once"
    assert set(keys) <= set(got)
    assert seen[:len(set(seen))] == got[:len(set(seen))], "the live consumer read the same log, in order"


def test_bad_requests_get_kafkas_codes_and_change_nothing(cluster):
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartitionReplica as KTPR
    topic, tp = "refused", ("refused", 0)
    create(cluster, topic, {0: [1]})
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        before = where(admin, 1, tp)
        [(src, _, _)] = before.values()
        other = next(d for d in broker_dirs(cluster, 1) if d != src)
        k = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            out = k.alter_replica_log_dirs({KTPR(topic, 0, 1): src + "-nope"})
            assert [e.errno for e in out.values()] == [ErrorCode.LOG_DIR_NOT_FOUND]
            out = k.alter_replica_log_dirs({KTPR(topic, 0, 1): os.path.relpath(other)})
            assert [e.errno for e in out.values()] == [ErrorCode.LOG_DIR_NOT_FOUND]
            out = k.alter_replica_log_dirs({KTPR("t" * 240, 0, 1): other})
            assert [e.errno for e in out.values()] == [ErrorCode.INVALID_TOPIC_EXCEPTION]
            out = k.alter_replica_log_dirs({KTPR(topic, 0, 1): src})     # already there: nothing to do
            assert [e.errno for e in out.values()] == [0]
        finally:
            k.close()
        assert where(admin, 1, tp) == before
        assert files(other, tp) == []
        # no replica on broker 2: REPLICA_NOT_AVAILABLE, as Kafka 2.8 answers
        [err] = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 2): broker_dirs(cluster, 2)[0]}).values()
        assert err is not None and err.code == ErrorCode.REPLICA_NOT_AVAILABLE
        assert where(admin, 2, tp) == {}


def test_a_restart_in_the_middle_of_a_move_resumes_it(cluster):
    topic, tp = "resumed", ("resumed", 0)
    create(cluster, topic, {0: [2]})
    filled = fill(cluster, topic)
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        [(src, _, _)] = where(admin, 2, tp).values()
        dst = next(d for d in broker_dirs(cluster, 2) if d != src)
        set_rate(admin, 2, 1)
        assert admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 2): dst}) == {
            TopicPartitionReplica(topic, 0, 2): None}
        wait_until(lambda: where(admin, 2, tp).get(True), 30, "the future replica to show")
    cluster.kill_broker(2)            # SIGKILL in the middle of the move
    cluster.start_broker(2)
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        shown = wait_until(lambda: where(admin, 2, tp).get(True) and where(admin, 2, tp), 60, "the move to be back",
                           retry_on=(KafkaError, OSError))
        assert shown[True][0] == dst and shown[False][0] == src
        set_rate(admin, 2, None)
        wait_until(lambda: set(where(admin, 2, tp)) == {False} and where(admin, 2, tp)[False][0] == dst,
                   120, "the resumed move to complete")
    wait_until(lambda: files(src, tp) == [], 30, "the old dir to be deleted")
    got = read_all(cluster, topic, filled)
    assert len(got) == filled == len(set(got))


def tool(cluster, *args: str, zookeeper: bool = False) -> subprocess.CompletedProcess:
    target = ["--zookeeper", cluster.zookeeper_connect] if zookeeper else ["--bootstrap-server", cluster.bootstrap_servers]
    return subprocess.run([sys.executable, "-m", "odradek.zk.cli", "reassign-partitions", *target, *args],
                          capture_output=True, text=True, timeout=120)


def test_reassign_partitions_moves_replicas_to_the_log_dirs_of_the_json(cluster, tmp_path):
    topic = "tooled"
    create(cluster, topic, {0: [1], 1: [1]})
    fill(cluster, topic, 0, mb=1)
    fill(cluster, topic, 1, mb=1)
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        [(src1, _, _)] = where(admin, 1, (topic, 1)).values()
    other1 = next(d for d in broker_dirs(cluster, 1) if d != src1)
    b2 = broker_dirs(cluster, 2)[1]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2], "log_dirs": [b2]},          # to broker 2, into logs-b
        {"topic": topic, "partition": 1, "replicas": [1], "log_dirs": [other1]}]}))   # within broker 1
    zk = tool(cluster, "--execute", "--reassignment-json-file", str(plan), zookeeper=True)
    assert (zk.returncode, zk.stderr.strip().splitlines()[-1]) == (
        1, "Error: bootstrap-server needs to be provided when replica reassignments are present."), zk.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2], "log_dirs": [b2, b2]}]}))
    r = tool(cluster, "--execute", "--reassignment-json-file", str(bad))
    assert r.returncode == 1 and "Size of replicas list List(2) is different from size of log dirs list" in r.stderr
    ex = tool(cluster, "--execute", "--reassignment-json-file", str(plan), "--replica-alter-log-dirs-throttle",
              "50000000")
    assert ex.returncode == 0, ex.stderr
    assert "The replica-alter-dir throttle limit was set to 50000000 B/s" in ex.stdout
    assert f"Successfully started partition reassignments for {topic}-0,{topic}-1" in ex.stdout
    started = [line for line in ex.stdout.splitlines() if line.startswith("Successfully started log directory move")]
    assert sorted(r for line in started for r in line.split(": ")[1].split(",")) == [f"1-{topic}-1", f"2-{topic}-0"]

    def verified() -> str | None:
        r = tool(cluster, "--verify", "--reassignment-json-file", str(plan))
        assert r.returncode == 0, r.stderr
        return None if "still in progress" in r.stdout else r.stdout
    out = wait_until(verified, 120, "the moves to complete", interval=0.5)
    assert f"Reassignment of replica 1-{topic}-1 completed successfully." in out
    assert f"Reassignment of replica 2-{topic}-0 completed successfully." in out
    assert "Clearing broker-level throttles on brokers 1,2" in out
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        assert where(admin, 2, (topic, 0))[False][0] == b2
        assert where(admin, 1, (topic, 1))[False][0] == other1
        for b in (1, 2):
            entries = admin.describe_configs([("broker", str(b))])[("broker", str(b))]
            assert not [e for e in entries if e.name == RATE and e.source == "DYNAMIC_BROKER_CONFIG"], b


def test_an_io_error_in_the_log_cleaner_takes_its_log_dir_offline(cluster):
    topic, tp = "cleaned", ("cleaned", 0)
    create(cluster, topic, {0: [1, 2]}, {"cleanup.policy": "compact", "segment.bytes": "8192",
                                         "min.cleanable.dirty.ratio": "0.01"})
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        [(bad_dir, _, _)] = where(admin, 1, tp).values()
    good_dir = next(d for d in broker_dirs(cluster, 1) if d != bad_dir)
    # a real I/O error for broker 1's cleaner: the path of its first cleaned segment is a directory
    blocker = Path(bad_dir) / f"{topic}-0" / "00000000000000000000.log.cleaned"
    blocker.mkdir()
    producer = Producer(bootstrap_servers=cluster.bootstrap_servers, acks="all", enable_idempotence=True,
                        linger_ms=5, batch_size=2048)
    last: dict[bytes, bytes] = {}
    sent = []
    for i in range(3000):            # 50 keys, segments of 8 KiB
        key = b"key-%d" % (i % 50)
        last[key] = b"value-%d" % i
        sent.append(producer.send(topic, last[key], key=key, partition=0))
    producer.flush(60)
    assert sorted(f.get(10).offset for f in sent) == list(range(3000))
    producer.close()

    def dirs_of_broker_1(admin: AdminClient) -> dict[str, str | None]:
        return {d["log_dir"]: d["error"] for d in admin.describe_log_dirs([1])[1]}

    def partition(admin: AdminClient) -> tuple[int, list[int]]:
        p = admin.describe_topics([topic])[0]["partitions"][0]
        return p["leader"], sorted(p["isr"])

    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        wait_until(lambda: dirs_of_broker_1(admin) == {bad_dir: "KAFKA_STORAGE_ERROR", good_dir: None}, 60,
                   "broker 1's cleaner to take its log dir offline")
        assert wait_until(lambda: partition(admin) == (2, [2]) and partition(admin), 60,
                          "the partition to be led by broker 2 alone") == (2, [2])
        assert where(admin, 1, tp) == {}     # not made again in the live dir: its data is in the other
    create(cluster, "after-the-failure", {0: [1, 2]})
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        assert where(admin, 1, ("after-the-failure", 0))[False][0] == good_dir
    consumer = Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    latest: dict[bytes, bytes] = {}

    def read_to_the_end() -> bool:
        for records in consumer.poll(500).values():
            latest.update((r.key, r.value) for r in records)
        return latest == last
    wait_until(read_to_the_end, 60, "the latest value of every key, from broker 2")
    consumer.close()
    # the disk repaired, a restart brings the dir back and the replica into the ISR
    blocker.rmdir()
    cluster.kill_broker(1, signal.SIGTERM)
    cluster.start_broker(1)
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        wait_until(lambda: dirs_of_broker_1(admin) == {bad_dir: None, good_dir: None}, 60, "both dirs online",
                   retry_on=(KafkaError, OSError))
        wait_until(lambda: partition(admin)[1] == [1, 2], 60, "broker 1 back in the ISR")
