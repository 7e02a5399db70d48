"""``odradek topics`` as a user runs it, against a real 3-node ensemble.

Each test has its own chroot (``ODRADEK_ZOOKEEPER`` or ``--zookeeper``) and fake
ephemeral broker registrations; znodes are read back with kazoo and compared as JSON.
"""
import json
import os
import subprocess
import sys

import pytest
from odradek_test_support import synced

ODRADEK = os.path.join(os.path.dirname(sys.executable), "odradek")


def run(env, *args, timeout=60):
    return subprocess.run([ODRADEK, "topics", *args], capture_output=True, text=True, env=env, timeout=timeout)


def ok(env, *args):
    r = run(env, *args)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    return r.stdout


def fails(env, *args, fragment):
    r = run(env, *args)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("Error: ") and fragment in lines[0], lines[0]
    return lines[0]


def _json(zk, path):
    return json.loads(synced(zk).get(path)[0].decode())   # (written by an ``odradek topics`` process)


def test_create_list_describe_delete(zk, odradek_env, register_brokers):
    register_brokers([1, 2, 3])
    out = ok(odradek_env, "--create", "--topic", "orders", "--partitions", "6", "--replication-factor", "2",
             "--config", "retention.ms=86400000", "--config", "cleanup.policy=compact")
    assert out == "Created topic orders.\n"
    topic = _json(zk, "/brokers/topics/orders")
    assert topic["version"] == 3 and topic["adding_replicas"] == {} and topic["removing_replicas"] == {}
    assert len(topic["topic_id"]) == 22      # Kafka 2.8 gives every new topic an id
    assert sorted(topic["partitions"], key=int) == [str(p) for p in range(6)]
    assert all(len(set(r)) == 2 and set(r) <= {1, 2, 3} for r in topic["partitions"].values())
    assert _json(zk, "/config/topics/orders") == {
        "version": 1, "config": {"retention.ms": "86400000", "cleanup.policy": "compact"}}

    out = ok(odradek_env, "--create", "--topic", "events", "--replica-assignment", "1:2,2:3,3:1")
    assert out == "Created topic events.\n"
    assert _json(zk, "/brokers/topics/events")["partitions"] == {"0": [1, 2], "1": [2, 3], "2": [3, 1]}

    assert ok(odradek_env, "--list") == "events\norders\n"

    zk.create("/brokers/topics/events/partitions/0/state",
              b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}', makepath=True)
    zk.create("/brokers/topics/events/partitions/1/state",
              b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2]}', makepath=True)
    out = ok(odradek_env, "--describe", "--topic", "events")
    topic_id = _json(zk, "/brokers/topics/events")["topic_id"]
    assert out == (f"Topic: events\tTopicId: {topic_id}\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: \n"
                   "\tTopic: events\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\n"
                   "\tTopic: events\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2\n"
                   "\tTopic: events\tPartition: 2\tLeader: none\tReplicas: 3,1\tIsr: \n")
    assert ok(odradek_env, "--describe", "--topic", "events", "--under-replicated-partitions") == (
        "\tTopic: events\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2\n"
        "\tTopic: events\tPartition: 2\tLeader: none\tReplicas: 3,1\tIsr: \n")
    assert ok(odradek_env, "--describe", "--topic", "events", "--unavailable-partitions") == (
        "\tTopic: events\tPartition: 2\tLeader: none\tReplicas: 3,1\tIsr: \n")
    described = ok(odradek_env, "--describe")
    assert f"Topic: orders\tTopicId: {topic['topic_id']}\tPartitionCount: 6\tReplicationFactor: 2\t" \
           "Configs: retention.ms=86400000,cleanup.policy=compact\n" in described
    assert described.count("\tTopic: orders\tPartition: ") == 6

    out = ok(odradek_env, "--delete", "--topic", "orders")
    assert out == ("Topic orders is marked for deletion.\n"
                   "Note: This will have no impact if delete.topic.enable is not set to true.\n")
    assert synced(zk).exists("/admin/delete_topics/orders") and zk.get("/admin/delete_topics/orders")[0] == b""
    assert ok(odradek_env, "--list") == "events\norders - marked for deletion\n"
    assert ok(odradek_env, "--delete", "--topic", "orders") == "Topic orders is already marked for deletion.\n"
    assert "\tMarkedForDeletion: true" in ok(odradek_env, "--describe", "--topic", "orders")


def test_alter_partitions_and_config(zk, odradek_env, register_brokers):
    register_brokers([1, 2])
    ok(odradek_env, "--create", "--topic", "t", "--replica-assignment", "1:2,2:1")
    out = ok(odradek_env, "--alter", "--topic", "t", "--partitions", "4")
    assert out.endswith("Adding partitions succeeded!\n")
    assert _json(zk, "/brokers/topics/t")["partitions"] == {"0": [1, 2], "1": [2, 1], "2": [1, 2], "3": [2, 1]}
    fails(odradek_env, "--alter", "--topic", "t", "--partitions", "3", fragment="can only be increased")
    out = ok(odradek_env, "--alter", "--topic", "t", "--config", "retention.ms=5")
    assert out.endswith("Updated config for topic t.\n")
    assert _json(zk, "/config/topics/t")["config"] == {"retention.ms": "5"}
    [change] = zk.get_children("/config/changes")
    assert _json(zk, f"/config/changes/{change}") == {"version": 2, "entity_path": "topics/t"}


