"""Metadata, UpdateMetadata, LeaderAndIsr, StopReplica, CreateTopics, InitProducerId handlers."""
from __future__ import annotations

import uuid

import pytest
from twisted.internet import defer

from odradek.broker.apis import (create_topics, delete_topics, init_producer_id, leader_and_isr, metadata,
                                 offset_for_leader_epoch, produce, stop_replica, update_metadata)
from odradek.broker.log.producer_state import ProducerIdManager
from odradek.broker.metadata_cache import PartitionMetadata
from odradek.protocol.errors import ErrorCode
from odradek.zk.znodes import new_topic_id

from broker_fixtures import Broker, batch, call, call_deferred, produce_body


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


def um_body(controller_epoch=1, broker_epoch=-1, topics=None, brokers=(1, 2), deleted=()):
    """UpdateMetadata from controller 1 (ZooKeeper's in the fixture) to a broker whose epoch is -1."""
    topics = topics or {}
    states = [{"topic_name": t, "partition_states": [
        {"partition_index": p, "controller_epoch": controller_epoch, "leader": leader, "leader_epoch": 0,
         "isr": isr, "zk_version": 0, "replicas": replicas, "offline_replicas": []}
        for p, (leader, replicas, isr) in parts.items()]} for t, parts in topics.items()]
    for t, p in deleted:
        states.append({"topic_name": t, "partition_states": [
            {"partition_index": p, "controller_epoch": controller_epoch, "leader": -2, "leader_epoch": 0,
             "isr": [], "zk_version": 0, "replicas": [], "offline_replicas": []}]})
    return {"controller_id": 1, "controller_epoch": controller_epoch, "broker_epoch": broker_epoch,
            "topic_states": states,
            "live_brokers": [{"id": b, "endpoints": [
                {"port": 9090 + b, "host": "127.0.0.1", "listener": "PLAINTEXT", "security_protocol": 0},
                {"port": 9190 + b, "host": "10.0.0.1", "listener": "INTERNAL", "security_protocol": 0}],
                "rack": None} for b in brokers]}


def lai_body(topic="t", partitions=(0,), leader=1, leader_epoch=0, replicas=(1,), controller_epoch=1,
             broker_epoch=-1):
    return {"controller_id": 1, "controller_epoch": controller_epoch, "broker_epoch": broker_epoch, "type": 0,
            "topic_states": [{"topic_name": topic, "topic_id": uuid.UUID(int=0), "partition_states": [
                {"partition_index": p, "controller_epoch": controller_epoch, "leader": leader,
                 "leader_epoch": leader_epoch, "isr": list(replicas), "zk_version": 0,
                 "replicas": list(replicas), "adding_replicas": [], "removing_replicas": [], "is_new": True}
                for p in partitions]}],
            "live_leaders": []}


