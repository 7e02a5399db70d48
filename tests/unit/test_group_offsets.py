"""Offset commit/fetch, loading, expiry, deletion and recovery from __consumer_offsets."""
from __future__ import annotations

import pytest

from odradek.broker.group import CommitOffset, GroupConfig, GroupCoordinator
from odradek.broker.group import assignment_protocol as cp
from odradek.broker.group.metadata import GroupState
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.group_records import (
    GroupKey, OffsetKey, OffsetValue, encode_group_metadata, encode_offset_commit,
)

from test_group_harness import FakeLog, FakeTimer, join, make_coordinator

S = GroupState
TP = ("t", 0)
DAY = 24 * 3600 * 1000


def commit(coord, group="g", member="", generation=-1, offsets=None, instance=None, **kw):
    return coord.handle_commit_offsets(group, member, instance, generation,
                                       offsets or {TP: CommitOffset(42, "meta")}, **kw)


def fetched(coord, group="g", partitions=None):
    r = coord.handle_fetch_offsets(group, partitions)
    return r.error_code, {tp: (o.committed_offset, o.metadata, o.error_code)
                          for tp, o in r.offsets.items()}


def consumer_group(coord, timer, topics=("t",), n=2, group="g"):
    sub = cp.encode_subscription(list(topics))
    joins = [join(coord, group, client_id=f"c{i}", protocols=[("range", sub)]) for i in range(n)]
    timer.advance(0)
    ids = [j.result.member_id for j in joins]
    leader = joins[0].result.leader
    for m in ids:
        coord.handle_sync_group(group, 1, m, None, {x: b"a" for x in ids} if m == leader else {})
    return ids


def test_simple_commit_and_fetch():
    coord, timer, log = make_coordinator()
    assert fetched(coord, partitions=[TP]) == (E.NONE, {TP: (-1, "", E.NONE)})
    assert fetched(coord) == (E.NONE, {})
    c = commit(coord, offsets={TP: CommitOffset(42, "meta", leader_epoch=3),
                               ("t", 1): CommitOffset(7, None)})
    assert c.result == {TP: E.NONE, ("t", 1): E.NONE}
    assert fetched(coord) == (E.NONE, {TP: (42, "meta", E.NONE), ("t", 1): (7, "", E.NONE)})
    r = coord.handle_fetch_offsets("g", [TP, ("u", 9)])
    assert r.offsets[TP].committed_leader_epoch == 3
    assert r.offsets[("u", 9)].committed_offset == -1
    assert coord.manager.get_group("g").state is S.EMPTY
    records = log.decoded(coord.partition_for("g"))
    assert records[0] == (OffsetKey("g", "t", 0),
                          OffsetValue(42, "meta", timer.now, leader_epoch=3))
    # an unknown group with a real generation: a late member of a vanished group
    assert commit(coord, "other", "m", 3).result == {TP: E.ILLEGAL_GENERATION}


def test_commit_across_generations():
    coord, timer, _ = make_coordinator()
    m0, m1 = consumer_group(coord, timer)
    assert commit(coord, member=m0, generation=1).result == {TP: E.NONE}
    assert commit(coord, member="nobody", generation=1).result == {TP: E.UNKNOWN_MEMBER_ID}
    assert commit(coord, member=m0, generation=0).result == {TP: E.ILLEGAL_GENERATION}
    # generation -1 is only a simple commit for an Empty group
    assert commit(coord, member=m0, generation=-1).result == {TP: E.ILLEGAL_GENERATION}
    assert commit(coord, member="", generation=-1).result == {TP: E.UNKNOWN_MEMBER_ID}
    join(coord, client_id="new", protocols=[("range", cp.encode_subscription(["t"]))])
    assert coord.manager.get_group("g").state is S.PREPARING_REBALANCE
    # still accepted while preparing (the heartbeat tells the member to rejoin)
    assert commit(coord, member=m0, generation=1,
                  offsets={TP: CommitOffset(50)}).result == {TP: E.NONE}
    j0 = join(coord, member_id=m0)
    j1 = join(coord, member_id=m1)
    assert j0.result.generation_id == j1.result.generation_id == 2
    assert coord.manager.get_group("g").state is S.COMPLETING_REBALANCE
    assert commit(coord, member=m0, generation=2).result == {TP: E.REBALANCE_IN_PROGRESS}
    assert commit(coord, member=m0, generation=1).result == {TP: E.ILLEGAL_GENERATION}
    assert fetched(coord)[1][TP][0] == 50


