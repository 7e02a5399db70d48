"""Consumer groups against the scripted fake coordinator (tests/unit/client_group_fake.py)."""
from __future__ import annotations

import time

import pytest
from client_group_fake import GroupFakeBroker, GroupState

from odradek.client import (
    AdminClient,
    CommitFailedError,
    Consumer,
    ConsumerRebalanceListener,
    IllegalStateError,
    KafkaError,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
)
from odradek.protocol.errors import ErrorCode

JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH_OFFSETS, FIND = 11, 14, 12, 13, 8, 9, 10


@pytest.fixture
def broker():
    b = GroupFakeBroker()
    b.create_topic("t", 6)
    yield b
    b.stop()


def produce(b, n, topic="t", partitions=6):
    p = Producer(bootstrap_servers=b.bootstrap)
    for i in range(n):
        p.send(topic, f"v{i}".encode(), partition=i % partitions)
    p.flush()
    p.close()


def consumer(b, group="g", **kw):
    kw.setdefault("auto_offset_reset", "earliest")
    kw.setdefault("heartbeat_interval_ms", 100)
    kw.setdefault("session_timeout_ms", 6000)
    kw.setdefault("request_timeout_ms", 5000)
    return Consumer(bootstrap_servers=b.bootstrap, group_id=group, **kw)


