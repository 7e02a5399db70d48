"""Group API handlers over a real LogManager, ReplicaManager and GroupCoordinatorService
on a ``task.Clock``: version translation, error codes, FindCoordinator auto-create,
and loading ``__consumer_offsets`` from a real log."""
from __future__ import annotations

import pytest
from twisted.internet import defer

from odradek.broker.apis import (delete_groups, describe_groups, find_coordinator, heartbeat, join_group,
                                 leave_group, list_groups, offset_commit, offset_delete, offset_fetch, sync_group)
from odradek.broker.apis.group_common import client_host
from odradek.broker.apis.context import RequestContext
from odradek.broker.group.offsets import GROUP_METADATA_TOPIC, partition_for
from odradek.broker.group.service import GroupCoordinatorService
from odradek.protocol.errors import ErrorCode as E

from broker_fixtures import Broker, call, call_deferred

OFFSET_PARTITIONS = 4


def groups_on(partition: int, n: int = 1, prefix: str = "g") -> list[str]:
    """``n`` group ids whose coordinator partition is ``partition``."""
    out, i = [], 0
    while len(out) < n:
        name = f"{prefix}{i}"
        if partition_for(name, OFFSET_PARTITIONS) == partition:
            out.append(name)
        i += 1
    return out


class GroupBroker(Broker):
    def __init__(self, tmp_path, **overrides):
        overrides = {"offsets.topic.num.partitions": OFFSET_PARTITIONS,
                     "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 10,
                     **overrides}
        super().__init__(tmp_path, **overrides)
        self.service = GroupCoordinatorService(self.config, self.rm, self.clock)
        self.ctx.group_coordinator = self.service.coordinator
        self.service.startup()

    def lead_offsets(self, leader_epoch: int = 0) -> None:
        self.lead(GROUP_METADATA_TOPIC, OFFSET_PARTITIONS, leader_epoch=leader_epoch)
        self.lead("t", 2)
        self.service.on_leadership_change(
            [p for p in self.rm.partitions.values() if p.topic == GROUP_METADATA_TOPIC], [])
        self.settle()

    def settle(self) -> None:
        for _ in range(50):
            self.clock.advance(0)

    def close(self) -> None:
        self.service.shutdown()
        super().close()


@pytest.fixture
def broker(tmp_path):
    b = GroupBroker(tmp_path)
    b.lead_offsets()
    yield b
    b.close()


PROTOCOLS = [{"name": "range", "metadata": b"meta"}]


def join_body(group="g0", member_id="", session=30000, rebalance=60000, instance=None):
    return {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
            "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": PROTOCOLS}


def joined(broker, version: int, group="g0", **kw):
    """Join at ``version`` (doing the MEMBER_ID_REQUIRED round for v4+); the response."""
    d = call_deferred(broker, join_group, version, join_body(group, **kw))
    broker.settle()
    resp = _result(d)
    if resp.error_code == E.MEMBER_ID_REQUIRED:
        assert version >= 4 and resp.member_id
        d = call_deferred(broker, join_group, version, join_body(group, member_id=resp.member_id, **kw))
        broker.settle()
        resp = _result(d)
    return resp


def _result(d: defer.Deferred):
    box: list = []
    d.addBoth(box.append)
    assert box, "the handler did not answer"
    if hasattr(box[0], "raiseException"):
        box[0].raiseException()
    return box[0]


def stable_member(broker, group="g0", join_version=5, sync_version=3):
    j = joined(broker, join_version, group)
    assert j.error_code == 0 and j.leader == j.member_id and j.generation_id == 1
    s = call(broker, sync_group, sync_version, {"group_id": group, "generation_id": 1, "member_id": j.member_id,
                                                "assignments": [{"member_id": j.member_id,
                                                                 "assignment": b"assigned"}]})
    assert s.error_code == 0 and s.assignment == b"assigned"
    return j.member_id


