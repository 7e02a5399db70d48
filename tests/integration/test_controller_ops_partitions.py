"""Adding partitions end to end: ``odradek topics --alter --partitions`` and the CreatePartitions
API through confluent-kafka's and kafka-python's admin clients; brokers must serve the new
partitions (Metadata shows leaders) and ZooKeeper must hold their state znodes."""
from __future__ import annotations

import pytest
from test_controller_ops_preferred import (STABLE, create_topic, metadata_leaders, ok, state, wait_all_brokers_known,
                                           wait_for)


def served_everywhere(c, topic: str, n: int) -> None:
    for b in c.brokers:
        wait_for(lambda b=b: (m := metadata_leaders(c, b, topic)).keys() == set(range(n))
                 and all(leader >= 1 for leader in m.values()), what=f"broker {b} to serve {n} partitions of {topic}")
    for p in range(n):
        s = state(c.zk, topic, p)
        assert s is not None and s["leader"] in s["isr"], (p, s)


def test_alter_and_create_partitions_api(cluster_factory):
    confluent_admin = pytest.importorskip("confluent_kafka.admin")
    kafka_admin = pytest.importorskip("kafka.admin")
    kafka_errors = pytest.importorskip("kafka.errors")
    from confluent_kafka import KafkaException

    c = cluster_factory(brokers=3, overrides={"auto.leader.rebalance.enable": "false", **STABLE})
    wait_all_brokers_known(c)
    create_topic(c, "grow", [[1, 2, 3], [2, 3, 1]])

    # 1. The ZooKeeper tool.
    out = ok(c, "topics", "--alter", "--topic", "grow", "--partitions", "4")
    assert "Adding partitions succeeded!" in out
    served_everywhere(c, "grow", 4)
    assert all(len(state(c.zk, "grow", p)["isr"]) == 3 for p in (2, 3))

    # 2. confluent-kafka (librdkafka) AdminClient.create_partitions.
    admin = confluent_admin.AdminClient({"bootstrap.servers": c.bootstrap_servers})
    fut = admin.create_partitions([confluent_admin.NewPartitions("grow", 6)], request_timeout=30)["grow"]
    assert fut.result(timeout=60) is None
    served_everywhere(c, "grow", 6)

    def confluent_error(new_parts, **kw) -> str:
        f = admin.create_partitions([new_parts], request_timeout=30, **kw)[new_parts.topic]
        with pytest.raises(KafkaException) as ei:
            f.result(timeout=60)
        return ei.value.args[0].name()

    assert confluent_error(confluent_admin.NewPartitions("grow", 6)) == "INVALID_PARTITIONS"
    assert confluent_error(confluent_admin.NewPartitions("grow", 3)) == "INVALID_PARTITIONS"
    assert confluent_error(confluent_admin.NewPartitions("nope", 3)) == "UNKNOWN_TOPIC_OR_PART"
    assert confluent_error(confluent_admin.NewPartitions("grow", 7, replica_assignment=[[1, 9, 2]])) \
        == "INVALID_REPLICA_ASSIGNMENT"
    assert confluent_error(confluent_admin.NewPartitions("grow", 7, replica_assignment=[[1, 2]])) \
        == "INVALID_REPLICA_ASSIGNMENT"
    fut = admin.create_partitions([confluent_admin.NewPartitions("grow", 9)], validate_only=True,
                                  request_timeout=30)["grow"]
    assert fut.result(timeout=60) is None
    assert state(c.zk, "grow", 6) is None and len(metadata_leaders(c, 1, "grow")) == 6

    # 3. kafka-python KafkaAdminClient.create_partitions (sent to the controller it discovers).
    kp = kafka_admin.KafkaAdminClient(bootstrap_servers=c.bootstrap_servers, request_timeout_ms=30000)
    try:
        kp.create_partitions({"grow": kafka_admin.NewPartitions(total_count=8,
                                                                new_assignments=[[3, 1, 2], [1, 2, 3]])},
                             timeout_ms=30000)
        served_everywhere(c, "grow", 8)
        assert state(c.zk, "grow", 6)["leader"] == 3 and state(c.zk, "grow", 7)["leader"] == 1
        with pytest.raises(kafka_errors.InvalidPartitionsError):
            kp.create_partitions({"grow": kafka_admin.NewPartitions(total_count=8)}, timeout_ms=30000)
    finally:
        kp.close()