def poll_until(consumers, cond, timeout=20.0, sink=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            for recs in c.poll(20).values():
                if sink is not None:
                    sink.extend(recs)
        if cond():
            return
    raise AssertionError("condition not reached; assignments: "
                         + str([sorted(c.assignment()) for c in consumers]))


class Recorder(ConsumerRebalanceListener):
    def __init__(self):
        self.events = []

    def on_partitions_revoked(self, revoked):
        self.events.append(("revoked", sorted(revoked)))

    def on_partitions_assigned(self, assigned):
        self.events.append(("assigned", sorted(assigned)))

    def on_partitions_lost(self, lost):
        self.events.append(("lost", sorted(lost)))


def test_member_id_required_handshake_then_join_at_v7(broker):
    c = consumer(broker)
    c.subscribe(["t"])
    poll_until([c], lambda: len(c.assignment()) == 6)
    joins = [v for k, v in broker.requests if k == JOIN]
    assert joins[:2] == [7, 7]  # first without a member id (MEMBER_ID_REQUIRED), then with it
    member = c._coordinator.generation.member_id
    assert member.startswith(c.config["client.id"] + "-")
    assert list(broker.state.groups["g"].members) == [member]
    assert (SYNC, 5) in broker.requests
    c.close()
    assert (LEAVE, 4) in broker.requests
    assert broker.state.groups["g"].state == "Empty"


def test_three_members_split_six_partitions_then_a_fourth_and_a_close(broker):
    produce(broker, 60)
    listeners = [Recorder() for _ in range(4)]
    cs = [consumer(broker) for _ in range(3)]
    for c, lst in zip(cs, listeners):
        c.subscribe(["t"], listener=lst)
    seen = []
    poll_until(cs, lambda: all(len(c.assignment()) == 2 for c in cs), sink=seen)
    assert set().union(*(c.assignment() for c in cs)) == {TopicPartition("t", p) for p in range(6)}
    poll_until(cs, lambda: len(seen) >= 60, sink=seen)
    assert sorted(r.value for r in seen) == sorted(f"v{i}".encode() for i in range(60))

    fourth = consumer(broker)
    fourth.subscribe(["t"], listener=listeners[3])
    everyone = cs + [fourth]
    poll_until(everyone, lambda: sorted(len(c.assignment()) for c in everyone) == [1, 1, 2, 2]
               and len({c._coordinator.generation.generation_id for c in everyone}) == 1)
    assert ("revoked", sorted(listeners[0].events[0][1])) in listeners[0].events[1:]  # revoked then reassigned

    moved = cs[0].assignment()
    cs[0].close()
    rest = cs[1:] + [fourth]
    poll_until(rest, lambda: sorted(len(c.assignment()) for c in rest) == [2, 2, 2])
    assert moved <= set().union(*(c.assignment() for c in rest))
    # auto-commit on revoke/close: everything consumed before is committed
    offsets = broker.state.groups["g"].offsets
    assert sum(offsets[("t", p)][0] for p in range(6)) == 60
    for c in rest:
        c.close()


def test_commit_then_restart_resumes_from_committed_offset(broker):
    produce(broker, 30)
    c = consumer(broker, enable_auto_commit=False)
    c.subscribe(["t"])
    got = []
    poll_until([c], lambda: len(got) >= 30, sink=got)
    tp0 = TopicPartition("t", 0)
    c.commit({tp0: 2})
    assert c.committed(tp0) == 2
    c.commit({TopicPartition("t", 1): OffsetAndMetadata(3, "note")})
    assert c.committed(TopicPartition("t", 1), metadata=True) == OffsetAndMetadata(3, "note", -1)
    c.close()

    c2 = consumer(broker, enable_auto_commit=False)
    c2.subscribe(["t"])
    got2 = []
    poll_until([c2], lambda: len(got2) >= 30 - 2 - 3, sink=got2)
    firsts = {}
    for r in got2:
        firsts.setdefault(r.partition, r.offset)
    assert firsts[0] == 2 and firsts[1] == 3 and firsts[2] == 0
    c2.commit()  # everything consumed
    assert c2.committed(tp0) == 5
    done = []
    c2.commit_async({tp0: 4}, callback=lambda offsets, err: done.append((offsets, err)))
    poll_until([c2], lambda: done)
    assert done == [({tp0: OffsetAndMetadata(4)}, None)]
    c2.close(autocommit=False)


def test_auto_offset_reset_none_without_commit_raises(broker):
    c = consumer(broker, auto_offset_reset="none")
    c.subscribe(["t"])
    with pytest.raises(NoOffsetForPartitionError) as e:
        poll_until([c], lambda: False, timeout=10)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE and len(e.value.partitions) == 6
    c.close(autocommit=False)


def test_heartbeat_rebalance_in_progress_rejoins_and_commits_first(broker):
    produce(broker, 12)
    lst = Recorder()
    c = consumer(broker, auto_commit_interval_ms=60000)
    c.subscribe(["t"], listener=lst)
    got = []
    poll_until([c], lambda: len(got) >= 12, sink=got)
    gen = c._coordinator.generation.generation_id
    broker.inject["Heartbeat"] = [ErrorCode.REBALANCE_IN_PROGRESS]
    poll_until([c], lambda: c._coordinator.generation.generation_id > gen and c._coordinator.stable())
    assert [e[0] for e in lst.events] == ["assigned", "revoked", "assigned"]
    assert {broker.state.groups["g"].offsets[("t", p)][0] for p in range(6)} == {2}
    c.close()


def test_unknown_member_on_heartbeat_resets_and_rejoins_as_lost(broker):
    lst = Recorder()
    c = consumer(broker)
    c.subscribe(["t"], listener=lst)
    poll_until([c], lambda: c._coordinator.stable())
    old = c._coordinator.generation.member_id
    with broker.state.cond:  # the coordinator forgets the member (as after a session expiry)
        del broker.state.groups["g"].members[old]
    poll_until([c], lambda: lst.events[-1][0] == "assigned" and len(lst.events) == 3)
    assert lst.events[1][0] == "lost"
    assert c._coordinator.generation.member_id != old
    c.close()


def test_coordinator_moved_is_rediscovered():
    state = GroupState(coordinator_id=1)
    a, b = GroupFakeBroker(1, state), GroupFakeBroker(2, state)
    try:
        for br in (a, b):
            br.create_topic("t", 2)
        c = Consumer(bootstrap_servers=a.bootstrap, group_id="g", auto_offset_reset="earliest",
                     enable_auto_commit=False,
                     heartbeat_interval_ms=100, session_timeout_ms=6000, request_timeout_ms=5000)
        c.subscribe(["t"])
        poll_until([c], lambda: c._coordinator.stable())
        assert c._coordinator.coordinator_id == 1
        state.coordinator_id = 2  # broker 1 now answers NOT_COORDINATOR
        c.commit({TopicPartition("t", 0): 1})
        assert c._coordinator.coordinator_id == 2
        assert state.groups["g"].offsets[("t", 0)] == (1, "")
        def finds() -> int:  # FindCoordinator goes to the least loaded node: either broker
            return sum(1 for br in (a, b) for k, _ in br.requests if k == FIND)

        finds_before = finds()
        state.coordinator_id = 1
        broker_hb_before = sum(1 for k, _ in a.requests if k == HEARTBEAT)
        poll_until([c], lambda: c._coordinator.coordinator_id == 1 and c._coordinator.stable())
        assert finds() > finds_before
        assert c.committed(TopicPartition("t", 0)) == 1
        poll_until([c], lambda: sum(1 for k, _ in a.requests if k == HEARTBEAT) > broker_hb_before)
        c.close()
    finally:
        a.stop()
        b.stop()


def test_coordinator_load_in_progress_and_not_available_are_retried(broker):
    broker.inject["FindCoordinator"] = [ErrorCode.COORDINATOR_NOT_AVAILABLE] * 2
    broker.inject["JoinGroup"] = [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
    broker.inject["OffsetFetch"] = [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
    c = consumer(broker)
    c.subscribe(["t"])
    poll_until([c], lambda: len(c.assignment()) == 6 and c.position(TopicPartition("t", 0)) == 0)
    c.close()


def test_commit_with_stale_generation_fails_and_rejoins(broker):
    c = consumer(broker, enable_auto_commit=False)
    c.subscribe(["t"])
    poll_until([c], lambda: c._coordinator.stable())
    broker.inject["OffsetCommit"] = [ErrorCode.ILLEGAL_GENERATION]
    with pytest.raises(CommitFailedError):
        c.commit({TopicPartition("t", 0): 1})
    assert not c._coordinator.stable()
    poll_until([c], lambda: c._coordinator.stable())
    c.close()


def test_max_poll_interval_exceeded_leaves_the_group(broker):
    lst = Recorder()
    c = consumer(broker, max_poll_interval_ms=500, session_timeout_ms=6000)
    c.subscribe(["t"], listener=lst)
    poll_until([c], lambda: c._coordinator.stable())
    deadline = time.monotonic() + 10
    while broker.state.groups["g"].members and time.monotonic() < deadline:
        time.sleep(0.05)  # not polling: the heartbeat thread must leave
    assert not broker.state.groups["g"].members
    poll_until([c], lambda: c._coordinator.stable())
    assert [e[0] for e in lst.events] == ["assigned", "lost", "assigned"]
    c.close()


def test_assign_with_group_commits_with_generation_minus_one(broker):
    produce(broker, 6)
    tp = TopicPartition("t", 3)
    c = consumer(broker, enable_auto_commit=False)
    c.assign([tp])
    with pytest.raises(IllegalStateError):
        c.subscribe(["t"])
    got = []
    poll_until([c], lambda: got, sink=got)
    c.commit()
    assert broker.state.groups["g"].offsets[("t", 3)] == (1, "")
    assert c.committed(tp) == 1
    c.close()
    c2 = consumer(broker)
    c2.assign([tp])
    assert c2.position(tp) == 1
    c2.close()


def test_pause_and_resume(broker):
    c = consumer(broker, enable_auto_commit=False)
    c.subscribe(["t"])
    poll_until([c], lambda: c._coordinator.stable())
    paused = TopicPartition("t", 0)
    c.pause(paused)
    assert c.paused() == {paused}
    produce(broker, 12)
    got = []
    poll_until([c], lambda: len(got) >= 10, sink=got)
    assert all(r.partition != 0 for r in got)
    assert c.position(paused) == 0
    c.resume(paused)
    poll_until([c], lambda: len(got) >= 12, sink=got)
    assert sorted(r.offset for r in got if r.partition == 0) == [0, 1]
    c.close()


def test_pattern_subscription_follows_new_topics(broker):
    broker.create_topic("logs-a", 1)
    c = consumer(broker, metadata_max_age_ms=200)
    c.subscribe(pattern=r"logs-.*")
    poll_until([c], lambda: c.assignment() == {TopicPartition("logs-a", 0)})
    broker.create_topic("logs-b", 2)
    poll_until([c], lambda: len(c.assignment()) == 3)
    assert c.subscription() == {"logs-a", "logs-b"}
    c.close()


def test_roundrobin_and_sticky_strategies(broker):
    cs = [consumer(broker, partition_assignment_strategy=["roundrobin"]) for _ in range(2)]
    for c in cs:
        c.subscribe(["t"])
    poll_until(cs, lambda: all(len(c.assignment()) == 3 for c in cs))
    assert broker.state.groups["g"].protocol == "roundrobin"
    first = sorted(cs, key=lambda c: c._coordinator.generation.member_id)[0]
    assert sorted(tp.partition for tp in first.assignment()) == [0, 2, 4]
    for c in cs:
        c.close()
    st = [consumer(broker, group="s", partition_assignment_strategy="org.apache.kafka.clients.consumer.StickyAssignor")
          for _ in range(3)]
    for c in st:
        c.subscribe(["t"])
    poll_until(st, lambda: all(len(c.assignment()) == 2 for c in st)
               and len({c._coordinator.generation.generation_id for c in st}) == 1)
    before = {id(c): c.assignment() for c in st[1:]}
    st[0].close()
    poll_until(st[1:], lambda: all(len(c.assignment()) == 3 for c in st[1:]))
    assert all(before[id(c)] <= c.assignment() for c in st[1:])  # sticky: nobody lost a partition
    for c in st[1:]:
        c.close()


def test_group_apis_need_a_group_id(broker):
    c = Consumer(bootstrap_servers=broker.bootstrap)
    with pytest.raises(KafkaError) as e:
        c.subscribe(["t"])
    assert e.value.code == ErrorCode.INVALID_GROUP_ID
    c.close()


def test_admin_group_calls(broker):
    produce(broker, 12)
    c = consumer(broker, client_id="the-client")
    c.subscribe(["t"])
    got = []
    poll_until([c], lambda: len(got) >= 12, sink=got)
    c.commit()
    with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.list_consumer_groups() == [("g", "consumer")]
        (desc,) = admin.describe_consumer_groups(["g"])
        assert desc.state == "Stable" and desc.protocol == "range" and desc.coordinator == 0
        (m,) = desc.members
        assert m.client_id == "the-client" and m.topics == ("t",) and len(m.assignment) == 6
        offsets = admin.list_consumer_group_offsets("g")
        assert offsets[TopicPartition("t", 0)].offset == 2
        assert admin.delete_consumer_groups(["g"], raise_errors=False)["g"].code == ErrorCode.NON_EMPTY_GROUP
        c.close()
        assert admin.alter_consumer_group_offsets("g", {TopicPartition("t", 0): 1}) == {TopicPartition("t", 0): None}
        assert admin.list_consumer_group_offsets("g", [TopicPartition("t", 0)]) == {
            TopicPartition("t", 0): OffsetAndMetadata(1, "", -1)}
        assert admin.delete_consumer_groups(["g"]) == {"g": None}
        assert admin.describe_consumer_groups(["g"])[0].state == "Dead"