def commit_body(group, member, generation, offsets: dict, retention=-1, instance=None):
    topics: dict = {}
    for (topic, p), off in offsets.items():
        topics.setdefault(topic, []).append({"partition_index": p, "committed_offset": off,
                                             "committed_leader_epoch": 3, "commit_timestamp": -1,
                                             "committed_metadata": f"m{off}"})
    return {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance,
            "retention_time_ms": retention,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def errors_of(resp) -> dict:
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


# ------------------------------------------------------------------ registry

def test_group_apis_are_advertised():
    from odradek.broker.apis import advertised_api_versions
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in advertised_api_versions()}
    assert ranges[10] == (0, 3) and ranges[11] == (0, 7) and ranges[12] == (0, 4)
    assert ranges[13] == (0, 4) and ranges[14] == (0, 5) and ranges[8] == (0, 8)
    assert ranges[9] == (0, 7) and ranges[15] == (0, 5) and ranges[16] == (0, 4) and ranges[42] == (0, 2)


def test_client_host_is_formatted_like_kafka():
    rc = RequestContext(11, 5, 1, "c", "PLAINTEXT", "127.0.0.1:54321")
    assert client_host(rc) == "/127.0.0.1"
    assert client_host(RequestContext(11, 5, 1, "c", "PLAINTEXT", "::1:5000")) == "/::1"


# ------------------------------------------------------------------ FindCoordinator

class FakeAdmin:
    def __init__(self):
        self.calls = []

    def create_topic(self, *args):
        self.calls.append(args)
        return {}


def test_find_coordinator_creates_the_offsets_topic(tmp_path):
    b = Broker(tmp_path, offsets_topic_replication_factor=1)
    try:
        b.ctx.admin = FakeAdmin()
        b.set_metadata({"t": {0: (1, [1], [1])}})
        resp = call(b, find_coordinator, 1, {"key": "g", "key_type": 0})
        assert resp.error_code == E.COORDINATOR_NOT_AVAILABLE and resp.node_id == -1
        assert resp.error_message == "The coordinator is not available."
        [(name, partitions, rf, configs)] = b.ctx.admin.calls
        assert (name, partitions, rf) == ("__consumer_offsets", 50, 1)
        assert configs == {"cleanup.policy": "compact", "segment.bytes": "104857600",
                           "compression.type": "producer"}
        assert not b.ctx.pending_auto_creates   # the (inline) creation finished
    finally:
        b.close()


def test_find_coordinator_does_not_cap_the_replication_factor(tmp_path):
    b = Broker(tmp_path)   # offsets.topic.replication.factor=3, one live broker
    try:
        b.ctx.admin = FakeAdmin()
        b.set_metadata({"t": {0: (1, [1], [1])}})
        for version in (0, 1, 2):
            assert call(b, find_coordinator, version, {"key": "g"}).error_code == E.COORDINATOR_NOT_AVAILABLE
        assert b.ctx.admin.calls == []
    finally:
        b.close()


def test_find_coordinator_answers_the_leader_of_the_group_partition(tmp_path):
    b = Broker(tmp_path, offsets_topic_num_partitions=4)
    try:
        p = partition_for("g", 4)
        parts = {i: (2, [2, 1], [2, 1]) for i in range(4)}
        parts[p] = (1, [1, 2], [1, 2])
        b.set_metadata({GROUP_METADATA_TOPIC: parts}, brokers=(1, 2))
        resp = call(b, find_coordinator, 2, {"key": "g", "key_type": 0})
        assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 1, "127.0.0.1", 9091)
        assert resp.error_message == "NONE"
        v0 = call(b, find_coordinator, 0, {"key": "g"})
        assert (v0.error_code, v0.node_id, v0.port) == (0, 1, 9091)
        other = next(g for g in (f"x{i}" for i in range(100)) if partition_for(g, 4) != p)
        assert call(b, find_coordinator, 1, {"key": other}).node_id == 2
        # the leader dies: no live leader -> 15
        b.set_metadata({GROUP_METADATA_TOPIC: parts}, brokers=(2,))
        assert call(b, find_coordinator, 1, {"key": "g"}).error_code == E.COORDINATOR_NOT_AVAILABLE
        parts[p] = (-1, [1, 2], [1])
        b.set_metadata({GROUP_METADATA_TOPIC: parts}, brokers=(1, 2))
        assert call(b, find_coordinator, 1, {"key": "g"}).error_code == E.COORDINATOR_NOT_AVAILABLE
        # no __transaction_state yet (and no admin to create it); unknown key types are invalid
        assert call(b, find_coordinator, 1, {"key": "tx", "key_type": 1}).error_code == \
            E.COORDINATOR_NOT_AVAILABLE
        assert call(b, find_coordinator, 1, {"key": "tx", "key_type": 5}).error_code == E.INVALID_REQUEST
    finally:
        b.close()


