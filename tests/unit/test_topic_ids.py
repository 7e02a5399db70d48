"""Topic ids (KIP-516, as Kafka 2.8 keeps them in ZooKeeper mode): the znode, the controller giving
one to a topic without, LeaderAndIsr/UpdateMetadata carrying them, partition.metadata, Metadata v10+."""
from __future__ import annotations

import copy
import json
import uuid

import pytest
from broker_fixtures import Broker, call
from test_controller_core import FakeChannels, FakeZk, broker, encode_all, lai_states, run

from odradek.broker.apis import metadata
from odradek.broker.controller.core import ControllerCore
from odradek.broker.controller.request_batch import LEADER_AND_ISR, UPDATE_METADATA
from odradek.broker.log.partition_metadata import FILE_NAME, read_topic_id
from odradek.broker.metadata_cache import PartitionMetadata
from odradek.protocol.errors import ErrorCode
from odradek.protocol.primitives import ZERO_UUID
from odradek.zk.znodes import TopicZNode, new_topic_id, topic_id_from_string, topic_id_string


def test_the_znode_and_kafkas_string_form():
    u = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
    assert topic_id_string(u) == "a6e4EJ2tEdGAtADAT9QwyA" and topic_id_from_string("a6e4EJ2tEdGAtADAT9QwyA") == u
    data = TopicZNode.encode({0: [1, 2]}, u)
    assert json.loads(data) == {"version": 3, "partitions": {"0": [1, 2]}, "adding_replicas": {},
                                "removing_replicas": {}, "topic_id": "a6e4EJ2tEdGAtADAT9QwyA"}
    assert TopicZNode.decode_topic_id(data) == u and TopicZNode.decode_topic_id(TopicZNode.encode({0: [1]})) is None
    assert new_topic_id().int != 0


class IdZk(FakeZk):
    def __init__(self):
        super().__init__()
        self.ids: dict[str, uuid.UUID | None] = {}

    async def get_topic_ids(self, topics):
        return {t: copy.copy(self.ids.get(t)) for t in topics if t in self.topics}

    async def set_topic_id(self, topic, topic_id):
        self._fence()
        self.ids[topic] = self.ids.get(topic) or topic_id
        self.writes.append(("topic_id", topic))
        return self.ids[topic]


def test_the_controller_gives_ids_to_topics_without_and_sends_them():
    zk = IdZk()
    for b in (1, 2):
        zk.brokers[b] = broker(b)
    known = new_topic_id()
    zk.topics.update({"old": {0: [1, 2]}, "new": {0: [2, 1]}})
    zk.ids["new"] = known
    ch = FakeChannels()
    core = ControllerCore(1, zk, ch)
    run(core.on_controller_failover(1, 0))
    assert zk.ids["new"] == known and zk.ids["old"] is not None and ("topic_id", "old") in zk.writes
    assert core.ctx.topic_ids == {"new": known, "old": zk.ids["old"]}
    reqs = ch.take()
    encode_all(reqs)
    lai = next(r for r in reqs if r.api == LEADER_AND_ISR)
    assert {t["topic_name"]: t["topic_id"] for t in lai.body["topic_states"]} == {"new": known, "old": zk.ids["old"]}
    um = [r for r in reqs if r.api == UPDATE_METADATA and r.body["topic_states"]][0]
    assert {t["topic_name"]: t["topic_id"] for t in um.body["topic_states"]}["new"] == known
    assert lai_states(lai)[("new", 0)]["leader"] == 2


@pytest.fixture
def b(tmp_path):
    broker_ = Broker(tmp_path, broker_id=1)
    try:
        yield broker_
    finally:
        broker_.close()


def lead_with_id(b: Broker, topic_id: uuid.UUID, epoch: int) -> ErrorCode:
    st = PartitionMetadata("t", 0, 1, 1, epoch, [1], 0, [1], topic_id=topic_id)
    b.set_metadata({"t": {0: (1, [1], [1])}})
    _, errors = b.rm.become_leader_or_follower(1, [st])
    return errors[("t", 0)]


def test_a_log_keeps_the_id_it_was_created_for(b):
    first = new_topic_id()
    assert lead_with_id(b, first, 0) == ErrorCode.NONE
    [lg] = b.log_manager.all_logs()
    assert read_topic_id(lg.dir) == first
    with open(f"{lg.dir}/{FILE_NAME}") as f:
        assert f.read() == f"version: 0\ntopic_id: {topic_id_string(first)}\n"
    assert lead_with_id(b, new_topic_id(), 1) == ErrorCode.INCONSISTENT_TOPIC_ID   # a re-created topic
    assert lead_with_id(b, first, 2) == ErrorCode.NONE


def test_metadata_v10_and_v11_answer_topic_ids(b):
    tid = new_topic_id()
    b.cache.update(1, 1, [], [PartitionMetadata("t", 0, 1, 1, 0, [1], 0, [1], topic_id=tid),
                              PartitionMetadata("u", 0, 1, 1, 0, [1], 0, [1])])
    for version in (10, 11):
        body = {"topics": [{"name": "t", "topic_id": ZERO_UUID}, {"name": "u", "topic_id": ZERO_UUID}],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        if version == 10:
            body["include_cluster_authorized_operations"] = False
        r = call(b, metadata, version, body)
        assert {t.name: t.topic_id for t in r.topics} == {"t": tid, "u": ZERO_UUID}
    by_id = call(b, metadata, 10, {"topics": [{"name": None, "topic_id": tid}], "allow_auto_topic_creation": False,
                                    "include_cluster_authorized_operations": False,
                                    "include_topic_authorized_operations": False})
    assert [t.error_code for t in by_id.topics] == [ErrorCode.INVALID_REQUEST]
    nameless = call(b, metadata, 11, {"topics": [{"name": None, "topic_id": ZERO_UUID}],
                                      "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    assert [(t.name, t.error_code) for t in nameless.topics] == [("", ErrorCode.INVALID_REQUEST)]   # found by the fuzzer
