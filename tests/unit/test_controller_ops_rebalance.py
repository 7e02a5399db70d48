"""Preferred replica election and auto leader rebalance decisions (sans-IO, in-memory fakes)."""
from __future__ import annotations

from test_controller_core import FakeZk, make, run  # the in-memory ZooKeeper boundary and channels

from odradek.broker.controller import election
from odradek.broker.controller.rebalance import imbalance_by_broker, partitions_to_rebalance
from odradek.broker.controller.request_batch import LEADER_AND_ISR, UPDATE_METADATA
from odradek.zk.znodes import LeaderIsrAndControllerEpoch as S

# ---------------------------------------------------------------- imbalance computation

ASSIGN = {("t", 0): [1, 2, 3], ("t", 1): [2, 3, 1], ("t", 2): [3, 1, 2],
          ("t", 3): [1, 3, 2], ("u", 0): [1, 2, 3]}


def test_imbalance_groups_by_preferred_replica_and_counts_not_led():
    leaders = {("t", 0): 2, ("t", 1): 2, ("t", 2): 3, ("t", 3): 1, ("u", 0): 3}
    imb = imbalance_by_broker(ASSIGN, leaders)
    assert sorted(imb) == [1, 2, 3]
    assert (imb[1].preferred, imb[1].not_led) == (3, [("t", 0), ("u", 0)])
    assert imb[1].ratio == 2 / 3
    assert (imb[2].ratio, imb[3].ratio) == (0.0, 0.0)


def test_imbalance_ignores_unknown_leaders_and_excluded_topics():
    imb = imbalance_by_broker(ASSIGN, {("t", 0): 2}, excluded_topics={"u"})
    assert imb[1].preferred == 2 and imb[1].not_led == [("t", 0)]


def test_rebalance_threshold_is_strictly_greater():
    assign = {("t", p): [1, 2] for p in range(10)}
    leaders = {("t", p): 1 for p in range(10)}
    isrs = {tp: [1, 2] for tp in assign}
    leaders[("t", 0)] = 2                       # ratio exactly 10 %: no rebalance
    assert partitions_to_rebalance(assign, leaders, isrs, {1, 2}, 10) == []
    leaders[("t", 1)] = 2                       # 20 % > 10 %
    assert partitions_to_rebalance(assign, leaders, isrs, {1, 2}, 10) == [("t", 0), ("t", 1)]
    assert partitions_to_rebalance(assign, leaders, isrs, {1, 2}, 20) == []
    assert partitions_to_rebalance(assign, leaders, isrs, {1, 2}, 0) == [("t", 0), ("t", 1)]


def test_rebalance_needs_live_preferred_replica_in_isr():
    assign = {("t", 0): [1, 2], ("t", 1): [1, 2]}
    leaders = {("t", 0): 2, ("t", 1): 2}
    isrs = {("t", 0): [2, 1], ("t", 1): [2]}     # broker 1 is not in t-1's ISR
    assert partitions_to_rebalance(assign, leaders, isrs, {1, 2}, 10) == [("t", 0)]
    assert partitions_to_rebalance(assign, leaders, isrs, {2}, 10) == []       # 1 is dead / shutting down
    assert partitions_to_rebalance(assign, leaders, isrs, {1, 2}, 10, excluded_topics={"t"}) == []


# ---------------------------------------------------------------- election algorithm

def test_preferred_election_algorithm():
    assert election.preferred_replica_partition_leader_election([1, 2], [2, 1], {1, 2}).leader == 1
    assert election.preferred_replica_partition_leader_election([1, 2], [2], {1, 2}).leader is None
    assert election.preferred_replica_partition_leader_election([1, 2], [2, 1], {2}).leader is None
    r = election.preferred_replica_partition_leader_election([3, 1, 2], [1, 2, 3], {1, 2, 3})
    assert (r.leader, r.isr) == (3, [1, 2, 3])     # the ISR does not change


# ---------------------------------------------------------------- controller core

class PreferredZk(FakeZk):
    def __init__(self):
        super().__init__()
        self.preferred: list | None = None

    async def get_preferred_replica_election(self):
        return None if self.preferred is None else list(self.preferred)

    async def delete_preferred_replica_election(self):
        self._fence()
        self.writes.append(("delete_preferred",))
        self.preferred = None


def make_preferred(**kw):
    zk, ch, core = make(**kw)
    pz = PreferredZk()
    pz.__dict__.update(zk.__dict__)
    pz.preferred = None
    for sm in (core, core.psm, core.rsm, core.deletion):
        sm.zk = pz
    return pz, ch, core


