"""Controller decisions against in-memory fakes of the ZooKeeper boundary and the channels."""
from __future__ import annotations

import copy

import pytest
from kazoo.exceptions import NodeExistsError, NoNodeError

from odradek.broker.controller.core import ControllerCore
from odradek.broker.controller.request_batch import LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA
from odradek.broker.controller.states import PartitionState, ReplicaState
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.session import ControllerMovedError, UpdateResult
from odradek.zk.znodes import BrokerInfo, Endpoint, LeaderIsrAndControllerEpoch, ReplicaAssignment
from odradek.zk.znodes import LeaderIsrAndControllerEpoch as S

# ---------------------------------------------------------------- fakes of the two boundaries


def broker(i: int, epoch: int = 100) -> BrokerInfo:
    return BrokerInfo(i, [Endpoint("PLAINTEXT", "127.0.0.1", 9090 + i)], epoch=epoch + i)


def run(coro):
    """Drive a coroutine that never really suspends (fakes answer at once)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("coroutine suspended")


class FakeZk:
    def __init__(self):
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, dict[int, list[int]]] = {}
        self.states: dict[tuple[str, int], LeaderIsrAndControllerEpoch] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.deletions: set[str] = set()
        self.isr_notifications: dict[str, list[tuple[str, int]]] = {}
        self.fenced = False          # True: every write fails the epoch check
        self.writes: list[tuple] = []

    def _fence(self):
        if self.fenced:
            raise ControllerMovedError("fenced")

    async def get_all_brokers(self):
        return copy.deepcopy(self.brokers)

    async def get_all_topics(self):
        return set(self.topics)

    async def get_replica_assignment(self, topics):
        return {(t, p): ReplicaAssignment(list(r)) for t in topics if t in self.topics
                for p, r in self.topics[t].items()}

    async def get_partition_states(self, partitions):
        return {tp: copy.deepcopy(self.states[tp]) for tp in partitions if tp in self.states}

    async def create_partition_states(self, states):
        self._fence()
        out = {}
        for tp, st in states.items():
            if tp in self.states:
                out[tp] = NodeExistsError()
                continue
            self.states[tp] = LeaderIsrAndControllerEpoch(st.leader, st.leader_epoch, list(st.isr),
                                                          st.controller_epoch, 0)
            self.writes.append(("create", tp, st.leader, st.leader_epoch, list(st.isr)))
            out[tp] = None
        return out

    async def update_partition_states(self, states):
        self._fence()
        res = UpdateResult()
        for tp, st in states.items():
            cur = self.states.get(tp)
            if cur is None:
                res.failed[tp] = NoNodeError()
            elif cur.zk_version != st.zk_version:
                res.bad_version.append(tp)
            else:
                new = LeaderIsrAndControllerEpoch(st.leader, st.leader_epoch, list(st.isr),
                                                  st.controller_epoch, cur.zk_version + 1)
                self.states[tp] = new
                self.writes.append(("set", tp, st.leader, st.leader_epoch, list(st.isr)))
                res.succeeded[tp] = copy.deepcopy(new)
        return res

    async def get_topic_config(self, topic):
        return dict(self.configs.get(topic, {}))

    async def get_topic_deletions(self):
        return sorted(self.deletions)

    async def delete_topic(self, topic):
        self._fence()
        self.writes.append(("delete_topic", topic))
        self.topics.pop(topic, None)
        self.configs.pop(topic, None)
        self.deletions.discard(topic)
        for tp in [tp for tp in self.states if tp[0] == topic]:
            del self.states[tp]

    async def delete_topic_deletion_flags(self, topics):
        self._fence()
        for t in topics:
            self.deletions.discard(t)

    async def get_isr_change_notifications(self):
        return sorted(self.isr_notifications)

    async def get_partitions_from_isr_change_notifications(self, names):
        return [tp for n in names for tp in self.isr_notifications.get(n, [])]

    async def delete_isr_change_notifications(self, names):
        self._fence()
        for n in names:
            self.isr_notifications.pop(n, None)


class FakeChannels:
    def __init__(self):
        self.brokers: dict[int, BrokerInfo] = {}
        self.sent = []     # OutRequest

    def add_broker(self, info):
        self.brokers[info.id] = info

    def remove_broker(self, broker_id):
        self.brokers.pop(broker_id, None)

    def send(self, requests):
        self.sent.extend(requests)

    def take(self, api=None, broker_id=None):
        out = [r for r in self.sent if (api is None or r.api == api)
               and (broker_id is None or r.broker_id == broker_id)]
        self.sent = [r for r in self.sent if r not in out]
        return out


def make(brokers=(1, 2, 3), topics=None, states=None, unclean=False):
    zk = FakeZk()
    for b in brokers:
        zk.brokers[b] = broker(b)
    zk.topics.update(topics or {})
    zk.states.update(states or {})
    ch = FakeChannels()
    core = ControllerCore(1, zk, ch, unclean_default=unclean)
    return zk, ch, core


def encode_all(reqs):
    for r in reqs:
        r.api_module.Request.encode(r.body, r.version)


def lai_states(req):
    return {(t["topic_name"], p["partition_index"]): p for t in req.body["topic_states"]
            for p in t["partition_states"]}


def test_failover_initializes_new_partitions():
    zk, ch, core = make(topics={"t": {0: [1, 2, 3], 1: [4, 2, 3]}})
    run(core.on_controller_failover(5, 4))
    assert ch.brokers.keys() == {1, 2, 3}
    assert zk.writes == [("create", ("t", 0), 1, 0, [1, 2, 3]), ("create", ("t", 1), 2, 0, [2, 3])]
    assert zk.states[("t", 0)].controller_epoch == 5
    reqs = ch.take()
    encode_all(reqs)
    # First UpdateMetadata (brokers only) to everybody, before any LeaderAndIsr.
    assert [r.api for r in reqs[:3]] == [UPDATE_METADATA] * 3 and not reqs[0].body["topic_states"]
    lais = [r for r in reqs if r.api == LEADER_AND_ISR]
    assert {r.broker_id for r in lais} == {1, 2, 3}
    st = lai_states(next(r for r in lais if r.broker_id == 3))
    assert st[("t", 1)]["leader"] == 2 and st[("t", 1)]["is_new"] is True
    assert st[("t", 1)]["replicas"] == [4, 2, 3] and st[("t", 1)]["controller_epoch"] == 5
    assert lais[0].body["controller_id"] == 1 and lais[0].body["controller_epoch"] == 5
    assert lais[0].body["broker_epoch"] == broker(lais[0].broker_id).epoch
    um = [r for r in reqs if r.api == UPDATE_METADATA and r.body["topic_states"]]
    assert {r.broker_id for r in um} == {1, 2, 3}
    p1 = [p for p in um[0].body["topic_states"][0]["partition_states"] if p["partition_index"] == 1][0]
    assert p1["offline_replicas"] == [4]
    assert core.ctx.partition_state(("t", 1)) is PartitionState.ONLINE
    assert core.ctx.replica_state((("t", 1), 4)) is ReplicaState.DELETION_INELIGIBLE \
        or core.ctx.replica_state((("t", 1), 4)) is ReplicaState.OFFLINE


def test_failover_with_existing_live_leaders_writes_nothing():
    zk, ch, core = make(topics={"t": {0: [1, 2]}}, states={("t", 0): S(2, 3, [2, 1], 4, 7)})
    run(core.on_controller_failover(5, 0))
    assert zk.writes == []
    lais = ch.take(LEADER_AND_ISR)
    assert {r.broker_id for r in lais} == {1, 2}
    st = lai_states(lais[0])[("t", 0)]
    assert (st["leader"], st["leader_epoch"], st["zk_version"], st["is_new"]) == (2, 3, 7, False)
    assert core.ctx.partition_state(("t", 0)) is PartitionState.ONLINE


def test_new_topic_via_topic_change():
    zk, ch, core = make()
    run(core.on_controller_failover(1, 0))
    ch.take()
    zk.topics["new"] = {0: [2, 3], 1: [3, 1]}
    run(core.on_topic_change())
    assert sorted(zk.writes) == [("create", ("new", 0), 2, 0, [2, 3]), ("create", ("new", 1), 3, 0, [3, 1])]
    reqs = ch.take()
    encode_all(reqs)
    lais = [r for r in reqs if r.api == LEADER_AND_ISR]
    assert {r.broker_id for r in lais} == {1, 2, 3}
    assert all(p["is_new"] for r in lais for p in lai_states(r).values())
    assert {r.broker_id for r in reqs if r.api == UPDATE_METADATA} == {1, 2, 3}


def test_broker_failure_moves_leadership_and_shrinks_isr():
    zk, ch, core = make(topics={"t": {0: [1, 2, 3], 1: [2, 1, 3]}},
                        states={("t", 0): S(1, 0, [1, 2, 3], 1, 0), ("t", 1): S(2, 4, [2, 1, 3], 1, 2)})
    run(core.on_controller_failover(2, 0))
    ch.take()
    del zk.brokers[1]
    run(core.on_broker_change())
    assert zk.states[("t", 0)].leader == 2 and zk.states[("t", 0)].leader_epoch == 1
    assert zk.states[("t", 0)].isr == [2, 3]
    assert zk.states[("t", 1)].leader == 2 and zk.states[("t", 1)].leader_epoch == 5
    assert zk.states[("t", 1)].isr == [2, 3]
    assert all(s.controller_epoch == 2 for s in zk.states.values())
    reqs = ch.take()
    encode_all(reqs)
    assert 1 not in {r.broker_id for r in reqs}
    lais = [r for r in reqs if r.api == LEADER_AND_ISR]
    assert {r.broker_id for r in lais} == {2, 3}
    last = {}
    for r in lais:
        last.update(lai_states(r))
    assert last[("t", 0)]["leader"] == 2 and last[("t", 0)]["isr"] == [2, 3]
    assert {r.broker_id for r in reqs if r.api == UPDATE_METADATA} == {2, 3}
    assert core.ctx.replica_state((("t", 0), 1)) is ReplicaState.OFFLINE
    assert core.ctx.partition_state(("t", 0)) is PartitionState.ONLINE


def test_broker_failure_last_isr_member_leaves_no_leader_then_returns():
    zk, ch, core = make(topics={"t": {0: [1, 2]}}, states={("t", 0): S(1, 0, [1], 1, 0)})
    run(core.on_controller_failover(2, 0))
    del zk.brokers[1]
    run(core.on_broker_change())
    st = zk.states[("t", 0)]
    assert (st.leader, st.isr) == (-1, [1])          # the last ISR member is remembered
    assert core.ctx.partition_state(("t", 0)) is PartitionState.OFFLINE
    ch.take()
    zk.brokers[1] = broker(1, epoch=500)
    run(core.on_broker_change())
    st = zk.states[("t", 0)]
    assert (st.leader, st.isr) == (1, [1])
    assert core.ctx.partition_state(("t", 0)) is PartitionState.ONLINE
    reqs = ch.take()
    encode_all(reqs)
    full = [r for r in reqs if r.api == UPDATE_METADATA and r.broker_id == 1 and r.body["topic_states"]]
    assert full, "the returning broker gets the full metadata"
    assert any(r.api == LEADER_AND_ISR and r.broker_id == 1 for r in reqs)


def test_unclean_election_by_topic_config():
    zk, ch, core = make(topics={"t": {0: [1, 2]}}, states={("t", 0): S(1, 0, [1], 1, 0)})
    zk.configs["t"] = {"unclean.leader.election.enable": "true"}
    run(core.on_controller_failover(2, 0))
    del zk.brokers[1]
    run(core.on_broker_change())
    st = zk.states[("t", 0)]
    assert (st.leader, st.isr, st.leader_epoch) == (2, [2], 1)


def test_bounced_broker_is_failure_then_startup():
    zk, ch, core = make(topics={"t": {0: [1, 2]}}, states={("t", 0): S(1, 0, [1, 2], 1, 0)})
    run(core.on_controller_failover(2, 0))
    ch.take()
    zk.brokers[1] = broker(1, epoch=999)
    run(core.on_broker_change())
    assert zk.states[("t", 0)].leader == 2
    assert core.ctx.broker_epoch(1) == 1000
    reqs = ch.take()
    assert any(r.api == LEADER_AND_ISR and r.broker_id == 1 and r.body["broker_epoch"] == 1000 for r in reqs)


def test_fenced_controller_raises_and_sends_nothing():
    zk, ch, core = make(topics={"t": {0: [1, 2]}}, states={("t", 0): S(1, 0, [1, 2], 1, 0)})
    run(core.on_controller_failover(2, 0))
    ch.take()
    zk.fenced = True
    del zk.brokers[1]
    with pytest.raises(ControllerMovedError):
        run(core.on_broker_change())
    assert zk.states[("t", 0)].leader == 1
    assert not [r for r in ch.take() if r.api == LEADER_AND_ISR]
    assert core.batch.is_empty()


def test_topic_deletion_all_live():
    zk, ch, core = make(topics={"t": {0: [1, 2]}}, states={("t", 0): S(1, 0, [1, 2], 1, 0)})
    run(core.on_controller_failover(2, 0))
    ch.take()
    zk.deletions.add("t")
    run(core.on_topic_deletion())
    reqs = ch.take()
    encode_all(reqs)
    um = [r for r in reqs if r.api == UPDATE_METADATA and r.body["topic_states"]]
    assert um and um[0].body["topic_states"][0]["partition_states"][0]["leader"] == -2
    stops = [r for r in reqs if r.api == STOP_REPLICA and r.deleted_partitions]
    assert {r.broker_id for r in stops} == {1, 2}
    ps = stops[0].body["topic_states"][0]["partition_states"][0]
    assert ps["delete_partition"] is True and ps["leader_epoch"] == -2
    assert ("delete_topic", "t") not in zk.writes
    run(core.on_stop_replica_response(1, [("t", 0)], {("t", 0): 0}))
    assert ("delete_topic", "t") not in zk.writes
    run(core.on_stop_replica_response(2, [("t", 0)], {("t", 0): 0}))
    assert ("delete_topic", "t") in zk.writes
    assert "t" not in core.ctx.all_topics and not zk.deletions


def test_topic_deletion_waits_for_dead_broker():
    zk, ch, core = make(topics={"t": {0: [1, 3]}}, states={("t", 0): S(1, 0, [1, 3], 1, 0)})
    run(core.on_controller_failover(2, 0))
    del zk.brokers[3]
    run(core.on_broker_change())
    ch.take()
    zk.deletions.add("t")
    run(core.on_topic_deletion())
    run(core.on_stop_replica_response(1, [("t", 0)], {("t", 0): 0}))
    assert ("delete_topic", "t") not in zk.writes
    assert "t" in core.ctx.topics_ineligible_for_deletion
    ch.take()
    zk.brokers[3] = broker(3, epoch=700)
    run(core.on_broker_change())
    stops = [r for r in ch.take(STOP_REPLICA) if r.deleted_partitions]
    assert [r.broker_id for r in stops] == [3]
    run(core.on_stop_replica_response(3, [("t", 0)], {("t", 0): 0}))
    assert ("delete_topic", "t") in zk.writes


def test_deletion_flag_of_unknown_topic_is_removed():
    zk, ch, core = make()
    run(core.on_controller_failover(2, 0))
    zk.deletions.add("ghost")
    run(core.on_topic_deletion())
    assert not zk.deletions


def test_isr_change_notification_sends_update_metadata_and_deletes():
    zk, ch, core = make(topics={"t": {0: [1, 2]}}, states={("t", 0): S(1, 0, [1, 2], 1, 0)})
    run(core.on_controller_failover(2, 0))
    ch.take()
    zk.states[("t", 0)] = S(1, 0, [1], 1, 1)
    zk.isr_notifications["isr_change_0000000000"] = [("t", 0)]
    run(core.on_isr_change_notification())
    reqs = ch.take()
    assert {r.broker_id for r in reqs if r.api == UPDATE_METADATA} == {1, 2, 3}
    assert reqs[0].body["topic_states"][0]["partition_states"][0]["isr"] == [1]
    assert not zk.isr_notifications
    assert core.ctx.leadership[("t", 0)].zk_version == 1


def test_controlled_shutdown_moves_leaders_and_stops_followers():
    zk, ch, core = make(topics={"t": {0: [1, 2], 1: [2, 1], 2: [1]}},
                        states={("t", 0): S(1, 0, [1, 2], 1, 0), ("t", 1): S(2, 0, [2, 1], 1, 0),
                                ("t", 2): S(1, 0, [1], 1, 0)})
    run(core.on_controller_failover(2, 0))
    ch.take()
    remaining = run(core.controlled_shutdown(1, broker(1).epoch))
    assert remaining == []                     # t-2 has one replica: not acted on
    assert (zk.states[("t", 0)].leader, zk.states[("t", 0)].isr) == (2, [2])
    assert zk.states[("t", 1)].isr == [2]
    reqs = ch.take()
    assert any(r.api == STOP_REPLICA and r.broker_id == 1 and not r.deleted_partitions for r in reqs)
    with pytest.raises(KafkaError) as ei:
        run(core.controlled_shutdown(1, broker(1).epoch - 1))
    assert ei.value.code is ErrorCode.STALE_BROKER_EPOCH
    with pytest.raises(KafkaError):
        run(core.controlled_shutdown(9, 0))


def test_failed_elections_of_many_partitions_log_a_few_lines(caplog):
    # the shutting-down broker is the only ISR member of each: no election can succeed
    zk, ch, core = make(topics={"t": {p: [1, 2] for p in range(8)}},
                        states={("t", p): S(1, 0, [1], 1, 0) for p in range(8)})
    run(core.on_controller_failover(2, 0))
    caplog.set_level("DEBUG", logger="odradek.broker.controller.partition_state_machine")
    remaining = run(core.controlled_shutdown(1, broker(1).epoch))
    assert sorted(remaining) == [("t", p) for p in range(8)]
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 6 and errors[-1].endswith("failed for 3 more partitions (each at DEBUG)"), errors
    each = [r for r in caplog.records if "leader election for" in r.getMessage()]
    assert len(each) == 8    # every partition still has its own line, the rest at DEBUG


def test_preferred_election():
    zk, ch, core = make(topics={"t": {0: [1, 2]}}, states={("t", 0): S(2, 3, [2, 1], 1, 0)})
    run(core.on_controller_failover(2, 0))
    run(core.elect_preferred_leaders([("t", 0)]))
    assert (zk.states[("t", 0)].leader, zk.states[("t", 0)].leader_epoch) == (1, 4)


def test_partition_addition():
    zk, ch, core = make(topics={"t": {0: [1, 2]}}, states={("t", 0): S(1, 0, [1, 2], 1, 0)})
    run(core.on_controller_failover(2, 0))
    zk.topics["t"][1] = [3, 1]
    run(core.on_partition_modification("t"))
    assert zk.states[("t", 1)].leader == 3


# ---------------------------------------------------------------- one round per event (issue 17 item 6)

ONE_ROUND_TOPICS = {"t": {0: [3, 1, 2], 1: [1, 2, 3], 2: [3, 1]}}


def one_round_states():
    return {("t", 0): S(3, 4, [3, 1, 2], 1, 0), ("t", 1): S(1, 2, [1, 2, 3], 1, 0),
            ("t", 2): S(3, 7, [3], 1, 0)}


def assert_one_round(zk, reqs, live, once=True):
    """t-0 (led by the dead 3) elected from its live ISR in one write, never leader -1; t-1
    shrunk; t-2 (no live ISR) left leaderless as Kafka does. Each live broker hears of t-0 once;
    ``once``: of every partition once."""
    assert [w for w in zk.writes if w[1] == ("t", 0)] == [("set", ("t", 0), 1, 5, [1, 2])]
    assert [w for w in zk.writes if w[1] == ("t", 1)] == [("set", ("t", 1), 1, 3, [1, 2])]
    assert [w for w in zk.writes if w[1] == ("t", 2)] == [("set", ("t", 2), -1, 8, [3])]
    lais = [r for r in reqs if r.api == LEADER_AND_ISR]
    assert sorted(set(r.broker_id for r in lais)) == sorted(live)
    for b in live:
        told = [(tp, p) for r in lais if r.broker_id == b for tp, p in lai_states(r).items()]
        names = [tp for tp, _ in told]
        assert names.count(("t", 0)) == 1
        assert not once or len(names) == len(set(names))
        last = dict(told)
        assert (last[("t", 0)]["leader"], last[("t", 0)]["leader_epoch"]) == (1, 5)
        assert last[("t", 1)]["isr"] == [1, 2]


def test_controller_failover_elects_offline_partitions_in_one_round():
    zk, ch, core = make(brokers=(1, 2), topics=ONE_ROUND_TOPICS, states=one_round_states())
    run(core.on_controller_failover(5, 0))
    reqs = ch.take()
    encode_all(reqs)
    assert_one_round(zk, reqs, [1, 2], once=False)   # t-1: its current state, then its shrunk ISR
    assert core.ctx.partition_state(("t", 0)) is PartitionState.ONLINE
    assert core.ctx.partition_state(("t", 2)) is PartitionState.OFFLINE
    assert core.ctx.replica_state((("t", 0), 3)) is ReplicaState.OFFLINE


def test_broker_failure_is_one_round_one_request_per_broker():
    zk, ch, core = make(topics=ONE_ROUND_TOPICS, states=one_round_states())
    run(core.on_controller_failover(5, 0))
    ch.take()
    del zk.brokers[3]
    run(core.on_broker_change())
    reqs = ch.take()
    encode_all(reqs)
    assert_one_round(zk, reqs, [1, 2])
    assert not [r for r in reqs if r.broker_id == 3]


def test_controlled_shutdown_elections_go_out_before_the_isr_removals():
    zk, ch, core = make(topics=ONE_ROUND_TOPICS, states=one_round_states())
    zk.states[("t", 2)] = S(3, 7, [3, 1], 1, 0)
    run(core.on_controller_failover(5, 0))
    ch.take()
    assert run(core.controlled_shutdown(3, broker(3).epoch)) == []
    reqs = ch.take()
    encode_all(reqs)
    assert [w[1:] for w in zk.writes] == [(("t", 0), 1, 5, [1, 2]), (("t", 2), 1, 8, [1]),
                                          (("t", 1), 1, 3, [1, 2])]
    lais = [(r.broker_id, sorted(lai_states(r))) for r in reqs if r.api == LEADER_AND_ISR]
    assert lais[:3] == [(1, [("t", 0), ("t", 2)]), (2, [("t", 0)]), (3, [("t", 0), ("t", 2)])]
    assert sorted(lais[3:]) == [(1, [("t", 1)]), (2, [("t", 1)])]
    assert {r.broker_id for r in reqs if r.api == STOP_REPLICA} == {3}


def test_elections_on_stale_known_states_are_decided_again_on_read_ones():
    """The first attempt uses the states the controller knows; ZooKeeper changed behind it (a
    leader writing its ISR directly, as before AlterIsr) costs a retry, never a wrong leader."""
    zk, ch, core = make(topics=ONE_ROUND_TOPICS, states=one_round_states())
    run(core.on_controller_failover(5, 0))
    zk.states[("t", 0)] = S(3, 4, [3, 2], 1, 1)      # 1 left t-0's ISR
    zk.states[("t", 2)] = S(3, 7, [3, 1], 1, 1)      # 1 joined t-2's ISR
    zk.states[("t", 1)] = S(1, 2, [1, 2], 1, 1)      # 3 already left t-1's ISR
    del zk.brokers[3]
    run(core.on_broker_change())
    assert (zk.states[("t", 0)].leader, zk.states[("t", 0)].isr) == (2, [2])
    assert (zk.states[("t", 2)].leader, zk.states[("t", 2)].isr) == (1, [1])
    assert zk.states[("t", 1)] == S(1, 2, [1, 2], 1, 1)
