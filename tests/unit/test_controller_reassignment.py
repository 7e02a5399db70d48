"""Partition reassignment decisions (KIP-455) against in-memory fakes of ZooKeeper and the channels."""
from __future__ import annotations

import copy

from test_controller_core import FakeChannels, FakeZk, broker, encode_all, lai_states, run

from odradek.broker.controller.core import ControllerCore
from odradek.broker.controller.request_batch import LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA
from odradek.protocol.errors import ErrorCode
from odradek.zk.znodes import LeaderIsrAndControllerEpoch as S
from odradek.zk.znodes import ReplicaAssignment as RA

NONE = (ErrorCode.NONE, None)


class ReassigningZk(FakeZk):
    """FakeZk whose topic znodes keep adding/removing replicas, with /admin/reassign_partitions."""

    def __init__(self):
        super().__init__()
        self.full: dict[str, dict[int, RA]] = {}
        self.zk_request: tuple[dict, int] | None = None
        self.watched: list[tuple[str, int]] = []

    async def get_replica_assignment(self, topics):
        return {(t, p): copy.deepcopy(self.full.get(t, {}).get(p) or RA(list(r)))
                for t in topics if t in self.topics for p, r in self.topics[t].items()}

    async def set_replica_assignment(self, topic, assignment):
        self._fence()
        self.writes.append(("assign", topic, {p: copy.deepcopy(a) for p, a in assignment.items()}))
        self.topics[topic] = {p: list(a.replicas) for p, a in assignment.items()}
        self.full[topic] = copy.deepcopy(assignment)

    async def get_partition_state_watched(self, tp):
        self.watched.append(tp)
        return copy.deepcopy(self.states.get(tp))

    async def get_partition_reassignment(self):
        return copy.deepcopy(self.zk_request)

    async def set_partition_reassignment(self, reassignment):
        self._fence()
        self.zk_request = (dict(reassignment), self.zk_request[1]) if reassignment and self.zk_request else None


def make(brokers=(1, 2, 3), topics=None, states=None):
    zk = ReassigningZk()
    for b in brokers:
        zk.brokers[b] = broker(b)
    zk.topics.update(topics or {"t": {0: [1, 2], 1: [2, 1]}})
    zk.states.update(states or {("t", 0): S(1, 0, [1, 2], 1, 0), ("t", 1): S(2, 0, [2, 1], 1, 0)})
    ch = FakeChannels()
    core = ControllerCore(1, zk, ch)
    run(core.on_controller_failover(2, 0))
    ch.take()
    zk.writes.clear()
    return zk, ch, core


def grow_isr(zk, tp, *brokers):
    st = zk.states[tp]
    zk.states[tp] = S(st.leader, st.leader_epoch, st.isr + list(brokers), st.controller_epoch, st.zk_version + 1)


