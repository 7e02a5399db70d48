"""CreatePartitions: the planning checks (Kafka's ZkAdminManager) and the handler, sans-IO."""
from __future__ import annotations

import pytest
from broker_fixtures import Broker, call, call_deferred

from odradek.broker.apis import HANDLERS, advertised_api_versions
from odradek.broker.apis import create_partitions as handler
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.admin import plan_new_partitions

EXISTING = {0: [1, 2], 1: [2, 3]}


def code_of(fn, *args) -> ErrorCode:
    with pytest.raises(KafkaError) as ei:
        fn(*args)
    return ei.value.code


# ---------------------------------------------------------------- planning


def test_plan_automatic_placement_keeps_rf_and_numbers_new_partitions():
    new = plan_new_partitions("t", EXISTING, 5, None, [1, 2, 3])
    assert sorted(new) == [2, 3, 4]
    assert all(len(r) == 2 and len(set(r)) == 2 and set(r) <= {1, 2, 3} for r in new.values())


def test_plan_manual_assignment():
    assert plan_new_partitions("t", EXISTING, 4, [[3, 1], [1, 2]], [1, 2, 3]) == {2: [3, 1], 3: [1, 2]}


@pytest.mark.parametrize("count,assignments,code", [
    (2, None, ErrorCode.INVALID_PARTITIONS),                        # no increase
    (1, None, ErrorCode.INVALID_PARTITIONS),                        # a decrease
    (3, [[1, 9]], ErrorCode.INVALID_REPLICA_ASSIGNMENT),            # unknown broker
    (4, [[1, 2]], ErrorCode.INVALID_REPLICA_ASSIGNMENT),            # 2 new partitions, 1 assignment
    (3, [[1, 1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT),            # duplicate broker
    (3, [[1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT),               # replication factor differs
    (3, [[]], ErrorCode.INVALID_REPLICA_ASSIGNMENT),                # empty
    (8, None, None),
])
def test_plan_validation(count, assignments, code):
    if code is None:
        assert len(plan_new_partitions("t", EXISTING, count, assignments, [1, 2, 3])) == count - 2
    else:
        assert code_of(plan_new_partitions, "t", EXISTING, count, assignments, [1, 2, 3]) is code


def test_plan_unknown_topic_and_too_few_brokers():
    assert code_of(plan_new_partitions, "t", {}, 3, None, [1]) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert code_of(plan_new_partitions, "t", {0: [1, 2, 3]}, 3, None, [1, 2]) is ErrorCode.INVALID_REPLICATION_FACTOR


# ---------------------------------------------------------------- handler


class FakeController:
    def __init__(self, active=True, deleting=()):
        self.is_active = active
        self.deleting = set(deleting)

    def is_topic_queued_for_deletion(self, topic):
        return topic in self.deleting


class FakeAdmin:
    def __init__(self, topics):
        self.topics = {t: dict(a) for t, a in topics.items()}
        self.calls = []

    def create_partitions(self, topic, count, assignments=None, validate_only=False):
        self.calls.append((topic, count, assignments, validate_only))
        new = plan_new_partitions(topic, self.topics.get(topic, {}), count, assignments, [1, 2, 3])
        if not validate_only:
            self.topics[topic].update(new)
        return new


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    b.ctx.controller = FakeController(deleting={"gone"})
    b.ctx.admin = FakeAdmin({"t": EXISTING, "gone": {0: [1]}})
    yield b
    b.close()


def body(*topics, timeout_ms=0, validate_only=False):
    return {"topics": [{"name": n, "count": c, "assignments": a} for n, c, a in topics],
            "timeout_ms": timeout_ms, "validate_only": validate_only}


def results(resp):
    return {r.name: (ErrorCode(r.error_code), r.error_message) for r in resp.results}


def test_registered_and_advertised_v0_3():
    assert HANDLERS[37] is handler
    assert {"api_key": 37, "min_version": 0, "max_version": 3} in advertised_api_versions()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_errors_per_topic(broker, version):
    resp = call(broker, handler, version, body(
        ("t", 2, None), ("nope", 3, None), ("gone", 2, None), ("dup", 3, None), ("dup", 4, None),
        ("t2", 1, None)))
    r = results(resp)
    assert [x.name for x in resp.results] == ["t", "nope", "gone", "dup", "t2"]
    assert r["t"][0] is ErrorCode.INVALID_PARTITIONS and "already has 2 partitions" in r["t"][1]
    assert r["nope"][0] is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert r["gone"][0] is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert r["dup"][0] is ErrorCode.INVALID_REQUEST
    assert r["t2"][0] is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.ctx.admin.topics["t"] == EXISTING


def test_bad_manual_assignment(broker):
    resp = call(broker, handler, 1, body(("t", 3, [{"broker_ids": [1, 7]}])))
    assert results(resp)["t"][0] is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    resp = call(broker, handler, 1, body(("t", 4, [{"broker_ids": [1, 2]}])))
    assert results(resp)["t"][0] is ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_not_controller(broker):
    broker.ctx.controller.is_active = False
    resp = call(broker, handler, 1, body(("t", 3, None)))
    assert results(resp)["t"][0] is ErrorCode.NOT_CONTROLLER
    assert broker.ctx.admin.calls == []


def test_validate_only_writes_nothing_and_answers_at_once(broker):
    resp = call(broker, handler, 1, body(("t", 4, [{"broker_ids": [3, 1]}, {"broker_ids": [1, 2]}]),
                                         timeout_ms=5000, validate_only=True))
    assert results(resp)["t"] == (ErrorCode.NONE, None)
    assert broker.ctx.admin.topics["t"] == EXISTING


def test_waits_for_the_new_partitions_in_the_metadata_cache(broker):
    broker.set_metadata({"t": {0: (1, [1, 2], [1, 2]), 1: (2, [2, 3], [2, 3])}}, brokers=(1, 2, 3))
    d = call_deferred(broker, handler, 1, body(("t", 3, [{"broker_ids": [3, 1]}]), timeout_ms=5000))
    assert not d.called
    assert broker.ctx.admin.topics["t"][2] == [3, 1]
    broker.set_metadata({"t": {0: (1, [1, 2], [1, 2]), 1: (2, [2, 3], [2, 3]), 2: (-1, [3, 1], [3, 1])}},
                        brokers=(1, 2, 3))
    assert not d.called                       # known but leaderless: keep waiting
    broker.set_metadata({"t": {0: (1, [1, 2], [1, 2]), 1: (2, [2, 3], [2, 3]), 2: (3, [3, 1], [3, 1])}},
                        brokers=(1, 2, 3))
    box = []
    d.addCallback(box.append)
    assert results(box[0])["t"] == (ErrorCode.NONE, None)


def test_times_out_when_the_partitions_never_get_leaders(broker):
    d = call_deferred(broker, handler, 0, body(("t", 3, None), timeout_ms=2000))
    assert not d.called
    broker.clock.advance(2.1)
    box = []
    d.addCallback(box.append)
    assert results(box[0])["t"][0] is ErrorCode.REQUEST_TIMED_OUT
