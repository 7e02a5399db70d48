"""Rebalance flows of the GroupCoordinator with a fake timer and a fake log."""
from __future__ import annotations

import pytest

from odradek.broker.group.metadata import GroupState
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.group_records import GroupKey, GroupValue

from test_group_harness import PROTOS, join, make_coordinator

S = GroupState


def stable_group(coord, timer, n=3, group="g", **kw):
    """n members join and sync; returns {member id: join result}, leader id."""
    joins = [join(coord, group, client_id=f"c{i}", **kw) for i in range(n)]
    timer.advance(0)
    results = {c.result.member_id: c.result for c in joins}
    leader = next(iter(results.values())).leader
    syncs = {m: coord.handle_sync_group(group, r.generation_id, m, None,
                                        {x: x.encode() for x in results} if m == leader else {})
             for m, r in results.items()}
    assert all(s.done and s.result.error_code == E.NONE for s in syncs.values())
    return results, leader


def state(coord, group="g"):
    return coord.manager.get_group(group).state


def test_three_members_one_generation():
    coord, timer, log = make_coordinator()
    joins = [join(coord, client_id=f"c{i}") for i in range(3)]
    assert not any(c.done for c in joins)
    assert state(coord) is S.PREPARING_REBALANCE
    timer.advance(0)
    results = [c.result for c in joins]
    assert {r.error_code for r in results} == {E.NONE}
    assert {r.generation_id for r in results} == {1}
    assert {r.protocol_name for r in results} == {"range"}
    leader = results[0].leader
    assert {r.leader for r in results} == {leader}
    assert [r.member_id for r in results if r.members] == [leader]
    leader_result = next(r for r in results if r.member_id == leader)
    assert sorted(m.member_id for m in leader_result.members) == sorted(r.member_id for r in results)
    assert {m.metadata for m in leader_result.members} == {b"range-meta"}
    assert all(r.member_id.startswith(f"c{i}-") for i, r in enumerate(results))
    assert state(coord) is S.COMPLETING_REBALANCE

    # followers wait for the leader; the assignment is persisted before anyone hears
    followers = [r.member_id for r in results if r.member_id != leader]
    waiting = [coord.handle_sync_group("g", 1, m, None, {}) for m in followers]
    assert not any(w.done for w in waiting)
    log.manual = True
    lead = coord.handle_sync_group("g", 1, leader, None,
                                   {r.member_id: r.member_id.encode() for r in results})
    assert not lead.done and not any(w.done for w in waiting)
    log.release()
    assert lead.result.error_code == E.NONE and lead.result.assignment == leader.encode()
    assert lead.result.protocol_name == "range" and lead.result.protocol_type == "consumer"
    for m, w in zip(followers, waiting):
        assert w.result.error_code == E.NONE and w.result.assignment == m.encode()
    assert state(coord) is S.STABLE
    key, value = log.decoded(coord.partition_for("g"))[-1]
    assert key == GroupKey("g") and isinstance(value, GroupValue)
    assert value.generation == 1 and value.leader == leader and value.protocol == "range"
    assert {m.member_id: m.assignment for m in value.members} == {
        r.member_id: r.member_id.encode() for r in results}
    # a sync in Stable returns the current assignment
    again = coord.handle_sync_group("g", 1, followers[0], None, {})
    assert again.result.assignment == followers[0].encode()


def test_fourth_member_triggers_rebalance():
    coord, timer, _ = make_coordinator()
    members, leader = stable_group(coord, timer)
    newcomer = join(coord, client_id="c3")
    assert state(coord) is S.PREPARING_REBALANCE and not newcomer.done
    for m in members:
        assert coord.handle_heartbeat("g", m, None, 1) == E.REBALANCE_IN_PROGRESS
    rejoins = [join(coord, member_id=m) for m in members]
    assert all(r.done for r in rejoins)          # everyone rejoined: no need to wait
    results = [r.result for r in rejoins] + [newcomer.result]
    assert {r.generation_id for r in results} == {2}
    assert {r.error_code for r in results} == {E.NONE}
    assert results[0].leader == leader           # the old leader rejoined and stays leader
    assert sum(1 for r in results if r.members) == 1
    assert len(next(r for r in results if r.members).members) == 4