def test_update_metadata_then_metadata(broker):
    assert call(broker, update_metadata, 7, um_body(topics={"t": {0: (1, [1, 2], [1, 2]), 1: (-1, [2], [])}}
                                                    )).error_code == 0
    resp = call(broker, metadata, 8, {"topics": None})
    assert {(b.node_id, b.port) for b in resp.brokers} == {(1, 9091), (2, 9092)}
    assert resp.controller_id == 1 and resp.cluster_id == "test-cluster-id-00000a"
    [t] = resp.topics
    p0, p1 = sorted(t.partitions, key=lambda p: p.partition_index)
    assert (p0.error_code, p0.leader_id, p0.replica_nodes, p0.isr_nodes) == (0, 1, [1, 2], [1, 2])
    assert (p1.error_code, p1.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
    # the endpoint of the listener the connection came in on
    resp = call(broker, metadata, 8, {"topics": None}, listener="INTERNAL")
    assert {b.host for b in resp.brokers} == {"10.0.0.1"}
    # v0: empty list means all topics; v1+: empty list means none
    assert len(call(broker, metadata, 0, {"topics": []}).topics) == 1
    assert call(broker, metadata, 1, {"topics": []}).topics == []


def test_update_metadata_deletion(broker):
    assert call(broker, update_metadata, 7, um_body(topics={"t": {0: (1, [1], [1])}})).error_code == 0
    assert broker.cache.contains_topic("t")
    assert call(broker, update_metadata, 7, um_body(deleted=[("t", 0)])).error_code == 0
    assert not broker.cache.contains_topic("t")


def test_controller_requests_only_from_the_controller_zookeeper_has(broker):
    """The plain-socket attacks: a forged UpdateMetadata, LeaderAndIsr or StopReplica with the
    wrong broker epoch, an old or a made-up newer controller epoch, or another controller id
    is refused and changes nothing; the controller ZooKeeper elected is served, also right
    after an election the broker learns of from the request itself."""
    broker.ctx.broker_epoch = 100
    broker.zk_controller, broker.zk_controller_epoch = 1, 5
    broker.lead("t")
    assert call(broker, update_metadata, 7, um_body(5, 100, topics={"t": {0: (1, [1], [1])}}, brokers=(1,))
                ).error_code == 0
    data_log = broker.log_manager.get_log(("t", 0))
    forged = [(5, 99, 1, ErrorCode.STALE_BROKER_EPOCH), (5, -1, 1, ErrorCode.STALE_BROKER_EPOCH),
              (5, 101, 1, ErrorCode.STALE_BROKER_EPOCH), (4, 100, 1, ErrorCode.STALE_CONTROLLER_EPOCH),
              (6, 100, 1, ErrorCode.STALE_CONTROLLER_EPOCH), (99, 100, 1, ErrorCode.STALE_CONTROLLER_EPOCH),
              (5, 100, 2, ErrorCode.STALE_CONTROLLER_EPOCH)]
    for controller_epoch, broker_epoch, controller_id, code in forged:
        um = dict(um_body(controller_epoch, broker_epoch, brokers=(1, 7)), controller_id=controller_id)
        assert call(broker, update_metadata, 7, um).error_code == code, (controller_epoch, broker_epoch)
        lai = dict(lai_body(leader=7, leader_epoch=50, replicas=(7, 1), controller_epoch=controller_epoch,
                            broker_epoch=broker_epoch), controller_id=controller_id)
        assert call(broker, leader_and_isr, 5, lai).error_code == code
        stop = {"controller_id": controller_id, "controller_epoch": controller_epoch, "broker_epoch": broker_epoch,
                "topic_states": [{"topic_name": "t", "partition_states": [
                    {"partition_index": 0, "leader_epoch": 50, "delete_partition": True}]}]}
        assert call(broker, stop_replica, 3, stop).error_code == code
    # versions without a broker epoch cannot prove they are for this registration
    old = {"controller_id": 1, "controller_epoch": 5, "delete_partitions": True,
           "ungrouped_partitions": [{"topic_name": "t", "partition_index": 0}]}
    assert call(broker, stop_replica, 0, old).error_code == ErrorCode.STALE_BROKER_EPOCH
    # nothing changed: same log, still the leader, no foreign broker in the metadata
    assert broker.log_manager.get_log(("t", 0)) is data_log and broker.rm.get_partition(("t", 0)).is_leader
    assert {b.node_id for b in call(broker, metadata, 8, {"topics": None}).brokers} == {1}
    assert broker.rm.controller_epoch <= 5 and broker.cache.controller_epoch == 5
    # ZooKeeper elects broker 2 (epoch 6): its first request is checked against ZooKeeper and served,
    # and the deposed controller is refused from then on
    broker.zk_controller, broker.zk_controller_epoch = 2, 6
    assert call(broker, update_metadata, 7, dict(um_body(6, 100), controller_id=2)).error_code == 0
    assert call(broker, update_metadata, 7, um_body(5, 100)).error_code == ErrorCode.STALE_CONTROLLER_EPOCH


def test_metadata_unknown_invalid_and_auto_create(broker):
    created = []

    class Admin:
        def create_topic(self, name, partitions, rf, config):
            created.append((name, partitions, rf))
    call(broker, update_metadata, 7, um_body())
    t = call(broker, metadata, 8, {"topics": [{"name": "bad name"}], "allow_auto_topic_creation": True}).topics[0]
    assert t.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    t = call(broker, metadata, 8, {"topics": [{"name": "new"}], "allow_auto_topic_creation": True}).topics[0]
    assert t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # no admin client in this context
    broker.ctx.admin = Admin()
    t = call(broker, metadata, 8, {"topics": [{"name": "new"}], "allow_auto_topic_creation": False}).topics[0]
    assert t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and created == []
    t = call(broker, metadata, 1, {"topics": [{"name": "new"}]}).topics[0]  # v0-3 always allow
    assert t.error_code == ErrorCode.LEADER_NOT_AVAILABLE and created == [("new", 1, 1)]


def test_metadata_auto_create_rf_larger_than_cluster(tmp_path):
    b = Broker(tmp_path, default_replication_factor=3)
    try:
        b.ctx.admin = object()
        call(b, update_metadata, 7, um_body(brokers=(1,)))
        t = call(b, metadata, 8, {"topics": [{"name": "x"}], "allow_auto_topic_creation": True}).topics[0]
        assert t.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    finally:
        b.close()


def test_leader_and_isr_creates_logs_and_fences(broker):
    r = call(broker, leader_and_isr, 5, lai_body(partitions=(0, 1), leader_epoch=2, replicas=(1, 2)))
    assert r.error_code == 0 and [e.error_code for e in r.topics[0].partition_errors] == [0, 0]
    assert broker.log_manager.get_log(("t", 1)) is not None
    assert broker.rm.get_partition(("t", 0)).is_leader
    assert broker.log_manager.get_log(("t", 0)).leader_epoch_cache.latest_epoch == 2
    # same epoch again: stale
    r = call(broker, leader_and_isr, 4, lai_body(leader_epoch=2, replicas=(1, 2)))
    assert r.partition_errors[0].error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    # not a replica here
    r = call(broker, leader_and_isr, 5, lai_body(topic="u", leader=2, replicas=(2, 3)))
    assert r.topics[0].partition_errors[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # older controller epoch
    r = call(broker, leader_and_isr, 5, lai_body(leader_epoch=9, controller_epoch=0))
    assert r.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    # become follower with a newer epoch
    followers = []
    broker.rm.on_become_follower = followers.extend
    r = call(broker, leader_and_isr, 5, lai_body(leader=2, leader_epoch=3, replicas=(2, 1)))
    assert r.topics[0].partition_errors[0].error_code == 0
    assert not broker.rm.get_partition(("t", 0)).is_leader and [p.tp for p in followers] == [("t", 0)]


def test_offset_for_leader_epoch(broker):
    call(broker, leader_and_isr, 5, lai_body(leader_epoch=1))
    call(broker, update_metadata, 7, um_body(topics={"t": {0: (1, [1], [1])}}))
    call(broker, produce, 8, produce_body("t", batch(3)))
    call(broker, leader_and_isr, 5, lai_body(leader_epoch=4))
    call(broker, produce, 8, produce_body("t", batch(2)))

    def ask(epoch, current=-1):
        body = {"replica_id": 2, "topics": [{"topic": "t", "partitions": [
            {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]}
        return call(broker, offset_for_leader_epoch, 3, body).topics[0].partitions[0]
    p = ask(1)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 1, 3)
    p = ask(4)
    assert (p.leader_epoch, p.end_offset) == (4, 5)
    assert ask(4, current=3).error_code == ErrorCode.FENCED_LEADER_EPOCH


def test_stop_replica_deletes_log(broker):
    call(broker, leader_and_isr, 5, lai_body(partitions=(0, 1)))
    body = {"controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "topic_states": [
        {"topic_name": "t", "partition_states": [{"partition_index": 0, "leader_epoch": -2, "delete_partition": True},
                                                 {"partition_index": 1, "leader_epoch": 0, "delete_partition": True}]}]}
    r = call(broker, stop_replica, 3, body)
    codes = {e.partition_index: e.error_code for e in r.partition_errors}
    assert codes == {0: 0, 1: ErrorCode.FENCED_LEADER_EPOCH}
    assert broker.log_manager.get_log(("t", 0)) is None and broker.log_manager.get_log(("t", 1)) is not None
    r = call(broker, stop_replica, 0, {"controller_id": 1, "controller_epoch": 1, "delete_partitions": True,
                                       "ungrouped_partitions": [{"topic_name": "t", "partition_index": 1}]})
    assert r.partition_errors[0].error_code == 0 and broker.log_manager.get_log(("t", 1)) is None


def test_create_and_delete_topics_need_the_controller(broker):
    body = {"topics": [{"name": "x", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 1000, "validate_only": False}
    r = call(broker, create_topics, 4, body)
    assert r.topics[0].error_code == ErrorCode.NOT_CONTROLLER
    r = call(broker, delete_topics, 3, {"topic_names": ["x"], "timeout_ms": 1000})
    assert r.responses[0].error_code == ErrorCode.NOT_CONTROLLER


class _Controller:
    is_active = True


class _Admin:
    def __init__(self, broker):
        self.broker = broker
        self.created = {}

    def validate_topic_create(self, name, assignment, configs):
        pass

    def create_topic_with_assignment(self, name, configs, assignment):
        self.created[name] = assignment
        self.topic_id = new_topic_id()
        return self.topic_id

    def delete_topic(self, name):
        self.deleted = [*getattr(self, "deleted", []), name]


def test_create_topics_validation_and_wait(broker):
    broker.ctx.controller = _Controller()
    admin = broker.ctx.admin = _Admin(broker)
    call(broker, update_metadata, 7, um_body(brokers=(1,), topics={"exists": {0: (1, [1], [1])}}))

    def topic(name, n=1, rf=1, assignments=(), configs=()):
        return {"name": name, "num_partitions": n, "replication_factor": rf,
                "assignments": [{"partition_index": p, "broker_ids": b} for p, b in assignments],
                "configs": [{"name": k, "value": v} for k, v in configs]}
    body = {"topics": [topic("exists"), topic("bad/name"), topic("zero", n=0), topic("rf3", rf=3),
                       topic("cfg", configs=[("retention.ms", "abc")]), topic("dup"), topic("dup"),
                       topic("both", assignments=[(0, [1])]),
                       topic("ok", n=2)], "timeout_ms": 5000, "validate_only": False}
    d = call_deferred(broker, create_topics, 4, body)
    box = []
    d.addBoth(box.append)
    assert box == []  # waits for the controller's metadata
    call(broker, update_metadata, 7, um_body(brokers=(1,), topics={"ok": {0: (1, [1], [1]), 1: (1, [1], [1])}}))
    codes = {t.name: t.error_code for t in box[0].topics}
    assert codes == {"exists": ErrorCode.TOPIC_ALREADY_EXISTS, "bad/name": ErrorCode.INVALID_TOPIC_EXCEPTION,
                     "zero": ErrorCode.INVALID_PARTITIONS, "rf3": ErrorCode.INVALID_REPLICATION_FACTOR,
                     "cfg": ErrorCode.INVALID_CONFIG, "dup": ErrorCode.INVALID_REQUEST,
                     "both": ErrorCode.INVALID_REQUEST, "ok": 0}
    assert admin.created == {"ok": {0: [1], 1: [1]}}
    assert [t.name for t in box[0].topics].count("dup") == 1
    # timeout while waiting for leaders
    d = call_deferred(broker, create_topics, 4, {"topics": [topic("slow")], "timeout_ms": 1000})
    box = []
    d.addBoth(box.append)
    broker.clock.advance(1.1)
    assert box[0].topics[0].error_code == ErrorCode.REQUEST_TIMED_OUT


def test_create_topics_v7_answers_size_configs_and_id(broker):
    broker.ctx.controller = _Controller()
    admin = broker.ctx.admin = _Admin(broker)
    call(broker, update_metadata, 7, um_body(brokers=(1,), topics={}))
    body = {"topics": [{"name": "v7", "num_partitions": 2, "replication_factor": 1, "assignments": [],
                        "configs": [{"name": "retention.ms", "value": "1000"}]}],
            "timeout_ms": 5000, "validate_only": False}
    d = call_deferred(broker, create_topics, 7, body)
    box = []
    d.addBoth(box.append)
    call(broker, update_metadata, 7, um_body(brokers=(1,), topics={"v7": {0: (1, [1], [1]), 1: (1, [1], [1])}}))
    [t] = box[0].topics
    assert (t.error_code, t.topic_id, t.num_partitions, t.replication_factor) == (0, admin.topic_id, 2, 1)
    configs = {c.name: c for c in t.configs}
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("1000", 1)   # the topic's
    assert configs["segment.bytes"].config_source == 5 and not configs["segment.bytes"].read_only


def test_delete_topics_v6_by_name_or_id(broker):
    broker.ctx.controller = _Controller()
    admin = broker.ctx.admin = _Admin(broker)
    tid = new_topic_id()
    broker.cache.update(1, 1, [], [PartitionMetadata("t", 0, 1, 1, 0, [1], 0, [1], topic_id=tid)])
    unknown = new_topic_id()
    r = call(broker, delete_topics, 6, {"topics": [{"name": None, "topic_id": tid},
                                                   {"name": None, "topic_id": unknown},
                                                   {"name": "t", "topic_id": tid}], "timeout_ms": 0})
    assert {(x.name, x.topic_id, x.error_code) for x in r.responses} == {
        (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID), ("t", tid, ErrorCode.INVALID_REQUEST), ("t", tid, 0)}
    assert admin.deleted == ["t"]


def test_init_producer_id(broker):
    blocks = iter([(0, 1), (2, 3)])
    broker.ctx.producer_ids = ProducerIdManager(lambda: defer.succeed(next(blocks)))
    ids = [call(broker, init_producer_id, 1, {"transactional_id": None, "transaction_timeout_ms": 1000})
           for _ in range(3)]
    assert [(r.error_code, r.producer_id, r.producer_epoch) for r in ids] == [(0, 0, 0), (0, 1, 0), (0, 2, 0)]
    # v3+ may name a producer id without a transactional id: it still gets a fresh one
    r = call(broker, init_producer_id, 4, {"transactional_id": None, "transaction_timeout_ms": 1000,
                                           "producer_id": 0, "producer_epoch": 0})
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 3, 0)
    r = call(broker, init_producer_id, 4, {"transactional_id": None, "transaction_timeout_ms": 1000,
                                           "producer_id": 5, "producer_epoch": -1})
    assert r.error_code == ErrorCode.INVALID_REQUEST
    # transactional ids go to the transaction coordinator, which this broker has not started
    r = call(broker, init_producer_id, 1, {"transactional_id": "tx", "transaction_timeout_ms": 1000})
    assert r.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