def test_preferred_election_skips_unknown_deleted_and_already_preferred():
    zk, ch, core = make_preferred(
        topics={"t": {0: [1, 2], 1: [2, 1], 2: [1, 2]}, "gone": {0: [1, 2]}},
        states={("t", 0): S(2, 3, [2, 1], 1, 0), ("t", 1): S(2, 0, [2, 1], 1, 0),
                ("t", 2): S(2, 1, [2], 1, 0), ("gone", 0): S(2, 0, [2, 1], 1, 0)})
    run(core.on_controller_failover(2, 0))
    core.ctx.topics_to_delete.add("gone")
    ch.take()
    res = run(core.elect_preferred_leaders([("t", 0), ("t", 1), ("t", 2), ("gone", 0), ("nope", 0)]))
    assert set(res) == {("t", 0), ("t", 2)}         # t-1 already preferred; gone/nope skipped
    assert res[("t", 0)].leader == 1 and isinstance(res[("t", 2)], Exception)   # 1 not in t-2's ISR
    assert (zk.states[("t", 0)].leader, zk.states[("t", 0)].leader_epoch) == (1, 4)
    assert zk.states[("t", 2)].leader == 2 and zk.states[("gone", 0)].leader == 2
    reqs = ch.take()
    lai = [r for r in reqs if r.api == LEADER_AND_ISR]
    assert sorted(r.broker_id for r in lai) == [1, 2]
    assert {r.broker_id for r in reqs if r.api == UPDATE_METADATA} == {1, 2, 3}


def test_preferred_election_znode_is_processed_then_deleted():
    zk, ch, core = make_preferred(topics={"t": {0: [1, 2], 1: [2, 1]}},
                                  states={("t", 0): S(2, 0, [2, 1], 1, 0), ("t", 1): S(1, 0, [1, 2], 1, 0)})
    run(core.on_controller_failover(2, 0))
    run(core.on_preferred_replica_election_znode())      # no znode: nothing happens
    assert ("delete_preferred",) not in zk.writes
    zk.preferred = [("t", 0), ("t", 1), ("x", 5)]
    run(core.on_preferred_replica_election_znode())
    assert zk.preferred is None and ("delete_preferred",) in zk.writes
    assert zk.states[("t", 0)].leader == 1 and zk.states[("t", 1)].leader == 2


def test_auto_rebalance_moves_leaders_of_imbalanced_brokers_only():
    topics = {"t": {p: [1, 2, 3] for p in range(4)}, "u": {p: [2, 3, 1] for p in range(10)}}
    states = {("t", p): S(2, 0, [2, 3, 1], 1, 0) for p in range(4)}       # broker 1: ratio 100 %
    states.update({("u", p): S(2, 0, [2, 3, 1], 1, 0) for p in range(10)})
    states[("u", 0)] = S(3, 0, [3, 2, 1], 1, 0)                           # broker 2: ratio 10 %
    states[("t", 3)] = S(2, 0, [2, 3], 1, 0)                              # 1 not in ISR: skipped
    zk, ch, core = make_preferred(topics=topics, states=states)
    run(core.on_controller_failover(2, 0))
    res = run(core.check_and_trigger_auto_leader_rebalance(10))
    assert sorted(res) == [("t", 0), ("t", 1), ("t", 2)]
    assert all(zk.states[("t", p)].leader == 1 for p in range(3))
    assert zk.states[("t", 3)].leader == 2 and zk.states[("u", 0)].leader == 3
    # A shutting-down preferred broker is not given leadership back.
    states2 = {("t", p): S(2, 0, [2, 1], 1, 0) for p in range(2)}
    zk, ch, core = make_preferred(topics={"t": {p: [1, 2] for p in range(2)}}, states=states2)
    run(core.on_controller_failover(2, 0))
    core.ctx.shutting_down.add(1)
    assert run(core.check_and_trigger_auto_leader_rebalance(10)) == {}


def test_elect_leaders_from_an_admin_preferred_and_unclean():
    """ElectLeaders' decisions per partition (Kafka's processReplicaLeaderElection)."""
    from odradek.protocol.errors import ErrorCode as E
    zk, ch, core = make_preferred(
        brokers=(1, 2),
        topics={"t": {0: [1, 2], 1: [2, 1], 2: [1, 2]}, "dead": {0: [3, 1]}, "gone": {0: [1, 2]}},
        states={("t", 0): S(2, 3, [2, 1], 1, 0), ("t", 1): S(2, 0, [2, 1], 1, 0), ("t", 2): S(2, 1, [2], 1, 0),
                ("dead", 0): S(3, 0, [3], 1, 0), ("gone", 0): S(2, 0, [2, 1], 1, 0)})
    run(core.on_controller_failover(2, 0))
    assert zk.states[("dead", 0)].leader == -1          # its only ISR member, 3, is gone: offline
    core.ctx.topics_to_delete.add("gone")
    asked = [("t", 0), ("t", 1), ("t", 2), ("dead", 0), ("gone", 0), ("nope", 0)]
    res = run(core.elect_leaders(asked, unclean=False))
    assert {tp: r[0] for tp, r in res.items()} == {
        ("t", 0): E.NONE, ("t", 1): E.ELECTION_NOT_NEEDED, ("t", 2): E.PREFERRED_LEADER_NOT_AVAILABLE,
        ("dead", 0): E.PREFERRED_LEADER_NOT_AVAILABLE, ("gone", 0): E.INVALID_TOPIC_EXCEPTION,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert res[("t", 0)][2] == 1 == zk.states[("t", 0)].leader
    res = run(core.elect_leaders([("dead", 0), ("t", 1)], unclean=True))
    assert res == {("dead", 0): (E.NONE, None, 1), ("t", 1): (E.ELECTION_NOT_NEEDED, None, -1)}
    assert (zk.states[("dead", 0)].leader, zk.states[("dead", 0)].isr) == (1, [1])