def test_find_coordinator_uses_the_connection_listener(tmp_path):
    b = Broker(tmp_path, offsets_topic_num_partitions=1)
    try:
        from odradek.broker.metadata_cache import BrokerMetadata, PartitionMetadata
        b.cache.update(1, 1, [BrokerMetadata(1, {"PLAINTEXT": ("127.0.0.1", 9091),
                                                 "INTERNAL": ("10.0.0.1", 9191)})],
                       [PartitionMetadata(GROUP_METADATA_TOPIC, 0, 1, 1, 0, [1], 0, [1])])
        resp = call(b, find_coordinator, 1, {"key": "g"}, listener="INTERNAL")
        assert (resp.host, resp.port) == ("10.0.0.1", 9191)
    finally:
        b.close()


# ------------------------------------------------------------------ JoinGroup / SyncGroup

@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5, 6, 7])
def test_join_group_versions(broker, version):
    resp = call_deferred(broker, join_group, version, join_body("g0"))
    broker.settle()
    first = _result(resp)
    if version >= 4:   # dynamic members must learn their id first
        assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id.startswith("test-")
        resp = call_deferred(broker, join_group, version, join_body("g0", member_id=first.member_id))
        broker.settle()
        first = _result(resp)
    assert first.error_code == 0 and first.generation_id == 1 and first.protocol_name == "range"
    assert first.leader == first.member_id and [m.member_id for m in first.members] == [first.member_id]
    assert first.members[0].metadata == b"meta"
    group = broker.service.coordinator.manager.get_group("g0")
    member = group.get(first.member_id)
    assert member.client_host == "/127.0.0.1" and member.client_id == "test"
    # v0 has no rebalance timeout: the session timeout stands in
    assert member.rebalance_timeout_ms == (30000 if version == 0 else 60000)


def test_join_v7_and_sync_v5_name_the_protocol(broker):
    j = joined(broker, 7, "g0")
    assert (j.error_code, j.protocol_type, j.protocol_name) == (0, "consumer", "range")
    body = {"group_id": "g0", "generation_id": 1, "member_id": j.member_id,
            "assignments": [{"member_id": j.member_id, "assignment": b"a"}]}
    wrong = call(broker, sync_group, 5, dict(body, protocol_type="connect", protocol_name="range"))
    assert (wrong.error_code, wrong.protocol_type, wrong.protocol_name) == (E.INCONSISTENT_GROUP_PROTOCOL, None, None)
    ok = call(broker, sync_group, 5, dict(body, protocol_type="consumer", protocol_name="range"))
    assert (ok.error_code, ok.assignment, ok.protocol_type, ok.protocol_name) == (0, b"a", "consumer", "range")
    refused = _result(call_deferred(broker, join_group, 7, join_body("", session=30000)))
    assert refused.error_code == E.INVALID_GROUP_ID and refused.protocol_name is None   # v7 says null


def test_static_member_join_v5_needs_no_member_id_round(broker):
    d = call_deferred(broker, join_group, 5, join_body("g0", instance="inst-1"))
    broker.settle()
    resp = _result(d)
    assert resp.error_code == 0 and resp.member_id.startswith("inst-1-")


def test_join_group_errors(broker):
    assert _result(call_deferred(broker, join_group, 1, join_body("", session=30000))).error_code == \
        E.INVALID_GROUP_ID
    assert _result(call_deferred(broker, join_group, 1, join_body("g0", session=5))).error_code == \
        E.INVALID_SESSION_TIMEOUT
    assert _result(call_deferred(broker, join_group, 1, join_body("g0", member_id="nobody"))).error_code == \
        E.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_sync_and_heartbeat_versions(broker, version):
    member = stable_member(broker, join_version=5, sync_version=version)
    hb = call(broker, heartbeat, version, {"group_id": "g0", "generation_id": 1, "member_id": member})
    assert hb.error_code == 0
    assert call(broker, heartbeat, version, {"group_id": "g0", "generation_id": 7,
                                             "member_id": member}).error_code == E.ILLEGAL_GENERATION
    assert call(broker, heartbeat, version, {"group_id": "g0", "generation_id": 1,
                                             "member_id": "x"}).error_code == E.UNKNOWN_MEMBER_ID
    bad = call(broker, sync_group, version, {"group_id": "g0", "generation_id": 9, "member_id": member,
                                             "assignments": []})
    assert bad.error_code == E.ILLEGAL_GENERATION and bad.assignment == b""