def test_stopped_member_expires_and_others_rebalance():
    coord, timer, _ = make_coordinator()
    members, leader = stable_group(coord, timer)
    dead = next(m for m in members if m != leader)
    alive = [m for m in members if m != dead]
    for _ in range(2):
        timer.advance(4000)
        for m in alive:
            assert coord.handle_heartbeat("g", m, None, 1) == E.NONE
    timer.advance(1999)
    assert coord.manager.get_group("g").has(dead)
    timer.advance(1)
    assert not coord.manager.get_group("g").has(dead)          # gone after 10 s
    assert state(coord) is S.PREPARING_REBALANCE
    assert coord.handle_heartbeat("g", dead, None, 1) == E.UNKNOWN_MEMBER_ID
    rejoins = [join(coord, member_id=m) for m in alive]
    assert [r.result.generation_id for r in rejoins] == [2, 2]
    assert len(next(r.result for r in rejoins if r.result.members).members) == 2


def test_a_member_expires_one_session_timeout_after_its_last_heartbeat():
    coord, timer, _ = make_coordinator()
    members, _ = stable_group(coord, timer, n=1)
    (member,) = members
    scheduled = []
    schedule = timer.schedule
    timer.schedule = lambda delay_ms, callback: scheduled.append(delay_ms) or schedule(delay_ms, callback)
    for _ in range(5):   # heartbeats past the first timer's due time
        timer.advance(4000)
        assert coord.handle_heartbeat("g", member, None, 1) == E.NONE
    # no timer per heartbeat: the session timer (due at 10 s, then 18 s) set itself again for the rest
    assert scheduled == [8000, 8000]
    timer.advance(9999)
    assert coord.manager.get_group("g").has(member)
    timer.advance(1)
    assert not coord.manager.get_group("g").has(member)   # 10 s after the last heartbeat
    assert state(coord) is S.EMPTY


def test_members_that_do_not_rejoin_are_dropped_after_rebalance_timeout():
    coord, timer, _ = make_coordinator()
    members, leader = stable_group(coord, timer, n=2, rebalance_ms=20_000)
    other = next(m for m in members if m != leader)
    rejoin = join(coord, member_id=leader, rebalance_ms=20_000)     # the leader forces a rebalance
    assert not rejoin.done
    for _ in range(4):
        timer.advance(5000 - 1)
        assert coord.handle_heartbeat("g", other, None, 1) == E.REBALANCE_IN_PROGRESS
    timer.advance(4)
    assert rejoin.result.error_code == E.NONE and rejoin.result.generation_id == 2
    assert [m.member_id for m in rejoin.result.members] == [leader]
    assert coord.handle_heartbeat("g", other, None, 2) == E.UNKNOWN_MEMBER_ID


def test_single_member_leader_rejoin_completes_at_once():
    coord, timer, _ = make_coordinator()
    members, leader = stable_group(coord, timer, n=1)
    rejoin = join(coord, member_id=leader)
    assert rejoin.result.generation_id == 2 and state(coord) is S.COMPLETING_REBALANCE
    # a follower with unchanged metadata in Stable just gets the current generation
    coord2, timer2, _ = make_coordinator()
    members2, leader2 = stable_group(coord2, timer2, n=2)
    follower = next(m for m in members2 if m != leader2)
    same = join(coord2, member_id=follower)
    assert same.result.generation_id == 1 and same.result.members == []
    assert state(coord2) is S.STABLE


def test_member_id_required_handshake():
    coord, timer, _ = make_coordinator()
    first = join(coord, client_id="app", require_known=True)
    assert first.result.error_code == E.MEMBER_ID_REQUIRED
    member_id = first.result.member_id
    assert member_id.startswith("app-") and len(member_id) == len("app-") + 36
    group = coord.manager.get_group("g")
    assert member_id in group.pending_members and state(coord) is S.EMPTY
    second = join(coord, member_id=member_id, client_id="app", require_known=True)
    timer.advance(0)
    assert second.result.error_code == E.NONE and second.result.member_id == member_id
    assert second.result.leader == member_id and not group.pending_members