def test_reassignment_adds_the_new_replica_then_moves_leader_and_deletes_the_old_one():
    zk, ch, core = make()
    tp = ("t", 0)
    assert run(core.reassignments.alter({tp: [2, 3]})) == {tp: NONE}
    # Started: RS = TRS + ORS, the topic znode says who is added and removed, epoch bumped.
    assert zk.full["t"][0] == RA([2, 3, 1], [3], [1])
    assert zk.topics["t"][1] == [2, 1]
    assert zk.states[tp].leader == 1 and zk.states[tp].leader_epoch == 1 and zk.states[tp].isr == [1, 2]
    reqs = ch.take()
    encode_all(reqs)
    lais = {r.broker_id: lai_states(r)[tp] for r in reqs if r.api == LEADER_AND_ISR}
    assert set(lais) == {1, 2, 3}
    assert lais[3]["is_new"] and not lais[1]["is_new"]
    assert (lais[1]["replicas"], lais[1]["adding_replicas"], lais[1]["removing_replicas"]) == ([2, 3, 1], [3], [1])
    assert not [r for r in reqs if r.api == STOP_REPLICA]
    assert core.reassignments.ongoing(None) == {tp: RA([2, 3, 1], [3], [1])}
    assert core.reassignments.ongoing([("t", 1)]) == {}

    # A state change without the new replica in the ISR changes nothing.
    run(core.reassignments.on_isr_change(tp))
    assert tp in core.ctx.partitions_being_reassigned and not ch.take()

    # Broker 3 joins the ISR: the reassignment completes.
    grow_isr(zk, tp, 3)
    run(core.reassignments.on_isr_change(tp))
    st = zk.states[tp]
    assert st.leader == 2 and 1 not in st.isr and sorted(st.isr) == [2, 3]
    assert zk.full["t"][0] == RA([2, 3]) and core.ctx.replicas(tp) == [2, 3]
    reqs = ch.take()
    encode_all(reqs)
    stops = [r for r in reqs if r.api == STOP_REPLICA]
    assert {r.broker_id for r in stops} == {1} and any(r.deleted_partitions == [tp] for r in stops)
    last_lai = [lai_states(r)[tp] for r in reqs if r.api == LEADER_AND_ISR and r.broker_id == 2][-1]
    assert last_lai["leader"] == 2 and last_lai["replicas"] == [2, 3]
    assert last_lai["leader_epoch"] == st.leader_epoch
    um = [r for r in reqs if r.api == UPDATE_METADATA][-1]
    assert um.body["topic_states"][0]["partition_states"][0]["replicas"] == [2, 3]
    assert core.reassignments.ongoing(None) == {} and not core.ctx.partitions_being_reassigned
    assert (tp, 1) not in core.ctx.replica_states


def test_leader_kept_when_it_stays_and_replication_factor_grows():
    zk, ch, core = make()
    tp = ("t", 0)
    run(core.reassignments.alter({tp: [1, 2, 3]}))
    grow_isr(zk, tp, 3)
    run(core.reassignments.on_isr_change(tp))
    assert zk.states[tp].leader == 1 and zk.states[tp].isr == [1, 2, 3]
    assert zk.full["t"][0] == RA([1, 2, 3])
    assert not [r for r in ch.take() if r.api == STOP_REPLICA]


