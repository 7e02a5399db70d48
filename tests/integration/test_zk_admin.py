"""AdminZkClient against a real 3-node ensemble: Kafka's znodes, Kafka's order, Kafka's errors.

Each test runs in its own chroot of the session ensemble; "live brokers" are fake
ephemeral /brokers/ids/<id> znodes (this is about the admin client, not a broker).
"""
import json

import pytest

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.admin import AdminZkClient, TopicAlreadyMarkedForDeletion
from odradek.zk.znodes import LeaderIsrAndControllerEpoch, TopicPartitionStateZNode


def _json(zk, path):
    return json.loads(zk.get(path)[0].decode())


def _code(exc_info):
    return exc_info.value.code


def test_create_topic_writes_kafkas_znodes_config_first(zk, register_brokers):
    register_brokers([1, 2, 3])
    admin = AdminZkClient(zk)
    assignment = admin.create_topic("orders", None, None, {"retention.ms": "86400000"},
                                    replica_assignment={0: [1, 2], 1: [2, 3], 2: [3, 1]})
    assert assignment == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    stored = _json(zk, "/brokers/topics/orders")
    assert stored == {
        "version": 3, "partitions": {"0": [1, 2], "1": [2, 3], "2": [3, 1]},
        "adding_replicas": {}, "removing_replicas": {}, "topic_id": stored["topic_id"]}   # Kafka 2.8's v3
    assert len(stored["topic_id"]) == 22    # a 16-byte id, URL-safe base64 without padding
    assert _json(zk, "/config/topics/orders") == {"version": 1, "config": {"retention.ms": "86400000"}}
    # Kafka's order: /config/topics/<t> first, then /brokers/topics/<t> (which the controller watches)
    assert zk.exists("/config/topics/orders").czxid < zk.exists("/brokers/topics/orders").czxid
    # no state znodes: the controller creates them
    assert not zk.exists("/brokers/topics/orders/partitions")


def test_create_topic_with_generated_assignment(zk, register_brokers):
    register_brokers([3, 1, 2])
    admin = AdminZkClient(zk)
    assignment = admin.create_topic("t", 6, 2, {})
    assert sorted(assignment) == list(range(6))
    leaders = [r[0] for r in assignment.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]
    assert all(len(set(r)) == 2 and set(r) <= {1, 2, 3} for r in assignment.values())
    stored = _json(zk, "/brokers/topics/t")["partitions"]
    assert stored == {str(p): r for p, r in assignment.items()}
    assert _json(zk, "/config/topics/t") == {"version": 1, "config": {}}


@pytest.mark.parametrize("name", ["", "bad name", "..", "x" * 250])
def test_create_rejects_bad_names(zk, register_brokers, name):
    register_brokers([1])
    with pytest.raises(KafkaError) as info:
        AdminZkClient(zk).create_topic(name, 1, 1)
    assert _code(info) == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert zk.get_children("/") == ["brokers"]  # nothing written


def test_create_errors(zk, register_brokers):
    admin = AdminZkClient(zk)
    with pytest.raises(KafkaError) as info:
        admin.create_topic("t", 1, 1)  # no live brokers at all
    assert _code(info) == ErrorCode.INVALID_REPLICATION_FACTOR
    register_brokers([1, 2])
    with pytest.raises(KafkaError) as info:
        admin.create_topic("t", 1, 3)
    assert _code(info) == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "larger than available brokers: 2" in info.value.message
    with pytest.raises(KafkaError) as info:
        admin.create_topic("t", 0, 1)
    assert _code(info) == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(KafkaError) as info:
        admin.create_topic("t", 1, 1, {"retention.mss": "1"})
    assert _code(info) == ErrorCode.INVALID_CONFIG
    assert not zk.exists("/config/topics/t") and not zk.exists("/brokers/topics/t")

    admin.create_topic("t", 1, 1)
    with pytest.raises(KafkaError) as info:
        admin.create_topic("t", 1, 1)
    assert _code(info) == ErrorCode.TOPIC_ALREADY_EXISTS

    admin.create_topic("a.b", 1, 1)
    with pytest.raises(KafkaError) as info:
        admin.create_topic("a_b", 1, 1)
    assert _code(info) == ErrorCode.INVALID_TOPIC_EXCEPTION and "collides" in info.value.message

    with pytest.raises(KafkaError) as info:
        admin.create_topic("u", None, None, replica_assignment={0: [1, 1]})
    assert _code(info) == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_live_brokers_sorted_with_epoch(zk, register_brokers):
    register_brokers([5, 1, 3])
    brokers = AdminZkClient(zk).live_brokers()
    assert [b.id for b in brokers] == [1, 3, 5]
    assert all(b.epoch == zk.exists(f"/brokers/ids/{b.id}").czxid for b in brokers)
    assert brokers[0].endpoints[0].host == "127.0.0.1"


def test_delete_list_and_marks(zk, register_brokers):
    register_brokers([1])
    admin = AdminZkClient(zk)
    admin.create_topic("b", 1, 1)
    admin.create_topic("a", 1, 1)
    admin.delete_topic("b")
    assert zk.get("/admin/delete_topics/b")[0] == b""
    assert [(t.name, t.marked_for_deletion) for t in admin.list_topics()] == [("a", False), ("b", True)]
    with pytest.raises(TopicAlreadyMarkedForDeletion):
        admin.delete_topic("b")
    with pytest.raises(KafkaError) as info:
        admin.delete_topic("nope")
    assert _code(info) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(KafkaError) as info:  # can't re-create while deletion is pending
        admin.create_topic("b", 1, 1)
    assert _code(info) == ErrorCode.TOPIC_ALREADY_EXISTS and "marked for deletion" in info.value.message