def test_pending_member_expires_and_blocks_rebalance_until_then():
    coord, timer, _ = make_coordinator()
    members, leader = stable_group(coord, timer, n=1)
    pending = join(coord, client_id="late", require_known=True, session_ms=8000)
    assert pending.result.error_code == E.MEMBER_ID_REQUIRED
    rejoin = join(coord, member_id=leader)          # rebalance: waits for the pending member
    assert not rejoin.done
    timer.advance(8000)                              # pending member never came back
    assert rejoin.result.error_code == E.NONE and rejoin.result.generation_id == 2
    assert not coord.manager.get_group("g").pending_members
    late = join(coord, member_id=pending.result.member_id)
    assert late.result.error_code == E.UNKNOWN_MEMBER_ID


def test_initial_delay_extends_while_members_join_and_is_capped():
    coord, timer, _ = make_coordinator(initial_rebalance_delay_ms=3000)
    a = join(coord, client_id="a")
    timer.advance(2000)
    b = join(coord, client_id="b")
    timer.advance(1000)             # t=3000: b arrived, so wait another 3000
    assert not a.done and not b.done
    timer.advance(2999)
    assert not a.done
    timer.advance(1)
    assert a.result.generation_id == b.result.generation_id == 1

    coord, timer, _ = make_coordinator(initial_rebalance_delay_ms=3000)
    first = join(coord, client_id="x0", rebalance_ms=5000)
    for i in range(1, 10):          # a member every second: the delay stops at 5000
        timer.advance(1000)
        if first.done:
            break
        join(coord, client_id=f"x{i}", rebalance_ms=5000)
    assert first.done and timer.now - 1_600_000_000_000 == 5000


def test_static_member_rejoin_without_rebalance_and_fencing():
    coord, timer, log = make_coordinator()
    static = join(coord, instance_id="inst-1", client_id="s")
    dynamic = join(coord, client_id="d")
    timer.advance(0)
    old_id = static.result.member_id
    assert old_id.startswith("inst-1-")
    leader = static.result.leader
    members = [old_id, dynamic.result.member_id]
    for m in members:
        coord.handle_sync_group("g", 1, m, "inst-1" if m == old_id else None,
                                {x: x.encode() for x in members} if m == leader else {})
    assert state(coord) is S.STABLE
    writes = len(log.records(coord.partition_for("g")))
    # the static member restarts: unknown member id, known group.instance.id
    rejoin = join(coord, instance_id="inst-1", client_id="s")
    r = rejoin.result
    assert r.error_code == E.NONE and r.generation_id == 1 and r.member_id != old_id
    assert r.leader == leader and r.members == []                 # the old leader id
    assert state(coord) is S.STABLE                               # no rebalance
    assert len(log.records(coord.partition_for("g"))) == writes + 1
    new_id = r.member_id
    group = coord.manager.get_group("g")
    assert group.static_members == {"inst-1": new_id}
    assert group.get(new_id).assignment == old_id.encode()       # keeps its assignment
    # the old incarnation is fenced everywhere
    assert coord.handle_heartbeat("g", old_id, "inst-1", 1) == E.FENCED_INSTANCE_ID
    assert coord.handle_sync_group("g", 1, old_id, "inst-1", {}).result.error_code == \
        E.FENCED_INSTANCE_ID
    assert join(coord, member_id=old_id, instance_id="inst-1").result.error_code == \
        E.FENCED_INSTANCE_ID
    assert coord.handle_heartbeat("g", new_id, "inst-1", 1) == E.NONE
    sync = coord.handle_sync_group("g", 1, new_id, "inst-1", {})
    assert sync.result.assignment == old_id.encode()


def test_static_member_with_new_protocol_triggers_rebalance():
    coord, timer, _ = make_coordinator()
    static = join(coord, instance_id="i", protocols=[("range", b"")])
    timer.advance(0)
    mid = static.result.member_id
    coord.handle_sync_group("g", 1, mid, "i", {mid: b"a"})
    rejoin = join(coord, instance_id="i", protocols=[("sticky", b""), ("range", b"")])
    assert rejoin.result.protocol_name == "sticky" and rejoin.result.generation_id == 2