def test_invalid_targets_are_refused_and_change_nothing():
    zk, ch, core = make()
    out = run(core.reassignments.alter({
        ("t", 0): [], ("t", 1): [3, 3], ("t", 5): [1], ("u", 0): [1], ("t", 9): None}))
    assert out[("t", 0)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert out[("t", 0)][1] == "Empty replica list specified in partition reassignment."
    assert out[("t", 1)] == (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "Duplicate replica ids in partition reassignment replica list: [3, 3]")
    assert out[("t", 5)][0] == out[("u", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert out[("t", 9)][0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS    # as Kafka: nothing to cancel
    out = run(core.reassignments.alter({("t", 0): [-1, 2], ("t", 1): [2, 4], ("t", 9): [1]}))
    assert out[("t", 0)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "Invalid broker id" in out[("t", 0)][1]
    assert out[("t", 1)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "brokers that are not alive" in out[("t", 1)][1]
    assert run(core.reassignments.alter({("t", 0): None}))[("t", 0)][0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert zk.writes == [] and ch.take() == []


def test_cancel_goes_back_to_the_origin_replicas_and_deletes_the_added_one():
    zk, ch, core = make()
    tp = ("t", 0)
    run(core.reassignments.alter({tp: [2, 3]}))
    ch.take()
    assert run(core.reassignments.alter({tp: None})) == {tp: NONE}
    # The origin replicas, in the order the full set holds them (as Kafka: its znode keeps no other).
    assert zk.full["t"][0] == RA([2, 1]) and core.ctx.replicas(tp) == [2, 1]
    assert zk.states[tp].leader == 1 and zk.states[tp].isr == [1, 2]
    reqs = ch.take()
    assert any(r.api == STOP_REPLICA and r.broker_id == 3 and r.deleted_partitions == [tp] for r in reqs)
    assert core.reassignments.ongoing(None) == {}


def test_a_new_target_replaces_an_ongoing_reassignment_from_its_origin():
    zk, ch, core = make(brokers=(1, 2, 3, 4))
    tp = ("t", 0)
    run(core.reassignments.alter({tp: [2, 3]}))
    ch.take()
    run(core.reassignments.alter({tp: [1, 4]}))
    assert zk.full["t"][0] == RA([1, 4, 2], [4], [2])
    assert any(r.api == STOP_REPLICA and r.broker_id == 3 and r.deleted_partitions == [tp] for r in ch.take())


def test_zookeeper_request_starts_once_and_is_removed_when_done():
    zk, ch, core = make()
    tp = ("t", 1)
    zk.zk_request = ({tp: [2, 3], ("t", 0): []}, 77)
    assert run(core.reassignments.on_zk_request()) == {tp}
    assert zk.zk_request == ({tp: [2, 3]}, 77)     # the invalid entry is dropped
    assert zk.full["t"][1] == RA([2, 3, 1], [3], [1])
    ch.take()
    assert run(core.reassignments.on_zk_request()) == set()   # a change to the same node
    assert not ch.take()
    grow_isr(zk, tp, 3)
    run(core.reassignments.on_isr_change(tp))
    assert zk.full["t"][1] == RA([2, 3]) and zk.zk_request is None
    assert zk.states[tp].leader == 2


def test_failover_resumes_a_reassignment_recorded_in_the_topic_znode():
    zk = ReassigningZk()
    for b in (1, 2, 3):
        zk.brokers[b] = broker(b)
    zk.topics["t"] = {0: [2, 3, 1]}
    zk.full["t"] = {0: RA([2, 3, 1], [3], [1])}
    zk.states[("t", 0)] = S(1, 4, [1, 2, 3], 1, 3)
    ch = FakeChannels()
    core = ControllerCore(1, zk, ch)
    run(core.on_controller_failover(2, 0))
    assert zk.full["t"][0] == RA([2, 3]) and zk.states[("t", 0)].leader == 2
    assert not core.ctx.partitions_being_reassigned


def test_deletion_waits_for_the_reassignment():
    zk, ch, core = make()
    tp = ("t", 0)
    run(core.reassignments.alter({tp: [2, 3]}))
    zk.deletions.add("t")
    run(core.on_topic_deletion())
    assert not [r for r in ch.take() if r.api == STOP_REPLICA and r.deleted_partitions]
    assert run(core.reassignments.alter({("t", 1): [1, 3]}))[("t", 1)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    grow_isr(zk, tp, 3)
    run(core.reassignments.on_isr_change(tp))
    deleted = {pr for r in ch.take() if r.api == STOP_REPLICA for pr in r.deleted_partitions}
    assert ("t", 1) in deleted


def test_failover_resumes_a_reassignment_of_a_topic_queued_for_deletion_and_deletes_it_after():
    zk = ReassigningZk()
    for b in (1, 2, 3):
        zk.brokers[b] = broker(b)
    zk.topics["t"] = {0: [2, 3, 1]}
    zk.full["t"] = {0: RA([2, 3, 1], [3], [1])}
    zk.states[("t", 0)] = S(1, 4, [1, 2], 1, 3)
    zk.deletions.add("t")
    ch = FakeChannels()
    core = ControllerCore(1, zk, ch)
    run(core.on_controller_failover(2, 0))
    assert core.ctx.partitions_being_reassigned == {("t", 0)}    # resumed, not refused
    assert not [r for r in ch.take() if r.api == STOP_REPLICA and r.deleted_partitions]
    grow_isr(zk, ("t", 0), 3)
    run(core.reassignments.on_isr_change(("t", 0)))
    deleted = {(r.broker_id, tp) for r in ch.take() if r.api == STOP_REPLICA for tp in r.deleted_partitions}
    assert {(2, ("t", 0)), (3, ("t", 0))} <= deleted             # the deletion went on afterwards