def test_commit_errors():
    coord, timer, log = make_coordinator(offset_metadata_max_bytes=4)
    c = commit(coord, offsets={TP: CommitOffset(1, "12345"), ("t", 1): CommitOffset(2, "1234")})
    assert c.result == {TP: E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.NONE}
    assert commit(coord, offsets={TP: CommitOffset(1, "x" * 5)}).result == \
        {TP: E.OFFSET_METADATA_TOO_LARGE}
    assert commit(coord, "").result == {TP: E.NONE}      # "" is a legal group for commits
    for produce_error, answer in [(E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
                                  (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
                                  (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
                                  (E.MESSAGE_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE)]:
        log.error = produce_error
        assert commit(coord, offsets={TP: CommitOffset(99)}).result == {TP: answer}
    log.error = E.NONE
    assert fetched(coord)[1][("t", 1)][0] == 2 and fetched(coord)[1].get(TP) is None
    group = coord.manager.get_group("g")
    group.transition_to(S.DEAD)
    assert commit(coord).result == {TP: E.COORDINATOR_NOT_AVAILABLE}
    assert fetched(coord, partitions=[TP]) == (E.NONE, {TP: (-1, "", E.NONE)})


def test_commit_answers_after_append_and_fetch_require_stable():
    coord, timer, log = make_coordinator()
    log.manual = True
    c = commit(coord)
    assert not c.done
    r = coord.handle_fetch_offsets("g", [TP], require_stable=True)
    assert r.offsets[TP].error_code == E.UNSTABLE_OFFSET_COMMIT
    assert coord.handle_fetch_offsets("g", [TP]).offsets[TP].committed_offset == -1
    log.release()
    assert c.result == {TP: E.NONE}
    assert coord.handle_fetch_offsets("g", [TP], require_stable=True).offsets[TP] \
        .committed_offset == 42


def test_static_member_commit_fenced():
    coord, timer, _ = make_coordinator()
    j = join(coord, instance_id="i")
    timer.advance(0)
    mid = j.result.member_id
    coord.handle_sync_group("g", 1, mid, "i", {mid: b""})
    assert commit(coord, member="old", generation=1, instance="i").result == \
        {TP: E.FENCED_INSTANCE_ID}
    assert commit(coord, member=mid, generation=1, instance="i").result == {TP: E.NONE}


def test_offset_apis_not_coordinator_and_loading():
    coord, timer, log = make_coordinator(partitions=[])
    assert commit(coord).result == {TP: E.NOT_COORDINATOR}
    assert fetched(coord)[0] == E.NOT_COORDINATOR
    assert coord.handle_delete_groups(["g"]) == {"g": E.NOT_COORDINATOR}
    p = coord.partition_for("g")
    coord.on_elected(p)
    assert commit(coord).result == {TP: E.COORDINATOR_LOAD_IN_PROGRESS}
    assert fetched(coord)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert coord.handle_delete_groups(["g"]) == {"g": E.COORDINATOR_LOAD_IN_PROGRESS}
    coord.load_records(p, [encode_offset_commit("g", "t", 0, OffsetValue(5, "", 1))])
    coord.finish_loading(p)
    assert fetched(coord) == (E.NONE, {TP: (5, "", E.NONE)})
    coord.on_resigned(p)
    assert fetched(coord)[0] == E.NOT_COORDINATOR


def test_load_replays_in_order_with_tombstones():
    coord, timer, _ = make_coordinator(partitions=[])
    p = coord.partition_for("g")
    ov = lambda o: OffsetValue(o, "", 1)  # noqa: E731
    records = [
        encode_offset_commit("g", "t", 0, ov(1)),
        encode_offset_commit("g", "t", 0, ov(2)),            # later wins
        encode_offset_commit("g", "t", 1, ov(3)),
        encode_offset_commit("g", "t", 1, None),             # deleted
        (b"\x00\x07junk", b"x"),                             # unknown version: skipped
        (None, b"no key"),
    ]
    assert coord.on_elected(p, epoch=1)
    assert not coord.on_elected(p, epoch=1)                  # already loading
    coord.load_records(p, records)
    coord.finish_loading(p)
    assert fetched(coord) == (E.NONE, {TP: (2, "", E.NONE)})
    assert not coord.on_elected(p, epoch=0)                  # stale epoch


def test_expire_simple_and_empty_groups():
    coord, timer, log = make_coordinator(offsets_retention_ms=DAY)
    commit(coord, "simple")                                  # generation 0, no protocol type
    ids = consumer_group(coord, timer, group="cg")
    commit(coord, "cg", ids[0], 1)
    for m in ids:
        coord.handle_leave_group("cg", [(m, None)])
    assert coord.manager.get_group("cg").state is S.EMPTY
    timer.advance(DAY - 1)
    assert coord.expire_offsets() == {}
    timer.advance(1)
    batches = coord.expire_offsets()
    assert coord.manager.get_group("simple") is None and coord.manager.get_group("cg") is None
    ps, pc = coord.partition_for("simple"), coord.partition_for("cg")
    from odradek.protocol.records import iter_records
    from odradek.protocol.group_records import decode_record
    got = {p: [decode_record(r.key, r.value) for r in iter_records(b)] for p, b in batches.items()}
    simple = got[ps] if ps != pc else [x for x in got[ps] if x[0] in (OffsetKey("simple", "t", 0),)]
    assert (OffsetKey("simple", "t", 0), None) in simple
    assert (GroupKey("simple"), None) not in got.get(ps, [])  # offsets-only: no metadata record
    assert (OffsetKey("cg", "t", 0), None) in got[pc] and (GroupKey("cg"), None) in got[pc]
    assert fetched(coord, "cg", [TP])[1][TP][0] == -1


def test_expire_only_unsubscribed_topics_of_active_consumer_group():
    coord, timer, _ = make_coordinator(offsets_retention_ms=60_000)
    ids = consumer_group(coord, timer, topics=("t",), n=1)
    commit(coord, member=ids[0], generation=1,
           offsets={TP: CommitOffset(1), ("old", 0): CommitOffset(2)})
    for _ in range(12):
        timer.advance(5000)
        assert coord.handle_heartbeat("g", ids[0], None, 1) == E.NONE
    batches = coord.expire_offsets()
    assert len(batches) == 1
    assert fetched(coord)[1] == {TP: (1, "", E.NONE)}
    assert coord.manager.get_group("g").state is S.STABLE


def test_explicit_retention_time_expires_by_expire_timestamp():
    coord, timer, log = make_coordinator(offsets_retention_ms=DAY)
    commit(coord, retention_time_ms=1000)
    value = log.decoded(coord.partition_for("g"))[0][1]
    assert value.expire_timestamp == timer.now + 1000        # written as value v1
    timer.advance(1000)
    assert coord.expire_offsets() and coord.manager.get_group("g") is None


def test_periodic_expiry_appends_tombstones():
    cfg = GroupConfig(offsets_retention_ms=1000, offsets_retention_check_interval_ms=500)
    timer, log = FakeTimer(), FakeLog()
    coord = GroupCoordinator(cfg, timer, log)
    coord.startup()
    p = coord.partition_for("g")
    coord.load_partition(p, [])
    commit(coord)
    timer.advance(1000)
    assert log.decoded(p)[-1] == (OffsetKey("g", "t", 0), None)
    coord.shutdown()
    assert timer.pending() == 0


def test_delete_groups():
    coord, timer, log = make_coordinator()
    ids = consumer_group(coord, timer, group="busy")
    commit(coord, "simple")
    empty_ids = consumer_group(coord, timer, group="was-used", n=1)
    commit(coord, "was-used", empty_ids[0], 1)
    coord.handle_leave_group("was-used", [(empty_ids[0], None)])
    result = coord.handle_delete_groups(["busy", "simple", "was-used", "never", ""])
    assert result == {"busy": E.NON_EMPTY_GROUP, "simple": E.NONE, "was-used": E.NONE,
                      "never": E.GROUP_ID_NOT_FOUND, "": E.GROUP_ID_NOT_FOUND}
    assert coord.handle_delete_groups(["simple"]) == {"simple": E.GROUP_ID_NOT_FOUND}
    assert fetched(coord, "simple", [TP])[1][TP][0] == -1
    pw = coord.partition_for("was-used")
    tail = log.decoded(pw)[-2:]
    assert tail == [(OffsetKey("was-used", "t", 0), None), (GroupKey("was-used"), None)]
    assert (GroupKey("simple"), None) not in log.decoded(coord.partition_for("simple"))
    assert coord.manager.get_group("busy").state is S.STABLE


def test_recovery_from_the_log():
    coord, timer, log = make_coordinator()
    ids = consumer_group(coord, timer, group="g", n=3)
    static = join(coord, "st", instance_id="inst")
    timer.advance(0)
    sid = static.result.member_id
    coord.handle_sync_group("st", 1, sid, "inst", {sid: b"sa"})
    commit(coord, "g", ids[0], 1, {TP: CommitOffset(10, "x", 4), ("t", 1): CommitOffset(11)})
    commit(coord, "g", ids[1], 1, {TP: CommitOffset(12)})
    commit(coord, "simple", offsets={("s", 0): CommitOffset(5)})
    commit(coord, "gone")
    coord.handle_delete_groups(["gone"])
    # a group that went Empty after its members left
    e_ids = consumer_group(coord, timer, group="emptied", n=1)
    commit(coord, "emptied", e_ids[0], 1)
    coord.handle_leave_group("emptied", [(e_ids[0], None)])

    fresh_timer = FakeTimer(timer.now)
    fresh = GroupCoordinator(coord.config, fresh_timer, FakeLog())
    fresh.startup(periodic_expiry=False)
    for p in range(coord.config.offsets_partitions):
        assert fresh.on_elected(p)
        fresh.load_batches(p, log.blob(p))
        fresh.finish_loading(p)
    for group in ("g", "simple", "emptied", "st"):
        assert fresh.handle_fetch_offsets(group).offsets == \
            coord.handle_fetch_offsets(group).offsets, group
    assert fresh.handle_fetch_offsets("g").offsets[TP].committed_offset == 12
    assert fresh.manager.get_group("gone") is None
    old, new = coord.manager.get_group("g"), fresh.manager.get_group("g")
    assert new.state is S.STABLE and new.generation_id == old.generation_id == 1
    assert (new.protocol_type, new.protocol_name, new.leader_id) == \
        (old.protocol_type, old.protocol_name, old.leader_id)
    assert {m.member_id: (m.assignment, m.metadata("range"), m.session_timeout_ms)
            for m in new.members.values()} == \
        {m.member_id: (m.assignment, m.metadata("range"), m.session_timeout_ms)
         for m in old.members.values()}
    assert new.subscribed_topics == {"t"}
    assert fresh.manager.get_group("emptied").state is S.EMPTY
    assert fresh.manager.get_group("emptied").generation_id == 2
    assert fresh.manager.get_group("st").static_members == {"inst": sid}
    # loaded members keep their generation: they heartbeat and sync as before
    assert fresh.handle_heartbeat("g", ids[2], None, 1) == E.NONE
    assert fresh.handle_sync_group("g", 1, ids[2], None, {}).result.assignment == b"a"
    assert fresh.handle_describe_groups(["g"])[0].group_state == "Stable"
    # members that never come back to the new coordinator expire and the group rebalances
    fresh_timer.advance(5000)
    assert fresh.handle_heartbeat("g", ids[2], None, 1) == E.NONE
    fresh_timer.advance(5000)
    assert fresh.manager.get_group("g").state is S.PREPARING_REBALANCE
    assert not fresh.manager.get_group("g").has(ids[0])


def test_loaded_group_over_capacity_rebalances():
    coord, timer, log = make_coordinator()
    consumer_group(coord, timer, n=3)
    small = GroupCoordinator(GroupConfig(max_size=2), FakeTimer(timer.now), FakeLog())
    small.startup(periodic_expiry=False)
    p = coord.partition_for("g")
    small.on_elected(p)
    small.load_batches(p, log.blob(p))
    small.finish_loading(p)
    assert small.manager.get_group("g").state is S.PREPARING_REBALANCE


@pytest.mark.parametrize("value", [None, "x"])
def test_group_record_tombstone_then_offsets_only(value):
    """A deleted group whose offsets are later committed by a simple consumer loads."""
    coord, timer, _ = make_coordinator(partitions=[])
    p = coord.partition_for("g")
    from odradek.protocol.group_records import GroupValue
    records = [encode_group_metadata("g", GroupValue("consumer", 3, None, None)),
               encode_group_metadata("g", None)]
    if value:
        records.append(encode_offset_commit("g", "t", 0, OffsetValue(8, value, 1)))
    coord.load_partition(p, records)
    group = coord.manager.get_group("g")
    if value:
        assert group.generation_id == 0 and fetched(coord)[1][TP][0] == 8
    else:
        assert group is None