def test_second_member_rebalances_and_followers_wait_for_the_leader(broker):
    leader = stable_member(broker)
    d2 = call_deferred(broker, join_group, 3, join_body("g0"))
    broker.settle()
    assert not d2.called   # waits for the leader to rejoin
    assert call(broker, heartbeat, 3, {"group_id": "g0", "generation_id": 1,
                                       "member_id": leader}).error_code == E.REBALANCE_IN_PROGRESS
    d1 = call_deferred(broker, join_group, 3, join_body("g0", member_id=leader))
    broker.settle()
    j1, j2 = _result(d1), _result(d2)
    assert j1.generation_id == j2.generation_id == 2 and j1.leader == leader
    assert len(j1.members) == 2 and j2.members == []
    follower_sync = call_deferred(broker, sync_group, 1, {"group_id": "g0", "generation_id": 2,
                                                          "member_id": j2.member_id, "assignments": []})
    assert not follower_sync.called
    lead_sync = call(broker, sync_group, 1, {"group_id": "g0", "generation_id": 2, "member_id": leader,
                                             "assignments": [{"member_id": leader, "assignment": b"a1"},
                                                             {"member_id": j2.member_id, "assignment": b"a2"}]})
    assert lead_sync.assignment == b"a1"
    assert _result(follower_sync).assignment == b"a2"


# ------------------------------------------------------------------ LeaveGroup

@pytest.mark.parametrize("version", [0, 1, 2])
def test_leave_group_single_member(broker, version):
    member = stable_member(broker)
    assert call(broker, leave_group, version, {"group_id": "g0", "member_id": "nobody"}).error_code == \
        E.UNKNOWN_MEMBER_ID
    assert call(broker, leave_group, version, {"group_id": "g0", "member_id": member}).error_code == 0
    assert broker.service.coordinator.manager.get_group("g0").state.value == "Empty"


def test_leave_group_v3_batched(broker):
    member = stable_member(broker)
    resp = call(broker, leave_group, 3, {"group_id": "g0", "members": [
        {"member_id": member, "group_instance_id": None}, {"member_id": "ghost", "group_instance_id": None}]})
    assert resp.error_code == 0
    assert [(m.member_id, m.error_code) for m in resp.members] == [(member, 0), ("ghost", E.UNKNOWN_MEMBER_ID)]
    assert call(broker, leave_group, 3, {"group_id": "", "members": []}).error_code == E.INVALID_GROUP_ID


# ------------------------------------------------------------------ offsets

