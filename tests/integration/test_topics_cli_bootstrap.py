"""``odradek topics --bootstrap-server`` as a user runs it (Kafka 2.8's quickstart commands), against
the session's shared 3-broker cluster (``kafka_cluster``): topics created, listed, described, grown
and deleted through a broker's admin API, each output checked against what the same tool shows
through ZooKeeper, and every refusal one line that changes nothing.
"""
from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from odradek.testing import wait_until

ODRADEK = os.path.join(os.path.dirname(sys.executable), "odradek")


def topics(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ODRADEK_DATA_DIR": "/nonexistent"}   # no local cluster to fall back on
    return subprocess.run([ODRADEK, "topics", *args], capture_output=True, text=True, timeout=120, env=env)


def ok(*args: str) -> str:
    r = topics(*args)
    assert r.returncode == 0 and r.stderr == "", (r.stdout, r.stderr)
    return r.stdout


def fails(*args: str, fragment: str) -> str:
    r = topics(*args)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], r.stderr
    return lines[0]


@pytest.fixture
def bs(kafka_cluster) -> str:
    return kafka_cluster.bootstrap_servers.split(",")[0]


@pytest.fixture
def zk_connect(kafka_cluster) -> str:
    return kafka_cluster.zookeeper_connect


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def led(bs: str, topic: str, partitions: int) -> str:
    """The describe output once the broker asked knows ``partitions`` partitions of ``topic``, each
    with a leader and a full ISR (a new topic reaches each broker's metadata with the controller's
    UpdateMetadata, as in Kafka: the broker asked may not know it yet)."""
    def described() -> str | None:
        r = topics("--bootstrap-server", bs, "--describe", "--topic", topic)
        if r.returncode != 0:
            return None
        out = r.stdout
        rows = [line for line in out.splitlines() if line.startswith("\tTopic:")]
        settled = len(rows) == partitions and all(
            "Leader: none" not in r and r.split("\tReplicas: ")[1].split("\t")[0] == r.split("\tIsr: ")[1]
            for r in rows)
        return out if settled else None
    return wait_until(described, 60, f"{topic}'s {partitions} partitions led, every replica in sync")


def test_quickstart_create_describe_and_the_same_through_zookeeper(bs, zk_connect):
    events = unique("quickstart-events")
    assert ok("--create", "--topic", events, "--bootstrap-server", bs) == f"Created topic {events}.\n"
    orders = unique("orders")
    assert ok("--bootstrap-server", bs, "--create", "--topic", orders, "--partitions", "6", "--replication-factor",
              "3", "--config", "retention.ms=86400000", "--config", "cleanup.policy=compact") \
        == f"Created topic {orders}.\n"

    # the cluster's defaults (num.partitions 1, default.replication.factor 1) where none were given
    out = led(bs, events, 1)
    head, row = out.splitlines()
    assert head.startswith(f"Topic: {events}\tTopicId: ") and head.endswith(
        "\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: ")
    assert row.startswith(f"\tTopic: {events}\tPartition: 0\tLeader: ")

    out = led(bs, orders, 6)
    assert out.splitlines()[0].endswith(
        "\tPartitionCount: 6\tReplicationFactor: 3\tConfigs: retention.ms=86400000,cleanup.policy=compact") or \
        out.splitlines()[0].endswith(
            "\tPartitionCount: 6\tReplicationFactor: 3\tConfigs: cleanup.policy=compact,retention.ms=86400000")
    # the same topic through ZooKeeper: the same id, partitions, leaders, replicas and ISR
    through_zk = ok("--zookeeper", zk_connect, "--describe", "--topic", orders)
    assert through_zk.splitlines()[0].split("\tConfigs: ")[0] == out.splitlines()[0].split("\tConfigs: ")[0]
    assert through_zk.splitlines()[1:] == out.splitlines()[1:]

    listed = ok("--bootstrap-server", bs, "--list").splitlines()
    assert {events, orders} <= set(listed) and listed == sorted(listed)
    assert ok("--bootstrap-server", bs, "--list", "--topic", f"{orders}|{events}") == "\n".join(sorted([events, orders])) + "\n"
    assert all(not t.startswith("__") for t in ok("--bootstrap-server", bs, "--list", "--exclude-internal").splitlines())

    assert fails("--bootstrap-server", bs, "--create", "--topic", orders, "--partitions", "1",
                 "--replication-factor", "1", fragment=f"Topic '{orders}' already exists.")
    assert ok("--bootstrap-server", bs, "--create", "--topic", orders, "--if-not-exists") == ""
    assert ok("--bootstrap-server", bs, "--describe", "--topic", orders, "--topics-with-overrides").count("\n") == 1
    assert ok("--bootstrap-server", bs, "--describe", "--topic", orders, "--under-replicated-partitions") == ""
    assert ok("--bootstrap-server", bs, "--describe", "--topic", orders, "--unavailable-partitions") == ""


