"""KafkaZkClient against a real ZooKeeper ensemble (per-test chroot)."""
from __future__ import annotations

import json

import pytest
from odradek_test_support import synced

from odradek.zk import znodes as zn
from odradek.zk.session import BrokerIdInUseError, ControllerMovedError, KafkaZkClient


@pytest.fixture
def kzc(zk_connect):
    c = KafkaZkClient(zk_connect, session_timeout_ms=6000)
    c.start()
    c.create_persistent_paths()
    yield c
    c.close()


def test_cluster_id_producer_ids_and_config(kzc, zk):
    assert kzc.get_or_create_cluster_id("abc") == "abc"
    assert kzc.get_or_create_cluster_id("other") == "abc"
    assert json.loads(synced(zk).get("/cluster/id")[0]) == {"version": "1", "id": "abc"}
    assert kzc.allocate_producer_id_block(1) == (0, 999)
    assert kzc.allocate_producer_id_block(2) == (1000, 1999)
    assert json.loads(synced(zk).get("/latest_producer_id_block")[0]) == {
        "version": 1, "broker": 2, "block_start": "1000", "block_end": "1999"}
    zk.create("/config/topics/t", zn.ConfigEntityZNode.encode({"retention.ms": "5"}))
    synced(kzc.kazoo)
    assert kzc.get_entity_config("topics", "t") == {"retention.ms": "5"}
    assert kzc.get_entity_config("topics", "none") == {}
    for p in zn.PERSISTENT_PATHS:
        assert synced(zk).exists(p)


def test_register_broker_epoch_and_conflicts(kzc, zk_connect):
    info = zn.BrokerInfo(1, [zn.Endpoint("PLAINTEXT", "127.0.0.1", 9092)])
    epoch = kzc.register_broker(info)
    brokers = kzc.get_all_brokers()
    assert brokers[1].epoch == epoch and brokers[1].endpoints == info.endpoints
    assert kzc.register_broker(info) == epoch          # our own node: same epoch
    other = KafkaZkClient(zk_connect, session_timeout_ms=6000)
    other.start()
    try:
        with pytest.raises(BrokerIdInUseError):
            other.register_broker(zn.BrokerInfo(1, [zn.Endpoint("PLAINTEXT", "127.0.0.1", 9999)]))
    finally:
        other.close()


def test_controller_election_multi_and_fenced_writes(kzc, zk):
    assert kzc.get_controller_epoch() is None
    epoch, version = kzc.register_controller_and_increment_epoch(3)
    assert (epoch, version) == (1, 1) and kzc.get_controller_id() == 3
    assert synced(zk).get("/controller_epoch")[0] == b"1"
    with pytest.raises(ControllerMovedError):
        kzc.register_controller_and_increment_epoch(4)
    tp = ("t", 0)
    zk.create(zn.TopicZNode.path("t"), zn.TopicZNode.encode({0: [3, 4]}))
    st = zn.LeaderIsrAndControllerEpoch(3, 0, [3, 4], epoch, 0)
    assert kzc.create_partition_states({tp: st}, version) == {tp: None}
    assert json.loads(synced(zk).get("/brokers/topics/t/partitions/0/state")[0]) == {
        "controller_epoch": 1, "leader": 3, "version": 1, "leader_epoch": 0, "isr": [3, 4]}
    res = kzc.update_partition_states_conditionally(
        {tp: zn.LeaderIsrAndControllerEpoch(4, 1, [4], epoch, 0)}, version)
    assert res.succeeded[tp].zk_version == 1 and not res.bad_version
    res = kzc.update_partition_states_conditionally(
        {tp: zn.LeaderIsrAndControllerEpoch(3, 2, [3], epoch, 0)}, version)
    assert res.bad_version == [tp]
    # Another controller bumps the epoch: every fenced write now fails.
    kzc.delete_controller_if_ours(3)
    assert kzc.register_controller_and_increment_epoch(4) == (2, 2)
    with pytest.raises(ControllerMovedError):
        kzc.update_partition_states_conditionally({tp: kzc.get_partition_states([tp])[tp]}, version)
    with pytest.raises(ControllerMovedError):
        kzc.delete_topic_znodes("t", version)
    assert synced(zk).exists("/brokers/topics/t/partitions/0/state")