def test_static_member_parked_join_is_fenced_by_new_incarnation():
    coord, timer, _ = make_coordinator()
    first, dyn = join(coord, instance_id="i"), join(coord, client_id="d")
    timer.advance(0)
    mid, did = first.result.member_id, dyn.result.member_id
    leader = first.result.leader
    for m in (mid, did):
        coord.handle_sync_group("g", 1, m, "i" if m == mid else None,
                                {mid: b"a", did: b"b"} if m == leader else {})
    join(coord, client_id="other")                       # rebalance starts
    parked = join(coord, member_id=mid, instance_id="i")
    assert not parked.done                               # d has not rejoined yet
    replacement = join(coord, instance_id="i")           # a duplicate process
    assert parked.result.error_code == E.FENCED_INSTANCE_ID
    assert not replacement.done
    join(coord, member_id=did)
    assert replacement.result.error_code == E.NONE
    assert replacement.result.member_id != mid and replacement.result.generation_id == 2


def test_protocol_selection_and_inconsistency():
    coord, timer, _ = make_coordinator()
    a = join(coord, protocols=[("roundrobin", b"a"), ("range", b"a2"), ("sticky", b"a3")])
    b = join(coord, protocols=[("range", b"b"), ("roundrobin", b"b2")])
    c = join(coord, protocols=[("range", b"c"), ("sticky", b"c2"), ("roundrobin", b"c3")])
    bad = join(coord, protocols=[("sticky", b"d")])          # sticky is not supported by b
    wrong_type = join(coord, protocol_type="connect")
    assert bad.result.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert wrong_type.result.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    timer.advance(0)
    assert a.result.protocol_name == "range"                 # 2 votes to 1
    leader = next(r.result for r in (a, b, c) if r.result.members)
    assert sorted(m.metadata for m in leader.members) == [b"a2", b"b", b"c"]
    empty = join(coord, "g2", protocols=[])
    assert empty.result.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_join_validation_errors():
    coord, timer, _ = make_coordinator(min_session_timeout_ms=6000, max_session_timeout_ms=60_000,
                                       max_size=2)
    assert join(coord, session_ms=5999).result.error_code == E.INVALID_SESSION_TIMEOUT
    assert join(coord, session_ms=60_001).result.error_code == E.INVALID_SESSION_TIMEOUT
    assert join(coord, "").result.error_code == E.INVALID_GROUP_ID
    assert join(coord, "nogroup", member_id="x").result.error_code == E.UNKNOWN_MEMBER_ID
    j1, j2 = join(coord), join(coord)
    j3 = join(coord)
    assert j3.result.error_code == E.GROUP_MAX_SIZE_REACHED
    timer.advance(0)
    assert j1.result.error_code == j2.result.error_code == E.NONE
    # the size check comes first (as in Kafka), then the member id check
    assert join(coord, member_id="unknown-id").result.error_code == E.GROUP_MAX_SIZE_REACHED
    join(coord, "g1")
    assert join(coord, "g1", member_id="unknown-id").result.error_code == E.UNKNOWN_MEMBER_ID
    # v0: no rebalance timeout, the session timeout is used
    v0 = join(coord, "g0", rebalance_ms=-1, session_ms=7000)
    timer.advance(0)
    assert coord.manager.get_group("g0").get(v0.result.member_id).rebalance_timeout_ms == 7000


def test_sync_errors():
    coord, timer, log = make_coordinator()
    assert coord.handle_sync_group("g", 1, "m", None, {}).result.error_code == E.UNKNOWN_MEMBER_ID
    assert coord.handle_sync_group("", 1, "m", None, {}).result.error_code == E.INVALID_GROUP_ID
    joins = [join(coord, client_id=f"c{i}") for i in range(2)]
    timer.advance(0)
    m0, m1 = (j.result.member_id for j in joins)
    leader = joins[0].result.leader
    assert coord.handle_sync_group("g", 1, "nobody", None, {}).result.error_code == \
        E.UNKNOWN_MEMBER_ID
    assert coord.handle_sync_group("g", 7, m0, None, {}).result.error_code == E.ILLEGAL_GENERATION
    assert coord.handle_sync_group("g", 1, m0, None, {}, protocol_name="x").result.error_code \
        == E.INCONSISTENT_GROUP_PROTOCOL
    assert coord.handle_heartbeat("g", m1, None, 1) == E.NONE          # CompletingRebalance
    follower = coord.handle_sync_group("g", 1, m1 if leader == m0 else m0, None, {})
    # the write of the assignment fails: everyone is told, the group rebalances
    log.error = E.NOT_ENOUGH_REPLICAS
    lead = coord.handle_sync_group("g", 1, leader, None, {m0: b"x", m1: b"y"})
    assert lead.result.error_code == E.COORDINATOR_NOT_AVAILABLE
    assert follower.result.error_code == E.COORDINATOR_NOT_AVAILABLE
    assert state(coord) is S.PREPARING_REBALANCE
    assert coord.handle_sync_group("g", 1, m0, None, {}).result.error_code == \
        E.REBALANCE_IN_PROGRESS