def test_alter_grows_a_topic_and_refuses_what_kafka_refuses(bs, zk_connect):
    topic = unique("grow")
    ok("--bootstrap-server", bs, "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "2")
    led(bs, topic, 2)
    assert ok("--bootstrap-server", bs, "--alter", "--topic", topic, "--partitions", "3") == ""
    led(bs, topic, 3)
    # of a full --replica-assignment, only the partitions past the existing ones are placed
    assert ok("--bootstrap-server", bs, "--alter", "--topic", topic, "--partitions", "5",
              "--replica-assignment", "1:2,2:3,3:1,1:3,2:1") == ""
    rows = led(bs, topic, 5).splitlines()[1:]
    assert [r.split("\tReplicas: ")[1].split("\t")[0] for r in rows[3:]] == ["1,3", "2,1"]

    assert fails("--bootstrap-server", bs, "--alter", "--topic", topic, "--partitions", "4",
                 fragment="Topic currently has 5 partitions, which is higher than the requested 4.")
    assert fails("--bootstrap-server", bs, "--alter", "--topic", topic, "--config", "retention.ms=1",
                 fragment='Option combination "[bootstrap-server],[config]" can\'t be used with option "[alter]"')
    assert fails("--bootstrap-server", bs, "--alter", "--topic", topic, "--delete-config", "retention.ms",
                 fragment='Option "[delete-config]" can\'t be used with option "[bootstrap-server]"')
    assert fails("--bootstrap-server", bs, "--alter", "--topic", topic,
                 fragment='Missing required argument "[partitions]"')
    assert fails("--bootstrap-server", bs, "--alter", "--topic", unique("absent"), "--partitions", "9",
                 fragment="does not exist as expected")
    assert ok("--bootstrap-server", bs, "--alter", "--topic", unique("absent"), "--partitions", "9",
              "--if-exists") == ""
    assert ok("--bootstrap-server", bs, "--describe", "--topic", topic).count("\tPartition: ") == 5


def test_create_refusals_are_one_line(bs, zk_connect):
    assert fails("--bootstrap-server", bs, "--create", "--topic", "bad/name",
                 fragment='Topic name "bad/name" is illegal')
    assert fails("--bootstrap-server", bs, "--create", "--topic", unique("wide"), "--replication-factor", "4",
                 fragment="Replication factor: 4 larger than available brokers: 3.")
    assert fails("--bootstrap-server", bs, "--create", "--topic", unique("none"), "--partitions", "0",
                 fragment="The partitions must be greater than 0")
    assert fails("--bootstrap-server", bs, "--create", "--topic", unique("bad-config"), "--config", "retention.ms=x",
                 fragment="retention.ms")
    assert fails("--bootstrap-server", bs, "--zookeeper", zk_connect, "--list",
                 fragment="Only one of --bootstrap-server or --zookeeper must be specified")
    assert fails("--zookeeper", zk_connect, "--command-config", "/nonexistent", "--list",
                 fragment="--command-config can only be used with --bootstrap-server")
    assert fails("--bootstrap-server", bs, "--command-config", "/nonexistent", "--list",
                 fragment="cannot read /nonexistent")
    listed = ok("--bootstrap-server", bs, "--list").splitlines()
    assert not any(t.startswith(("wide-", "none-", "bad-config-")) for t in listed)


def test_delete_removes_a_topic_and_an_internal_one_is_never_deleted_or_grown(bs, kafka_cluster):
    topic = unique("doomed")
    ok("--bootstrap-server", bs, "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "2")
    led(bs, topic, 2)
    # a regex that matches an internal topic deletes nothing
    consumer = subprocess.run([ODRADEK, "console-consumer", "--bootstrap-server", bs, "--topic", topic, "--group",
                               unique("g"), "--timeout-ms", "1000"], capture_output=True, text=True, timeout=120)
    assert consumer.returncode == 0, consumer.stderr
    wait_until(lambda: "__consumer_offsets" in ok("--bootstrap-server", bs, "--list").splitlines(), 60,
               "__consumer_offsets known to the broker asked")
    assert fails("--bootstrap-server", bs, "--delete", "--topic", f"__consumer_offsets|{topic}",
                 fragment="Topic __consumer_offsets is a kafka internal topic and is not allowed to be marked for deletion.")
    assert {"__consumer_offsets", topic} <= set(ok("--bootstrap-server", bs, "--list").splitlines())
    assert fails("--bootstrap-server", bs, "--alter", "--topic", "__consumer_offsets", "--partitions", "60",
                 fragment="The number of partitions for the internal topic __consumer_offsets cannot be changed.")
    assert "\tPartitionCount: 50\t" in ok("--bootstrap-server", bs, "--describe", "--topic", "__consumer_offsets")

    assert ok("--bootstrap-server", bs, "--delete", "--topic", topic) == ""
    wait_until(lambda: topic not in ok("--bootstrap-server", bs, "--list").splitlines(), 60, f"{topic} deleted")
    wait_until(lambda: topic not in kafka_cluster.zk.get_children("/brokers/topics"), 60, "its znode gone")
    assert fails("--bootstrap-server", bs, "--delete", "--topic", topic, fragment=f"Topic '{topic}' does not exist")
    assert ok("--bootstrap-server", bs, "--delete", "--topic", topic, "--if-exists") == ""


def test_an_unreachable_broker_is_one_line(free_port):
    assert fails("--bootstrap-server", f"127.0.0.1:{free_port()}", "--list", fragment="no broker reachable")