def test_isr_change_notifications(kzc):
    kzc.register_controller_and_increment_epoch(1)
    _, version = kzc.get_controller_epoch()
    kzc.create_isr_change_notification([("t", 0), ("u", 2)])
    names = kzc.get_isr_change_notifications()
    assert len(names) == 1 and names[0].startswith("isr_change_")
    assert kzc.get_partitions_from_isr_change_notifications(names) == [("t", 0), ("u", 2)]
    kzc.delete_isr_change_notifications(names, version)
    assert kzc.get_isr_change_notifications() == []


def test_broker_isr_writes_are_conditional_per_partition_in_one_batch(kzc, zk):
    kzc.register_controller_and_increment_epoch(1)
    epoch, version = kzc.get_controller_epoch()
    zk.create(zn.TopicZNode.path("isr"), zn.TopicZNode.encode({0: [1, 2], 1: [1, 2]}))
    a, b, missing = ("isr", 0), ("isr", 1), ("isr", 7)
    st = zn.LeaderIsrAndControllerEpoch(1, 0, [1, 2], epoch, 0)
    assert kzc.create_partition_states({a: st, b: st}, version) == {a: None, b: None}
    shrunk = zn.LeaderIsrAndControllerEpoch(1, 0, [1], epoch, 0)
    stale = zn.LeaderIsrAndControllerEpoch(1, 0, [1], epoch, 5)   # a zkVersion the znode does not have
    assert kzc.conditional_update_partition_states({a: shrunk, b: stale, missing: shrunk}) == \
        {a: 1, b: None, missing: None}
    states = kzc.get_partition_states([a, b])
    assert (states[a].isr, states[a].zk_version) == ([1], 1)
    assert (states[b].isr, states[b].zk_version) == ([1, 2], 0)   # the refused write changed nothing


def test_many_epoch_checked_writes_keep_each_partitions_own_result(kzc, zk):
    """Written MULTI_OPS to a ZooKeeper multi: a failed write (here the 150th) leaves every other
    partition's result what it would have been alone."""
    from odradek.zk.multi_ops import MULTI_OPS
    kzc.register_controller_and_increment_epoch(1)
    epoch, version = kzc.get_controller_epoch()
    count = 2 * MULTI_OPS + 50
    zk.create(zn.TopicZNode.path("many"), zn.TopicZNode.encode({p: [1, 2] for p in range(count)}))
    tps = [("many", p) for p in range(count)]
    st = zn.LeaderIsrAndControllerEpoch(1, 0, [1, 2], epoch, 0)
    assert kzc.create_partition_states({tp: st for tp in tps}, version) == {tp: None for tp in tps}
    moved = {tp: zn.LeaderIsrAndControllerEpoch(2, 1, [2], epoch, 0 if tp[1] != 149 else 3) for tp in tps}
    res = kzc.update_partition_states_conditionally(moved, version)
    assert res.bad_version == [("many", 149)] and not res.failed
    assert sorted(res.succeeded) == [tp for tp in tps if tp[1] != 149]
    states = kzc.get_partition_states(tps)
    assert {tp: (s.leader, s.zk_version) for tp, s in states.items()} == \
        {tp: ((1, 0) if tp[1] == 149 else (2, 1)) for tp in tps}


def test_many_znodes_read_as_multireads_each_with_its_own_answer(kzc, zk):
    """``read_existing`` (multiRead, MULTI_OPS to a request): what one get per znode answers, a
    missing znode left out, a znode this client may not read raising NoAuthError."""
    from kazoo.exceptions import NoAuthError
    from kazoo.security import make_digest_acl
    from odradek.zk.multi_ops import MULTI_OPS, read_existing
    paths = [f"/reads/n{i}" for i in range(2 * MULTI_OPS + 50)]
    for i, p in enumerate(paths):
        if i % 7:
            zk.create(p, b"v%d" % i, makepath=True)
    zk.set(paths[1], b"changed")
    got = read_existing(synced(kzc.kazoo), paths)
    assert sorted(got) == sorted(p for i, p in enumerate(paths) if i % 7)
    assert all(got[p] == zk.get(p) for p in got)          # data and stat, as one get answers
    assert got[paths[1]][0] == b"changed" and got[paths[1]][1].version == 1
    zk.create("/reads/secret", b"s", acl=[make_digest_acl("someone", "pw", all=True)])
    try:
        with pytest.raises(NoAuthError):
            read_existing(synced(kzc.kazoo), paths[:3] + ["/reads/secret"])
    finally:
        zk.delete("/reads/secret")   # (deleting needs the parent's permission only)
