"""AdminClient and the console tools against a real 3-broker cluster."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.client import AdminClient, ErrorCode, KafkaError, NewTopic
from odradek.testing import wait_until

ODRADEK = str(Path(sys.executable).parent / "odradek")


@pytest.fixture
def cluster(cluster_factory):
    return cluster_factory(brokers=3)


def test_admin_create_describe_delete(cluster):
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        info = admin.describe_cluster()
        assert sorted(b["node_id"] for b in info["brokers"]) == [1, 2, 3]
        assert info["controller_id"] in (1, 2, 3) and info["cluster_id"]

        assert admin.create_topics([NewTopic("orders", 6, 3), NewTopic("audit", 1, 2, {"cleanup.policy": "compact"})]) \
            == {"orders": None, "audit": None}
        with pytest.raises(KafkaError) as e:
            admin.create_topics([NewTopic("orders", 6, 3)])
        assert e.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        errors = admin.create_topics([NewTopic("too-wide", 1, 5)], raise_errors=False)
        assert errors["too-wide"].code == ErrorCode.INVALID_REPLICATION_FACTOR
        assert admin.create_topics([NewTopic("dry", 2, 1)], validate_only=True) == {"dry": None}

        desc = wait_until(lambda: (d := admin.describe_topics(["orders"])[0])["partitions"]
                          and all(p["leader"] >= 0 for p in d["partitions"]) and d, what="leaders")
        assert len(desc["partitions"]) == 6
        for p in desc["partitions"]:
            assert sorted(p["replicas"]) == [1, 2, 3] and p["leader"] in p["isr"]
        # each broker learns of new topics from the controller's UpdateMetadata, the one asked may
        # not have had it for "audit" (created after "orders") yet: Kafka's metadata is as eventual
        wait_until(lambda: {"orders", "audit"} <= set(admin.list_topics()), what="both topics listed")
        assert "dry" not in admin.list_topics()

        assert admin.delete_topics(["audit"]) == {"audit": None}
        wait_until(lambda: "audit" not in admin.list_topics(), what="deletion")
        with pytest.raises(KafkaError) as e:
            admin.delete_topics(["never-existed"])
        assert e.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_console_producer_to_console_consumer(cluster):
    env = {**os.environ, "ODRADEK_BOOTSTRAP_SERVERS": cluster.bootstrap_servers}
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("lines", 2, 1)])  # RF 1: acks=all needs no follower
    lines = [f"key{i % 3}:line {i} é" for i in range(20)]
    r = subprocess.run([ODRADEK, "console-producer", "--topic", "lines", "--property", "parse.key=true",
                        "--property", "key.separator=:", "--request-required-acks", "all"],
                       input="\n".join(lines) + "\n", text=True, env=env, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([ODRADEK, "console-consumer", "--bootstrap-server", cluster.bootstrap_servers,
                        "--topic", "lines", "--from-beginning", "--max-messages", "20",
                        "--property", "print.key=true", "--property", "key.separator=:"],
                       text=True, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == sorted(lines)
    assert r.stderr.strip().endswith("Processed a total of 20 messages")
    # per key, order is kept (one key -> one partition)
    out = r.stdout.splitlines()
    for k in ("key0", "key1", "key2"):
        assert [x for x in out if x.startswith(k + ":")] == [x for x in lines if x.startswith(k + ":")]
    # --partition/--offset and --timeout-ms
    r = subprocess.run([ODRADEK, "console-consumer", "--topic", "lines", "--partition", "0", "--offset", "earliest",
                        "--timeout-ms", "1500", "--property", "print.offset=true"],
                       text=True, env=env, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert all(line.startswith("Offset:") for line in r.stdout.splitlines())
    assert "Processed a total of" in r.stderr
    r = subprocess.run([ODRADEK, "console-consumer", "--topic", "no-such-topic", "--timeout-ms", "100"],
                       text=True, env=env, capture_output=True, timeout=120)
    assert r.returncode == 1 and r.stderr.startswith("Error: ")