def test_describe_reads_state_znodes(zk, register_brokers):
    register_brokers([1, 2])
    admin = AdminZkClient(zk)
    admin.create_topic("t", None, None, {"cleanup.policy": "compact"}, replica_assignment={0: [1, 2], 1: [2, 1],
                                                                                           2: [1, 2]})
    zk.create(TopicPartitionStateZNode.path("t", 0),
              TopicPartitionStateZNode.encode(LeaderIsrAndControllerEpoch(1, 3, [1, 2], 1)), makepath=True)
    zk.create(TopicPartitionStateZNode.path("t", 1),
              TopicPartitionStateZNode.encode(LeaderIsrAndControllerEpoch(-1, 4, [2], 1)), makepath=True)
    desc = admin.describe_topic("t")
    assert desc.name == "t" and desc.replication_factor == 2 and desc.config == {"cleanup.policy": "compact"}
    p0, p1, p2 = desc.partitions
    assert (p0.leader, p0.isr, p0.replicas, p0.leader_epoch) == (1, [1, 2], [1, 2], 3)
    assert (p1.leader, p1.isr) == (None, [2]) and p1.under_replicated and p1.unavailable({1, 2})
    assert (p2.leader, p2.isr) == (None, [])
    with pytest.raises(KafkaError) as info:
        admin.describe_topic("nope")
    assert _code(info) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_add_partitions(zk, register_brokers):
    register_brokers([1, 2, 3])
    admin = AdminZkClient(zk)
    admin.create_topic("t", None, None, replica_assignment={0: [3, 1], 1: [1, 2]})
    full = admin.add_partitions("t", 4)
    # Kafka: start at the first broker with id >= partition 0's leader (3 -> index 2), ids continue at 2
    assert full == {0: [3, 1], 1: [1, 2], 2: [2, 3], 3: [3, 2]}  # shift bumps at p=3
    assert _json(zk, "/brokers/topics/t")["partitions"] == {"0": [3, 1], "1": [1, 2], "2": [2, 3], "3": [3, 2]}
    with pytest.raises(KafkaError) as info:
        admin.add_partitions("t", 4)
    assert _code(info) == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(KafkaError) as info:
        admin.add_partitions("t", 5, {4: [1, 9]})
    assert _code(info) == ErrorCode.BROKER_NOT_AVAILABLE
    assert admin.add_partitions("t", 5, {4: [2, 1]})[4] == [2, 1]


def test_add_partitions_keeps_topic_id_and_reassignment(zk, register_brokers):
    register_brokers([1, 2])
    zk.create("/brokers/topics/t", json.dumps({
        "version": 3, "topic_id": "AAAAAAAAAAAAAAAAAAAAAA", "partitions": {"0": [1, 2]},
        "adding_replicas": {"0": [2]}, "removing_replicas": {}}).encode(), makepath=True)
    AdminZkClient(zk).add_partitions("t", 2)
    obj = _json(zk, "/brokers/topics/t")
    assert obj["topic_id"] == "AAAAAAAAAAAAAAAAAAAAAA" and obj["version"] == 3
    assert obj["adding_replicas"] == {"0": [2]} and len(obj["partitions"]) == 2
    assert AdminZkClient(zk).describe_topic("t").topic_id == "AAAAAAAAAAAAAAAAAAAAAA"


def test_change_topic_config_notifies(zk, register_brokers):
    register_brokers([1])
    admin = AdminZkClient(zk)
    admin.create_topic("t", 1, 1, {"retention.ms": "1000"})
    admin.change_topic_config("t", {"retention.ms": "2000", "cleanup.policy": "compact"})
    assert _json(zk, "/config/topics/t") == {"version": 1,
                                             "config": {"retention.ms": "2000", "cleanup.policy": "compact"}}
    changes = zk.get_children("/config/changes")
    assert changes == ["config_change_0000000000"]
    assert _json(zk, "/config/changes/config_change_0000000000") == {"version": 2, "entity_path": "topics/t"}
    with pytest.raises(KafkaError) as info:
        admin.change_topic_config("nope", {})
    assert _code(info) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(KafkaError) as info:
        admin.change_topic_config("t", {"bogus": "1"})
    assert _code(info) == ErrorCode.INVALID_CONFIG


def test_reads_with_a_timeout_give_up_while_zookeeper_is_down(tmp_path):
    """What keeps ``odradek ui`` updating through a ZooKeeper outage: kazoo queues a read made
    while disconnected until it reconnects; with ``read_timeout`` the read raises instead."""
    from kazoo.handlers.threading import KazooTimeoutError

    from odradek.testing import wait_until
    from odradek.zk.admin import open_zk
    from odradek.zk.ensemble import ZooKeeperEnsemble
    with ZooKeeperEnsemble(tmp_path, size=1) as ensemble:
        zk = open_zk(ensemble.connect_string, timeout=30)
        try:
            admin = AdminZkClient(zk, read_timeout=1.0)
            assert admin.controller_id() is None and admin.all_topics() == []
            ensemble.stop_node(1)
            wait_until(lambda: not zk.connected, 30, "the client disconnected")
            for read in (admin.controller_id, admin.all_topics, lambda: admin.topic_exists("t")):
                with pytest.raises(KazooTimeoutError):
                    read()
            ensemble.start_node(1)
            wait_until(lambda: zk.connected, 30, "the client reconnected")
            assert admin.controller_id() is None and admin.all_topics() == []
        finally:
            zk.stop()
            zk.close()