def test_rejoin_during_completing_rebalance_cancels_parked_syncs():
    coord, timer, _ = make_coordinator()
    joins = [join(coord, client_id=f"c{i}") for i in range(2)]
    timer.advance(0)
    leader = joins[0].result.leader
    follower = next(j.result.member_id for j in joins if j.result.member_id != leader)
    parked = coord.handle_sync_group("g", 1, follower, None, {})
    same = join(coord, member_id=follower)                   # same metadata: resend join answer
    assert same.result.generation_id == 1
    changed = join(coord, member_id=follower, protocols=[("range", b"new")])
    assert parked.result.error_code == E.REBALANCE_IN_PROGRESS and not changed.done
    assert state(coord) is S.PREPARING_REBALANCE


def test_heartbeat_errors():
    coord, timer, _ = make_coordinator(partitions=[coord_p := 0])
    assert coord.handle_heartbeat("nothere", "m", None, 1) in (E.NOT_COORDINATOR,
                                                                E.UNKNOWN_MEMBER_ID)
    coord, timer, _ = make_coordinator()
    assert coord.handle_heartbeat("g", "m", None, 0) == E.UNKNOWN_MEMBER_ID
    members, leader = stable_group(coord, timer, n=1)
    assert coord.handle_heartbeat("g", leader, None, 0) == E.ILLEGAL_GENERATION
    assert coord.handle_heartbeat("g", "other", None, 1) == E.UNKNOWN_MEMBER_ID
    assert coord.handle_heartbeat("", leader, None, 1) == E.INVALID_GROUP_ID
    assert coord.handle_leave_group("g", [(leader, None)]).members[0].error_code == E.NONE
    assert state(coord) is S.EMPTY
    assert coord.handle_heartbeat("g", leader, None, 1) == E.UNKNOWN_MEMBER_ID


def test_leave_group_single_and_batched():
    coord, timer, log = make_coordinator()
    joins = [join(coord, client_id="a"), join(coord, instance_id="s1"),
             join(coord, instance_id="s2")]
    timer.advance(0)
    ids = [j.result.member_id for j in joins]
    leader = joins[0].result.leader
    for m in ids:
        coord.handle_sync_group("g", 1, m, {ids[1]: "s1", ids[2]: "s2"}.get(m),
                                {x: b"" for x in ids} if m == leader else {})
    r = coord.handle_leave_group("g", [(ids[0], None)])
    assert r.error_code == E.NONE and r.legacy_error_code == E.NONE
    assert state(coord) is S.PREPARING_REBALANCE
    # v3 batch: admin removal by instance id, a fenced one and an unknown one
    r = coord.handle_leave_group("g", [("", "s1"), ("wrong", "s2"), ("", "nope")])
    assert [m.error_code for m in r.members] == [E.NONE, E.FENCED_INSTANCE_ID,
                                                 E.UNKNOWN_MEMBER_ID]
    r = coord.handle_leave_group("g", [(ids[2], "s2")])
    assert r.members[0].error_code == E.NONE
    timer.advance(30_000)
    assert state(coord) is S.EMPTY
    key, value = log.decoded(coord.partition_for("g"))[-1]
    assert value.members == () and value.generation == 2 and value.protocol is None
    unknown = coord.handle_leave_group("zzz", [("m", None)])
    assert unknown.legacy_error_code == E.UNKNOWN_MEMBER_ID
    assert coord.handle_leave_group("", [("m", None)]).error_code == E.INVALID_GROUP_ID