def test_zookeeper_flag_and_if_not_exists(zk, zk_connect, odradek_env, register_brokers):
    register_brokers([1])
    env = {k: v for k, v in odradek_env.items() if k != "ODRADEK_ZOOKEEPER"}
    ok(env, "--zookeeper", zk_connect, "--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1")
    assert ok(env, "--zookeeper", zk_connect, "--create", "--topic", "t", "--partitions", "1",
              "--replication-factor", "1", "--if-not-exists") == ""
    out = ok(env, "--zookeeper", zk_connect, "--create", "--topic", "a.b", "--partitions", "1",
             "--replication-factor", "1")
    assert out.startswith("WARNING: Due to limitations in metric names") and out.endswith("Created topic a.b.\n")


@pytest.mark.parametrize("args,fragment", [
    (["--create", "--topic", "bad name", "--partitions", "1", "--replication-factor", "1"], "is illegal"),
    (["--create", "--topic", "..", "--partitions", "1", "--replication-factor", "1"], 'cannot be "." or ".."'),
    (["--create", "--topic", "x" * 250, "--partitions", "1", "--replication-factor", "1"], "longer than 249"),
    (["--create", "--topic", "t", "--partitions", "1", "--replication-factor", "3"],
     "Replication factor: 3 larger than available brokers: 2."),
    (["--create", "--topic", "t", "--partitions", "0", "--replication-factor", "1"], "must be larger than 0"),
    (["--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1", "--config", "nope=1"],
     "Unknown topic config name: nope"),
    (["--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1", "--config", "retention.ms"],
     "key=val"),
    (["--create", "--topic", "t", "--replication-factor", "1"], "[partitions]"),
    (["--create", "--topic", "t", "--partitions", "1"], "[replication-factor]"),
    (["--create", "--partitions", "1", "--replication-factor", "1"], "[topic]"),
    (["--create", "--topic", "t", "--replica-assignment", "1:1"], "duplicate"),
    (["--list", "--describe"], "exactly one action"),
    ([], "exactly one action"),
    (["--describe", "--topic", "nope"], "Topic 'nope' does not exist as expected"),
    (["--delete", "--topic", "nope"], "Topic 'nope' does not exist as expected"),
    (["--alter", "--topic", "nope", "--partitions", "3"], "Topic 'nope' does not exist as expected"),
    (["--create", "--topic", "t", "--partitions", "x", "--replication-factor", "1"], "invalid int value"),
])
def test_user_errors_are_one_line(odradek_env, register_brokers, args, fragment):
    register_brokers([1, 2])
    fails(odradek_env, *args, fragment=fragment)


def test_existing_topic_is_an_error(zk, odradek_env, register_brokers):
    register_brokers([1])
    ok(odradek_env, "--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1")
    before = zk.get("/brokers/topics/t")
    fails(odradek_env, "--create", "--topic", "t", "--partitions", "2", "--replication-factor", "1",
          fragment="Topic 't' already exists.")
    assert zk.get("/brokers/topics/t") == before
    ok(odradek_env, "--create", "--topic", "a.b", "--partitions", "1", "--replication-factor", "1")
    fails(odradek_env, "--create", "--topic", "a_b", "--partitions", "1", "--replication-factor", "1",
          fragment="collides with existing topics: a.b")


def test_unreachable_zookeeper(odradek_env, free_port):
    env = {k: v for k, v in odradek_env.items() if k != "ODRADEK_ZOOKEEPER"}
    line = fails(env, "--zookeeper", f"127.0.0.1:{free_port()}", "--zookeeper-timeout", "1", "--list",
                 fragment="cannot connect to ZooKeeper")
    assert "within 1s" in line


def test_no_zookeeper_configured(odradek_env, tmp_path):
    env = {k: v for k, v in odradek_env.items() if k != "ODRADEK_ZOOKEEPER"}
    r = subprocess.run([ODRADEK, "topics", "--list"], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "Error: no ZooKeeper to talk to: give --zookeeper host:port, set ODRADEK_ZOOKEEPER, "
        "or start a local cluster with 'odradek cluster up'"]


def test_connect_string_from_cluster_state(zk, zk_connect, odradek_env, register_brokers, tmp_path):
    register_brokers([1])
    data = tmp_path / "data"
    data.mkdir()
    (data / "cluster.json").write_text(json.dumps({"zookeeper_connect": zk_connect}))
    env = {k: v for k, v in odradek_env.items() if k not in ("ODRADEK_ZOOKEEPER", "ODRADEK_DATA_DIR")}
    r = subprocess.run([ODRADEK, "topics", "--create", "--topic", "t", "--partitions", "1",
                        "--replication-factor", "1"], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert synced(zk).exists("/brokers/topics/t")