@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5, 6, 7])
def test_offset_commit_and_fetch_versions(broker, version):
    if version == 0:   # v0: a "simple" commit (no generation, no member)
        member, generation = "", -1
    else:
        member, generation = stable_member(broker), 1
    body = commit_body("g0", member, generation, {("t", 0): 42, ("t", 1): 7, ("nope", 0): 1}, retention=-1)
    resp = call(broker, offset_commit, version, body)
    assert errors_of(resp) == {("t", 0): 0, ("t", 1): 0, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    fetch_version = min(version, 5)
    got = call(broker, offset_fetch, fetch_version, {"group_id": "g0", "topics": [
        {"name": "t", "partition_indexes": [0, 1, 2]}]})
    parts = {p.partition_index: p for t in got.topics for p in t.partitions}
    assert parts[0].committed_offset == 42 and parts[0].metadata == "m42" and parts[0].error_code == 0
    assert parts[1].committed_offset == 7
    assert parts[2].committed_offset == -1 and parts[2].error_code == 0
    if fetch_version >= 5:
        assert parts[0].committed_leader_epoch == (3 if version >= 6 else -1)


def test_offset_commit_errors(broker):
    member = stable_member(broker)
    assert set(errors_of(call(broker, offset_commit, 7, commit_body("g0", member, 5, {("t", 0): 1}))).values()) \
        == {E.ILLEGAL_GENERATION}
    assert set(errors_of(call(broker, offset_commit, 7, commit_body("g0", "x", 1, {("t", 0): 1}))).values()) \
        == {E.UNKNOWN_MEMBER_ID}


def test_offset_fetch_all_partitions_v2(broker):
    call(broker, offset_commit, 2, commit_body("g0", "", -1, {("t", 1): 5, ("t", 0): 4}))
    resp = call(broker, offset_fetch, 3, {"group_id": "g0", "topics": None})
    assert resp.error_code == 0
    assert [(t.name, p.partition_index, p.committed_offset) for t in resp.topics for p in t.partitions] == [
        ("t", 0, 4), ("t", 1, 5)]


def test_not_coordinator_and_version_specific_group_errors(broker):
    p = broker.service.coordinator.partition_for("g0")
    [other] = groups_on(p, 1, prefix="h")
    broker.service.resign(p, None)
    for version in (0, 1):   # no top-level error field: copied into each partition
        resp = call(broker, offset_fetch, version, {"group_id": other, "topics": [
            {"name": "t", "partition_indexes": [0, 1]}]})
        assert [q.error_code for t in resp.topics for q in t.partitions] == [E.NOT_COORDINATOR] * 2
        assert [q.committed_offset for t in resp.topics for q in t.partitions] == [-1, -1]
    for version in (2, 5):
        resp = call(broker, offset_fetch, version, {"group_id": other, "topics": [
            {"name": "t", "partition_indexes": [0]}]})
        assert resp.error_code == E.NOT_COORDINATOR and resp.topics == []
    assert _result(call_deferred(broker, join_group, 5, join_body(other))).error_code == E.NOT_COORDINATOR
    assert call(broker, heartbeat, 3, {"group_id": other, "generation_id": 1, "member_id": "m"}).error_code == \
        E.NOT_COORDINATOR
    assert call(broker, sync_group, 3, {"group_id": other, "generation_id": 1, "member_id": "m",
                                        "assignments": []}).error_code == E.NOT_COORDINATOR
    assert call(broker, leave_group, 1, {"group_id": other, "member_id": "m"}).error_code == E.NOT_COORDINATOR
    assert set(errors_of(call(broker, offset_commit, 2, commit_body(other, "", -1, {("t", 0): 1}))).values()) \
        == {E.NOT_COORDINATOR}
    [d] = call(broker, describe_groups, 4, {"groups": [other]}).groups
    assert d.error_code == E.NOT_COORDINATOR
    [r] = call(broker, delete_groups, 1, {"groups_names": [other]}).results
    assert r.error_code == E.NOT_COORDINATOR


def test_no_coordinator_means_coordinator_not_available(tmp_path):
    b = Broker(tmp_path)
    try:
        b.lead("t")
        assert call(b, heartbeat, 1, {"group_id": "g", "generation_id": 1, "member_id": "m"}).error_code == \
            E.COORDINATOR_NOT_AVAILABLE
        assert call(b, list_groups, 2, {}).error_code == E.COORDINATOR_NOT_AVAILABLE
        assert _result(call_deferred(b, join_group, 0, join_body("g"))).error_code == E.COORDINATOR_NOT_AVAILABLE
    finally:
        b.close()


# ------------------------------------------------------------------ admin

def test_list_describe_delete(broker):
    member = stable_member(broker, "g0")
    call(broker, offset_commit, 2, commit_body("g1", "", -1, {("t", 0): 9}))
    groups = call(broker, list_groups, 2, {}).groups
    assert {(g.group_id, g.protocol_type) for g in groups} == {("g0", "consumer"), ("g1", "")}
    resp = call(broker, describe_groups, 4, {"groups": ["g0", "unknown"], "include_authorized_operations": True})
    g0, unknown = resp.groups
    assert (g0.error_code, g0.group_state, g0.protocol_type, g0.protocol_data) == (0, "Stable", "consumer", "range")
    [m] = g0.members
    assert (m.member_id, m.client_id, m.client_host, m.member_assignment, m.member_metadata) == (
        member, "test", "/127.0.0.1", b"assigned", b"meta")
    assert g0.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    assert (unknown.error_code, unknown.group_state) == (0, "Dead")
    assert call(broker, describe_groups, 2, {"groups": ["g0"]}).groups[0].group_state == "Stable"
    listed = {g.group_id: g.group_state for g in call(broker, list_groups, 4, {"states_filter": []}).groups}
    assert listed == {"g0": "Stable", "g1": "Empty"}
    for states, expected in ((["Stable"], {"g0"}), (["Empty", "Dead"], {"g1"}), (["stable"], set())):
        assert {g.group_id for g in call(broker, list_groups, 4, {"states_filter": states}).groups} == expected
    results = call(broker, delete_groups, 1, {"groups_names": ["g0", "g1", "zz"]}).results
    assert [(r.group_id, r.error_code) for r in results] == [
        ("g0", E.NON_EMPTY_GROUP), ("g1", 0), ("zz", E.GROUP_ID_NOT_FOUND)]
    broker.settle()
    assert {g.group_id for g in call(broker, list_groups, 0, {}).groups} == {"g0"}


# ------------------------------------------------------------------ loading

def test_offsets_and_groups_are_loaded_from_the_log(broker):
    member = stable_member(broker, "g0")
    assert set(errors_of(call(broker, offset_commit, 7, commit_body("g0", member, 1, {("t", 0): 11}))).values()) \
        == {0}
    for i in range(30):   # many commits: the last one wins on replay
        call(broker, offset_commit, 2, commit_body("g1", "", -1, {("t", 1): i}))
    p = broker.service.coordinator.partition_for("g0")
    tp = (GROUP_METADATA_TOPIC, p)
    assert broker.rm.get_partition(tp).log.log_end_offset > 0
    # leadership moves away and back (a new leader epoch): everything is re-read from the log
    broker.service.on_leadership_change([], [broker.rm.get_partition(tp)])
    assert call(broker, offset_fetch, 5, {"group_id": "g0", "topics": None}).error_code == E.NOT_COORDINATOR
    broker.service.load_chunk_bytes = 200   # many small reads, one reactor turn each
    broker.service.elect(p, 5)
    fetch = {"group_id": "g0", "topics": [{"name": "t", "partition_indexes": [0]}]}
    assert call(broker, offset_fetch, 5, fetch).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert call(broker, heartbeat, 3, {"group_id": "g0", "generation_id": 1, "member_id": member}).error_code == 0
    assert call(broker, list_groups, 2, {}).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    broker.settle()
    assert broker.service.loads[p].called
    resp = call(broker, offset_fetch, 5, fetch)
    assert [(q.committed_offset, q.metadata) for t in resp.topics for q in t.partitions] == [(11, "m11")]
    if broker.service.coordinator.partition_for("g1") == p:
        got = call(broker, offset_fetch, 5, {"group_id": "g1", "topics": None})
        assert [q.committed_offset for t in got.topics for q in t.partitions] == [29]
    group = broker.service.coordinator.manager.get_group("g0")
    assert group.state.value == "Stable" and group.generation_id == 1 and group.has(member)
    assert call(broker, heartbeat, 3, {"group_id": "g0", "generation_id": 1, "member_id": member}).error_code == 0


def test_new_service_loads_what_an_old_one_wrote(tmp_path):
    b = GroupBroker(tmp_path)
    try:
        b.lead_offsets()
        call(b, offset_commit, 2, commit_body("g0", "", -1, {("t", 0): 3, ("t", 1): 4}))
        # a restarted coordinator (same logs): loads on election
        b.service.shutdown()
        b.service = GroupCoordinatorService(b.config, b.rm, b.clock)
        b.ctx.group_coordinator = b.service.coordinator
        b.service.startup()   # elects the offsets partitions this broker already leads
        b.settle()
        resp = call(b, offset_fetch, 5, {"group_id": "g0", "topics": None})
        assert [(q.partition_index, q.committed_offset) for t in resp.topics for q in t.partitions] == [
            (0, 3), (1, 4)]
    finally:
        b.close()


def test_resign_during_load_abandons_it(broker):
    call(broker, offset_commit, 2, commit_body("g0", "", -1, {("t", 0): 3}))
    p = broker.service.coordinator.partition_for("g0")
    part = broker.rm.get_partition((GROUP_METADATA_TOPIC, p))
    broker.service.on_leadership_change([], [part])
    broker.service.elect(p, 7)
    broker.service.resign(p, 8)   # before the load's first reactor turn ended
    broker.settle()
    assert p not in broker.service.coordinator.manager.owned_partitions
    assert p not in broker.service.coordinator.manager.loading_partitions
    assert call(broker, offset_fetch, 5, {"group_id": "g0", "topics": None}).error_code == E.NOT_COORDINATOR


def test_commit_waits_for_the_follower_high_watermark(tmp_path):
    """acks=-1: with a second replica in the ISR, the commit answers once the HW covers it."""
    b = GroupBroker(tmp_path)
    try:
        b.lead(GROUP_METADATA_TOPIC, OFFSET_PARTITIONS, replicas=[1, 2])
        b.lead("t", 2, replicas=[1, 2])
        b.service.on_leadership_change(
            [p for p in b.rm.partitions.values() if p.topic == GROUP_METADATA_TOPIC], [])
        b.settle()
        d = call_deferred(b, offset_commit, 2, commit_body("g0", "", -1, {("t", 0): 3}))
        assert not d.called
        b.clock.advance(6)   # offsets.commit.timeout.ms = 5000 passed without the follower
        assert errors_of(_result(d)) == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
        assert call(b, offset_fetch, 5, {"group_id": "g0", "topics": None}).topics == []
        # the follower catches up: the HW moves and the commit answers NONE
        p = b.service.coordinator.partition_for("g0")
        part = b.rm.get_partition((GROUP_METADATA_TOPIC, p))
        d = call_deferred(b, offset_commit, 2, commit_body("g0", "", -1, {("t", 0): 4}))
        assert not d.called
        part.update_follower_fetch_state(2, part.log_end_offset, b.rm.now_ms())
        b.rm._wake(part.tp)
        assert errors_of(_result(d)) == {("t", 0): 0}
    finally:
        b.close()


# ------------------------------------------------------------------ broker wiring

def test_replica_manager_hooks_drive_the_coordinator(tmp_path):
    b = GroupBroker(tmp_path)
    try:
        b.rm.on_leadership_change = b.service.on_leadership_change
        b.rm.on_stop_replicas = b.service.on_stop_replicas
        b.lead(GROUP_METADATA_TOPIC, OFFSET_PARTITIONS)   # LeaderAndIsr: leader of every partition
        b.lead("t", 2)
        b.settle()
        manager = b.service.coordinator.manager
        assert manager.owned_partitions == set(range(OFFSET_PARTITIONS))
        call(b, offset_commit, 2, commit_body("g0", "", -1, {("t", 0): 5}))
        p = b.service.coordinator.partition_for("g0")
        # becoming follower (a newer leader epoch, another leader) resigns the partition
        from odradek.broker.metadata_cache import PartitionMetadata
        b.rm.become_leader_or_follower(1, [PartitionMetadata(GROUP_METADATA_TOPIC, p, 1, 2, 1, [2, 1], 0, [1, 2])])
        assert p not in manager.owned_partitions
        assert call(b, offset_fetch, 5, {"group_id": "g0", "topics": None}).error_code == E.NOT_COORDINATOR
        # leader again: re-loaded from the log, the commit is back
        b.rm.become_leader_or_follower(1, [PartitionMetadata(GROUP_METADATA_TOPIC, p, 1, 1, 2, [1], 0, [1, 2])])
        b.settle()
        resp = call(b, offset_fetch, 5, {"group_id": "g0", "topics": None})
        assert [q.committed_offset for t in resp.topics for q in t.partitions] == [5]
        # StopReplica resigns too
        b.rm.stop_replicas(1, [((GROUP_METADATA_TOPIC, p), False, -1)])
        assert p not in manager.owned_partitions
    finally:
        b.close()


def test_follower_truncation_updates_the_cleaner_checkpoint(tmp_path):
    b = Broker(tmp_path)
    try:
        calls = []

        class Cleaner:
            def maybe_truncate_checkpoint(self, tp, offset):
                calls.append((tp, offset))
        b.rm.cleaner = Cleaner()
        b.lead("t")
        from broker_fixtures import batch, produce_body
        from odradek.broker.apis import produce
        for _ in range(3):
            call(b, produce, 8, produce_body("t", batch(2)))
        b.rm.get_partition(("t", 0)).truncate_to(2)
        assert calls == [(("t", 0), 2)]
    finally:
        b.close()


def test_produce_refuses_null_keys_on_compacted_topics_and_internal_topics(tmp_path):
    from odradek.broker.apis import produce
    from odradek.protocol.records import BatchBuilder
    from broker_fixtures import batch, produce_body
    b = Broker(tmp_path)
    try:
        from odradek.broker.config.kafka_config import LogConfig
        b.rm.log_configs["compacted"] = LogConfig.from_broker(b.config, {"cleanup.policy": "compact"})
        b.lead("compacted")
        b.lead("plain")
        no_key = BatchBuilder()
        no_key.append(1, b"k", b"v")
        no_key.append(2, None, b"v")
        no_key = no_key.build()
        code = lambda topic, recs: call(b, produce, 8, produce_body(topic, recs)).responses[0] \
            .partition_responses[0].error_code  # noqa: E731
        assert code("compacted", no_key) == E.INVALID_RECORD
        assert code("compacted", batch(2)) == 0
        assert code("plain", no_key) == 0
        assert code(GROUP_METADATA_TOPIC, batch(1)) == E.INVALID_TOPIC_EXCEPTION
    finally:
        b.close()


def test_log_cleaner_service_runs_one_pass_at_a_time(tmp_path):
    from twisted.internet import task
    from odradek.broker.log.cleaner_service import LogCleanerService
    b = Broker(tmp_path, log_cleaner_backoff_ms=1000)
    try:
        pending: list[defer.Deferred] = []

        def in_thread(fn):
            d = defer.Deferred()
            pending.append(d)
            d.addCallback(lambda _: fn())
            return d
        svc = LogCleanerService(b.config, b.log_manager, b.clock, in_thread=in_thread)
        svc.start()
        b.clock.advance(1)
        b.clock.advance(1)   # the first pass is still running: no second one
        assert len(pending) == 1
        pending[0].callback(None)
        assert svc.passes == 1
        b.clock.advance(1)
        assert len(pending) == 2
        stopped = svc.stop()
        assert not stopped.called
        pending[1].callback(None)
        assert stopped.called
    finally:
        b.close()


def test_offset_delete_as_kafka_2_8(broker, monkeypatch):
    """OffsetDelete v0: an Empty group loses the offsets asked for; a consumer group with members
    keeps those of topics a member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC) and loses the rest;
    unknown partitions and groups get Kafka's errors."""
    import sys
    from odradek.broker.group.assignment_protocol import encode_subscription
    this = sys.modules[__name__]

    def consumer(group: str, topics: list[str]) -> str:
        monkeypatch.setattr(this, "PROTOCOLS", [{"name": "range", "metadata": encode_subscription(topics)}])
        return stable_member(broker, group)

    def delete(group: str, tps: list[tuple[str, int]]):
        resp = call(broker, offset_delete, 0, {"group_id": group, "topics": [
            {"name": t, "partitions": [{"partition_index": p}]} for t, p in tps]})
        return resp.error_code, {(t.name, q.partition_index): q.error_code for t in resp.topics for q in t.partitions}

    def committed(group: str) -> set[tuple[str, int]]:
        resp = call(broker, offset_fetch, 7, {"group_id": group, "topics": None, "require_stable": False})
        return {(t.name, q.partition_index) for t in resp.topics for q in t.partitions}

    reader = consumer("g0", ["t"])
    call(broker, offset_commit, 2, commit_body("g0", reader, 1, {("t", 0): 5, ("t", 1): 6}))
    other = consumer("g2", ["elsewhere"])
    call(broker, offset_commit, 2, commit_body("g2", other, 1, {("t", 1): 7}))
    call(broker, offset_commit, 2, commit_body("g1", "", -1, {("t", 0): 1, ("t", 1): 2}))
    broker.settle()

    assert delete("g0", [("t", 0), ("nope", 0), ("t", 9)]) == (0, {
        ("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION})
    assert committed("g0") == {("t", 0), ("t", 1)}
    assert delete("g2", [("t", 1)]) == (0, {("t", 1): 0}) and committed("g2") == set()
    assert delete("g1", [("t", 0)]) == (0, {("t", 0): 0}) and committed("g1") == {("t", 1)}
    assert delete("zz", [("t", 0)]) == (E.GROUP_ID_NOT_FOUND, {})
    assert delete("", [("t", 0)]) == (E.INVALID_GROUP_ID, {})
    # the tombstones reached __consumer_offsets: a restarted coordinator loads the same
    broker.settle()
    broker.service.shutdown()
    broker.service = GroupCoordinatorService(broker.config, broker.rm, broker.clock)
    broker.ctx.group_coordinator = broker.service.coordinator
    broker.service.startup()
    broker.settle()
    assert committed("g1") == {("t", 1)} and committed("g2") == set() and committed("g0") == {("t", 0), ("t", 1)}