def test_leaving_member_with_parked_join_is_answered():
    coord, timer, _ = make_coordinator(initial_rebalance_delay_ms=3000)
    a = join(coord, client_id="a", require_known=True)
    a2 = join(coord, member_id=a.result.member_id)
    assert not a2.done
    r = coord.handle_leave_group("g", [(a.result.member_id, None)])
    assert r.members[0].error_code == E.NONE
    assert a2.result.error_code == E.UNKNOWN_MEMBER_ID
    pending = join(coord, client_id="p", require_known=True)
    assert coord.handle_leave_group("g", [(pending.result.member_id, None)]).members[0] \
        .error_code == E.NONE
    assert not coord.manager.get_group("g").pending_members


def test_describe_and_list_groups():
    coord, timer, _ = make_coordinator()
    members, leader = stable_group(coord, timer, n=2)
    described = coord.handle_describe_groups(["g", "missing", ""])
    g, missing, empty = described
    assert g.error_code == E.NONE and g.group_state == "Stable"
    assert g.protocol_type == "consumer" and g.protocol_data == "range"
    assert {m.member_id: m.member_assignment for m in g.members} == {m: m.encode() for m in members}
    assert {m.member_metadata for m in g.members} == {b"range-meta"}
    assert {m.client_host for m in g.members} == {"/127.0.0.1"}
    assert (missing.error_code, missing.group_state) == (E.NONE, "Dead")
    assert empty.error_code == E.NONE and empty.group_state == "Dead"
    join(coord, client_id="new")
    g = coord.handle_describe_groups(["g"])[0]
    assert g.group_state == "PreparingRebalance" and g.protocol_data == ""
    assert {m.member_metadata for m in g.members} == {b""}
    listed = coord.handle_list_groups()
    assert listed.error_code == E.NONE
    assert [(x.group_id, x.protocol_type, x.group_state) for x in listed.groups] == [
        ("g", "consumer", "PreparingRebalance")]


@pytest.mark.parametrize("api", ["join", "sync", "heartbeat", "leave", "describe"])
def test_not_coordinator_and_loading(api):
    coord, timer, log = make_coordinator(partitions=[])
    p = coord.partition_for("g")

    def call():
        if api == "join":
            c = join(coord)
            return c.result.error_code if c.done else None
        if api == "sync":
            return coord.handle_sync_group("g", 1, "m", None, {}).result.error_code
        if api == "heartbeat":
            return coord.handle_heartbeat("g", "m", None, 1)
        if api == "leave":
            return coord.handle_leave_group("g", [("m", None)]).error_code
        return coord.handle_describe_groups(["g"])[0].error_code

    assert call() == E.NOT_COORDINATOR
    assert coord.on_elected(p)
    loading = {"join": E.COORDINATOR_LOAD_IN_PROGRESS, "sync": E.REBALANCE_IN_PROGRESS,
               "heartbeat": E.NONE, "leave": E.COORDINATOR_LOAD_IN_PROGRESS,
               "describe": E.COORDINATOR_LOAD_IN_PROGRESS}
    assert call() == loading[api]
    assert coord.handle_list_groups().error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    coord.finish_loading(p)
    assert coord.handle_list_groups().error_code == E.NONE
    assert call() != E.NOT_COORDINATOR
    coord.shutdown()
    assert call() in (E.COORDINATOR_NOT_AVAILABLE, E.REBALANCE_IN_PROGRESS)
    assert coord.handle_list_groups().error_code == E.COORDINATOR_NOT_AVAILABLE


def test_unload_answers_parked_requests_not_coordinator():
    coord, timer, _ = make_coordinator()
    p = coord.partition_for("g")
    parked = join(coord)                                  # waiting for the initial delay
    coord.on_resigned(p)
    assert parked.result.error_code == E.NOT_COORDINATOR
    assert join(coord).result.error_code == E.NOT_COORDINATOR
    assert timer.pending() == 0

    coord, timer, _ = make_coordinator()
    joins = [join(coord, client_id=f"c{i}") for i in range(2)]
    timer.advance(0)
    leader = joins[0].result.leader
    follower = next(j.result.member_id for j in joins if j.result.member_id != leader)
    sync = coord.handle_sync_group("g", 1, follower, None, {})
    coord.on_resigned(p)
    assert sync.result.error_code == E.NOT_COORDINATOR
    assert timer.pending() == 0
    # a stale epoch does not unload
    coord.load_partition(p, [], epoch=5)
    coord.on_resigned(p, epoch=4)
    assert p in coord.manager.owned_partitions


def test_duplicate_join_answers_the_superseded_request():
    coord, timer, _ = make_coordinator()
    members, leader = stable_group(coord, timer, n=2)
    first = join(coord, member_id=leader)
    second = join(coord, member_id=leader)
    assert first.result.error_code == E.REBALANCE_IN_PROGRESS and not second.done
    other = next(m for m in members if m != leader)
    assert join(coord, member_id=other).result.generation_id == 2
    assert second.result.generation_id == 2


# --- random operation sequences keep the bookkeeping consistent ------------------------

from collections import Counter  # noqa: E402

from hypothesis import event, given, settings, strategies as st  # noqa: E402

ops = st.lists(st.one_of(
    st.tuples(st.just("join"), st.integers(0, 4), st.booleans(), st.sampled_from([None, "i1", "i2"])),
    st.tuples(st.just("rejoin"), st.integers(0, 7), st.booleans()),
    st.tuples(st.just("sync"), st.integers(0, 7)),
    st.tuples(st.just("heartbeat"), st.integers(0, 7)),
    st.tuples(st.just("leave"), st.integers(0, 7)),
    st.tuples(st.just("commit"), st.integers(0, 7)),
    st.tuples(st.just("advance"), st.sampled_from([0, 1000, 6000, 30_000])),
), max_size=40)


def check_invariants(group):
    if group is None:
        return
    members = group.members.values()
    assert group.num_awaiting_join == sum(1 for m in members if m.join_completion is not None)
    assert group.supported_protocols == Counter(p for m in members for p in m.protocol_names())
    assert (group.leader_id is None) == (not group.members)
    assert group.leader_id is None or group.leader_id in group.members
    for instance, mid in group.static_members.items():
        assert group.members[mid].group_instance_id == instance
    if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
        assert group.members and group.protocol_name in group.candidate_protocols()
    if group.state is S.EMPTY:
        assert not group.members


@settings(max_examples=150, deadline=None)
@given(ops)
def test_random_sequences_answer_every_request_once(sequence):
    coord, timer, log = make_coordinator(initial_rebalance_delay_ms=500)
    completions, known = [], []     # known: (member id, instance id)
    for op in sequence:
        group = coord.manager.get_group("g")
        gen = group.generation_id if group else 0
        pick = (lambda i: known[i % len(known)]) if known else None
        if op[0] == "join":
            c = join(coord, client_id=f"c{op[1]}", require_known=op[2] and op[3] is None,
                     instance_id=op[3], protocols=[("range", b"r"), ("rr", b"x")][: 1 + op[1] % 2])
            completions.append(c)
            c.add_callback(lambda r, inst=op[3]: r.member_id and known.append((r.member_id, inst)))
        elif pick is None:
            timer.advance(1000)
        elif op[0] == "rejoin":
            mid, inst = pick(op[1])
            completions.append(join(coord, member_id=mid, instance_id=inst))
        elif op[0] == "sync":
            mid, inst = pick(op[1])
            completions.append(coord.handle_sync_group(
                "g", gen, mid, inst, {m: m.encode() for m, _ in known} if op[1] % 2 else {}))
        elif op[0] == "heartbeat":
            mid, inst = pick(op[1])
            coord.handle_heartbeat("g", mid, inst, gen)
        elif op[0] == "leave":
            coord.handle_leave_group("g", [pick(op[1])])
        elif op[0] == "commit":
            mid, inst = pick(op[1])
            completions.append(coord.handle_commit_offsets(
                "g", mid, inst, gen, {("t", 0): CommitOffset(op[1])}))
        else:
            timer.advance(op[1])
        check_invariants(coord.manager.get_group("g"))
        if coord.manager.get_group("g") is not None:
            event(coord.manager.get_group("g").state.value)
    timer.advance(400_000)          # every rebalance and new-member timeout has run out
    check_invariants(coord.manager.get_group("g"))
    coord.on_resigned(coord.partition_for("g"))
    assert all(c.done for c in completions)
    assert timer.pending() == 0


from odradek.broker.group import CommitOffset  # noqa: E402
