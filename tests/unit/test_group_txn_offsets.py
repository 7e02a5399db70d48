"""Transactional offset commits in the group coordinator: pending until the marker,
commit/abort, ordering against plain commits, generation checks (TxnOffsetCommit v3),
expiry, and replaying __consumer_offsets with transactional and control batches; then
the TxnOffsetCommit handler with WriteTxnMarkers over a real log and replica manager."""
from __future__ import annotations

import struct

import pytest

from odradek.broker.apis import offset_fetch, txn_offset_commit, write_txn_markers
from odradek.broker.group import CommitOffset, GroupCoordinator
from odradek.broker.group import assignment_protocol as cp
from odradek.broker.group.metadata import GroupState
from odradek.broker.group.offsets import GROUP_METADATA_TOPIC
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.group_records import OffsetKey, OffsetValue
from odradek.protocol.record_batch import compute_crc, validate
from odradek.protocol.records import iter_batches

from broker_fixtures import call, call_deferred
from test_broker_group_apis import GroupBroker, _result, errors_of, stable_member
from test_group_harness import FakeLog, FakeTimer, join, make_coordinator

S = GroupState
TP = ("t", 0)
TP1 = ("t", 1)
PID, EPOCH = 4000, 3
DAY = 24 * 3600 * 1000


def txn_commit(coord, group="g", offsets=None, pid=PID, epoch=EPOCH, member="",
               instance=None, generation=-1):
    return coord.handle_txn_commit_offsets(group, pid, epoch, member, instance, generation,
                                           offsets or {TP: CommitOffset(42, "txn")})


def commit(coord, group="g", offsets=None, member="", generation=-1):
    return coord.handle_commit_offsets(group, member, None, generation,
                                       offsets or {TP: CommitOffset(7, "plain")})


def committed(coord, group="g", partitions=None):
    """What OffsetFetch answers: {tp: (offset, metadata)} of committed offsets."""
    r = coord.handle_fetch_offsets(group, partitions)
    assert r.error_code == E.NONE
    return {tp: (o.committed_offset, o.metadata) for tp, o in r.offsets.items()
            if o.committed_offset != -1}


def end_txn(coord, group="g", commit_=True, pid=PID):
    coord.on_txn_marker_written(coord.partition_for(group), pid, commit_)


def reload(coord, log, timer, chunks=False):
    """A fresh coordinator (a failover) loading every partition from ``log``."""
    fresh = GroupCoordinator(coord.config, FakeTimer(timer.now), FakeLog())
    fresh.startup(periodic_expiry=False)
    for p in range(coord.config.offsets_partitions):
        assert fresh.on_elected(p)
        for batch in (log.batches.get(p, []) if chunks else [log.blob(p)]):
            fresh.load_batches(p, batch)
        fresh.finish_loading(p)
    return fresh


def consumer_group(coord, timer, group="g", n=2, instance=None):
    sub = cp.encode_subscription(["t"])
    joins = [join(coord, group, client_id=f"c{i}", protocols=[("range", sub)],
                  instance_id=instance if i == 0 else None) for i in range(n)]
    timer.advance(0)
    ids = [j.result.member_id for j in joins]
    leader = joins[0].result.leader
    for m, inst in zip(ids, [instance] + [None] * (n - 1)):
        coord.handle_sync_group(group, 1, m, inst,
                                {x: b"a" for x in ids} if m == leader else {})
    return ids


# --- pending until the marker ----------------------------------------------------------

def test_txn_offsets_are_pending_until_commit_marker():
    coord, timer, log = make_coordinator()
    c = txn_commit(coord, offsets={TP: CommitOffset(42, "txn", leader_epoch=5),
                                   TP1: CommitOffset(43, None)})
    assert c.result == {TP: E.NONE, TP1: E.NONE}
    assert committed(coord) == {} and committed(coord, partitions=[TP]) == {}
    stable = coord.handle_fetch_offsets("g", [TP], require_stable=True)
    assert stable.offsets[TP].error_code == E.UNSTABLE_OFFSET_COMMIT
    # an unknown group is created Empty (a "simple" group) for the transaction
    group = coord.manager.get_group("g")
    assert group.state is S.EMPTY and group.protocol_type is None
    # one transactional batch of the producer, base sequence -1
    p = coord.partition_for("g")
    [(header, records)] = list(iter_batches(log.blob(p)))
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (PID, EPOCH, -1)
    assert [OffsetKey("g", *tp) for tp in (TP, TP1)] == \
        [k for k, _ in log.decoded(p)]
    end_txn(coord, "g")
    assert committed(coord) == {TP: (42, "txn"), TP1: (43, "")}
    r = coord.handle_fetch_offsets("g", [TP])
    assert r.offsets[TP].committed_leader_epoch == 5
    assert coord.handle_fetch_offsets("g", [TP], require_stable=True).offsets[TP].error_code \
        == E.NONE
    assert coord.manager.open_groups_for_producer == {}


def test_abort_marker_drops_the_offsets():
    coord, timer, log = make_coordinator()
    commit(coord)                              # a plain commit first: 7
    txn_commit(coord)
    end_txn(coord, commit_=False)
    assert committed(coord) == {TP: (7, "plain")}
    assert not coord.manager.get_group("g").pending_txn_offsets
    end_txn(coord, commit_=True)               # a late duplicate marker changes nothing
    assert committed(coord) == {TP: (7, "plain")}


def test_markers_only_touch_their_producer_and_partition():
    coord, timer, log = make_coordinator()
    txn_commit(coord, "g", {TP: CommitOffset(1)}, pid=1)
    txn_commit(coord, "g", {TP1: CommitOffset(2)}, pid=2)
    other = next(f"h{i}" for i in range(100)
                 if coord.partition_for(f"h{i}") != coord.partition_for("g"))
    txn_commit(coord, other, {TP: CommitOffset(3)}, pid=1)
    assert coord.manager.open_groups_for_producer == {1: {"g", other}, 2: {"g"}}
    end_txn(coord, "g", True, pid=1)           # the marker on g's partition only
    assert committed(coord, "g") == {TP: (1, "")}
    assert committed(coord, other) == {}
    end_txn(coord, "g", False, pid=2)
    assert committed(coord, "g") == {TP: (1, "")}
    end_txn(coord, other, True, pid=1)
    assert committed(coord, other) == {TP: (3, "")}
    assert coord.manager.open_groups_for_producer == {}


def test_txn_commit_errors():
    coord, timer, log = make_coordinator(offset_metadata_max_bytes=4)
    c = txn_commit(coord, offsets={TP: CommitOffset(1, "12345"), TP1: CommitOffset(2, "1234")})
    assert c.result == {TP: E.OFFSET_METADATA_TOO_LARGE, TP1: E.NONE}
    assert txn_commit(coord, "").result == {TP: E.INVALID_GROUP_ID}   # unlike OffsetCommit
    for produce_error, answer in [(E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
                                  (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
                                  (E.INVALID_PRODUCER_EPOCH, E.INVALID_PRODUCER_EPOCH),
                                  (E.MESSAGE_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE)]:
        log.error = produce_error
        assert txn_commit(coord, "h", pid=9).result == {TP: answer}
        assert coord.manager.get_group("h").pending_txn_offsets == {}
        assert 9 not in coord.manager.open_groups_for_producer
    log.error = E.NONE
    end_txn(coord, "g")
    assert committed(coord) == {TP1: (2, "1234")}


def test_coordinator_state_errors():
    coord, timer, log = make_coordinator(partitions=[])
    assert txn_commit(coord).result == {TP: E.NOT_COORDINATOR}
    p = coord.partition_for("g")
    coord.on_elected(p)
    assert txn_commit(coord).result == {TP: E.COORDINATOR_LOAD_IN_PROGRESS}
    coord.finish_loading(p)
    assert txn_commit(coord).result == {TP: E.NONE}
    coord.shutdown()
    assert txn_commit(coord).result == {TP: E.COORDINATOR_NOT_AVAILABLE}


def test_answer_waits_for_the_append():
    coord, timer, log = make_coordinator()
    log.manual = True
    c = txn_commit(coord)
    assert not c.done
    log.release()
    assert c.result == {TP: E.NONE}
    end_txn(coord)
    assert committed(coord) == {TP: (42, "txn")}


def test_marker_before_the_append_completed_skips_the_record():
    """An abort by timeout can race an in-flight TxnOffsetCommit: nothing is installed."""
    coord, timer, log = make_coordinator()
    log.manual = True
    c = txn_commit(coord)
    end_txn(coord, commit_=True)
    log.release()
    assert c.result == {TP: E.NONE} and committed(coord) == {}


# --- ordering against plain commits (by log offset) ------------------------------------

def test_plain_commit_written_after_the_txn_record_wins():
    coord, timer, log = make_coordinator()
    txn_commit(coord)                          # log offset 0
    commit(coord)                              # log offset 1, visible at once
    assert committed(coord) == {TP: (7, "plain")}
    end_txn(coord)                             # the txn record is older: the plain one stays
    assert committed(coord) == {TP: (7, "plain")}


def test_txn_record_written_after_the_plain_commit_wins():
    coord, timer, log = make_coordinator()
    commit(coord)                              # log offset 0
    txn_commit(coord)                          # log offset 1
    assert committed(coord) == {TP: (7, "plain")}
    end_txn(coord)
    assert committed(coord) == {TP: (42, "txn")}


def test_order_is_the_log_order_not_the_completion_order():
    coord, timer, log = make_coordinator()
    log.manual = True
    c1 = txn_commit(coord)
    c2 = commit(coord)
    log.release()                              # txn at 0, plain at 1
    assert c1.result == c2.result == {TP: E.NONE}
    end_txn(coord)
    assert committed(coord) == {TP: (7, "plain")}


# --- generation checks (TxnOffsetCommit v3) --------------------------------------------

def test_v3_member_and_generation_checks():
    coord, timer, log = make_coordinator()
    m0, m1 = consumer_group(coord, timer, instance="inst")
    assert txn_commit(coord, member=m1, generation=1).result == {TP: E.NONE}
    assert txn_commit(coord, member=m1, generation=0).result == {TP: E.ILLEGAL_GENERATION}
    assert txn_commit(coord, member="nobody", generation=1).result == {TP: E.UNKNOWN_MEMBER_ID}
    assert txn_commit(coord, member="nobody", instance="inst",
                      generation=1).result == {TP: E.FENCED_INSTANCE_ID}
    assert txn_commit(coord, member=m0, instance="inst", generation=1).result == {TP: E.NONE}
    # v0-2 (and v3 without a member): no member checks, even for a Stable group
    assert txn_commit(coord).result == {TP: E.NONE}
    assert txn_commit(coord, generation=1).result == {TP: E.NONE}
    assert txn_commit(coord, generation=5).result == {TP: E.ILLEGAL_GENERATION}
    # still accepted while the group rebalances (PreparingRebalance/CompletingRebalance)
    join(coord, client_id="new", protocols=[("range", cp.encode_subscription(["t"]))])
    assert coord.manager.get_group("g").state is S.PREPARING_REBALANCE
    assert txn_commit(coord, member=m1, generation=1).result == {TP: E.NONE}
    coord.manager.get_group("g").transition_to(S.DEAD)
    assert txn_commit(coord, member=m1, generation=1).result == {TP: E.COORDINATOR_NOT_AVAILABLE}


# --- expiry and deletion ---------------------------------------------------------------

def test_group_with_pending_txn_offsets_is_not_removed():
    coord, timer, log = make_coordinator(offsets_retention_ms=DAY)
    txn_commit(coord)
    timer.advance(2 * DAY)
    coord.run_expiry()
    assert coord.manager.get_group("g") is not None
    end_txn(coord, commit_=False)
    coord.run_expiry()                          # nothing left: the Empty group goes away
    assert coord.manager.get_group("g") is None
    # a committed txn offset expires like any other commit
    txn_commit(coord, "h")
    end_txn(coord, "h")
    assert coord.run_expiry() == 0 and committed(coord, "h") == {TP: (42, "txn")}
    timer.advance(DAY)
    assert coord.run_expiry() == 1 and coord.manager.get_group("h") is None


def test_delete_group_with_pending_txn_offsets():
    coord, timer, log = make_coordinator()
    commit(coord)
    txn_commit(coord)
    assert coord.handle_delete_groups(["g"]) == {"g": E.NONE}
    assert coord.manager.get_group("g") is None
    end_txn(coord)                              # the marker after deletion is harmless
    assert committed(coord) == {}


def test_resign_forgets_pending_producers():
    coord, timer, log = make_coordinator()
    txn_commit(coord)
    coord.on_resigned(coord.partition_for("g"))
    assert coord.manager.open_groups_for_producer == {}
    end_txn(coord)                              # no longer ours: nothing to do
    assert coord.manager.get_group("g") is None


# --- loading __consumer_offsets (coordinator failover) ---------------------------------

@pytest.mark.parametrize("chunks", [False, True], ids=["one-read", "batch-per-read"])
def test_failover_replays_markers(chunks):
    coord, timer, log = make_coordinator()
    pg = coord.partition_for("g")
    txn_commit(coord, "g", {TP: CommitOffset(10, "committed")}, pid=1)
    txn_commit(coord, "g", {TP1: CommitOffset(20, "aborted")}, pid=2)
    txn_commit(coord, "g", {("u", 0): CommitOffset(30, "open")}, pid=3)
    log.marker(pg, 1, EPOCH, commit=True)
    end_txn(coord, "g", True, pid=1)
    log.marker(pg, 2, EPOCH, commit=False)
    end_txn(coord, "g", False, pid=2)
    # an offsets-only group whose only commit is still in an open transaction
    txn_commit(coord, "pending-only", {TP: CommitOffset(5)}, pid=4)

    fresh = reload(coord, log, timer, chunks)
    assert committed(fresh, "g") == {TP: (10, "committed")} == committed(coord, "g")
    assert fresh.manager.get_group("pending-only") is not None
    assert committed(fresh, "pending-only") == {}
    assert fresh.manager.open_groups_for_producer == {3: {"g"}, 4: {"pending-only"}}
    # the open transactions end on the new coordinator
    end_txn(fresh, "g", True, pid=3)
    end_txn(fresh, "pending-only", False, pid=4)
    assert committed(fresh, "g") == {TP: (10, "committed"), ("u", 0): (30, "open")}
    assert committed(fresh, "pending-only") == {}


def test_failover_keeps_log_order_against_plain_commits():
    coord, timer, log = make_coordinator()
    pg = coord.partition_for("g")
    txn_commit(coord, "g", {TP: CommitOffset(1, "txn-old")}, pid=1)
    commit(coord, "g", {TP: CommitOffset(2, "plain-new"), TP1: CommitOffset(3, "plain-old")})
    txn_commit(coord, "g", {TP1: CommitOffset(4, "txn-new")}, pid=2)
    for pid in (1, 2):
        log.marker(pg, pid, EPOCH, commit=True)
        end_txn(coord, "g", True, pid=pid)
    expected = {TP: (2, "plain-new"), TP1: (4, "txn-new")}
    assert committed(coord) == expected
    assert committed(reload(coord, log, timer)) == expected


def test_txn_tombstone_and_unknown_control_batch_on_load():
    """A tombstone inside a transaction removes that pending offset; a control batch
    that is not a COMMIT marker ends the producer's transaction like an ABORT."""
    from odradek.protocol.control_records import build_control_batch
    from odradek.protocol.group_records import encode_offset_commit
    from odradek.protocol.records import BatchBuilder

    def txn_batch(records, pid):
        b = BatchBuilder(producer_id=pid, producer_epoch=0, is_transactional=True)
        for k, v in records:
            b.append(0, k, v)
        return b.build()

    coord, timer, _ = make_coordinator(partitions=[])
    p = coord.partition_for("g")
    value = OffsetValue(9, "m", 1)
    corrupt = bytearray(build_control_batch(2, 0, True, 0, 0))
    blob = (txn_batch([encode_offset_commit("g", "t", 0, value),
                       encode_offset_commit("g", "t", 1, value),
                       encode_offset_commit("g", "t", 1, None)], pid=1)
            + txn_batch([encode_offset_commit("g", "u", 0, value)], pid=2)
            + build_control_batch(1, 0, True, 0, 0))
    # pid 2's "marker" has an unknown control type (2): its offsets are not committed
    key_type_at = len(corrupt) - 1 - 6 - 1 - 2   # headers, value, its length, key type
    assert corrupt[key_type_at:key_type_at + 2] == b"\x00\x01"
    corrupt[key_type_at:key_type_at + 2] = b"\x00\x02"
    struct.pack_into(">I", corrupt, 17, compute_crc(corrupt, 0, len(corrupt)))
    validate(corrupt)
    coord.on_elected(p)
    coord.load_batches(p, blob + bytes(corrupt))
    coord.finish_loading(p)
    assert committed(coord) == {TP: (9, "m")}
    assert coord.manager.get_group("g").pending_txn_offsets == {}


# --- the TxnOffsetCommit handler over a real log and replica manager -------------------

@pytest.fixture
def broker(tmp_path):
    b = GroupBroker(tmp_path)
    b.lead_offsets()
    b.ctx.group_service = b.service   # the server's wiring for WriteTxnMarkers
    yield b
    b.close()


def txn_body(group="g0", offsets=None, pid=PID, epoch=EPOCH, member="", generation=-1,
             instance=None):
    topics: dict = {}
    for (topic, p), off in (offsets or {("t", 0): 42}).items():
        topics.setdefault(topic, []).append({"partition_index": p, "committed_offset": off,
                                             "committed_leader_epoch": 3,
                                             "committed_metadata": f"m{off}"})
    return {"transactional_id": "tx", "group_id": group, "producer_id": pid,
            "producer_epoch": epoch, "generation_id": generation, "member_id": member,
            "group_instance_id": instance,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def marker(broker, group, commit_, pid=PID, epoch=EPOCH):
    """WriteTxnMarkers for the group's offsets partition, as the txn coordinator sends it."""
    p = broker.service.coordinator.partition_for(group)
    d = call_deferred(broker, write_txn_markers, 1, {"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit_,
        "coordinator_epoch": 0, "topics": [{"name": GROUP_METADATA_TOPIC,
                                            "partition_indexes": [p]}]}]})
    broker.settle()
    resp = _result(d)
    return [q.error_code for m in resp.markers for t in m.topics for q in t.partitions]


def fetch_offsets(broker, group="g0") -> dict:
    resp = call(broker, offset_fetch, 5, {"group_id": group, "topics": None})
    assert resp.error_code == 0
    return {(t.name, q.partition_index): (q.committed_offset, q.metadata)
            for t in resp.topics for q in t.partitions}


def txn_commit_call(broker, version, body):
    d = call_deferred(broker, txn_offset_commit, version, body)
    broker.settle()
    return errors_of(_result(d))


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_txn_offset_commit_versions(broker, version):
    assert txn_commit_call(broker, version, txn_body(offsets={("t", 0): 5, ("t", 1): 6})) == \
        {("t", 0): 0, ("t", 1): 0}
    assert fetch_offsets(broker) == {}
    assert marker(broker, "g0", True) == [0]
    assert fetch_offsets(broker) == {("t", 0): (5, "m5"), ("t", 1): (6, "m6")}
    epoch = call(broker, offset_fetch, 5, {"group_id": "g0", "topics": [
        {"name": "t", "partition_indexes": [0]}]}).topics[0].partitions[0].committed_leader_epoch
    assert epoch == (3 if version >= 2 else -1)


def test_txn_offset_commit_abort_and_unknown_topic(broker):
    assert txn_commit_call(broker, 3, txn_body(offsets={("t", 0): 5, ("nope", 0): 1})) == \
        {("t", 0): 0, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert marker(broker, "g0", False) == [0]
    assert fetch_offsets(broker) == {}


def test_txn_offset_commit_v3_generation(broker):
    member = stable_member(broker, "g0")
    assert txn_commit_call(broker, 3, txn_body(member=member, generation=1)) == {("t", 0): 0}
    assert txn_commit_call(broker, 3, txn_body(member=member, generation=2)) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    assert txn_commit_call(broker, 3, txn_body(member="stranger", generation=1)) == \
        {("t", 0): E.UNKNOWN_MEMBER_ID}


def test_txn_offset_commit_coordinator_errors(broker):
    assert txn_commit_call(broker, 3, txn_body()) == {("t", 0): 0}   # something to load
    p = broker.service.coordinator.partition_for("g0")
    part = broker.rm.get_partition((GROUP_METADATA_TOPIC, p))
    broker.service.on_leadership_change([], [part])
    for version in range(4):
        assert txn_commit_call(broker, version, txn_body()) == {("t", 0): E.NOT_COORDINATOR}
    broker.service.elect(p, 5)   # loading until the reactor turns
    for version, code in [(0, E.COORDINATOR_NOT_AVAILABLE), (1, E.COORDINATOR_NOT_AVAILABLE),
                          (2, E.COORDINATOR_LOAD_IN_PROGRESS), (3, E.COORDINATOR_LOAD_IN_PROGRESS)]:
        resp = call(broker, txn_offset_commit, version, txn_body())
        assert errors_of(resp) == {("t", 0): code}
    broker.settle()
    broker.service.coordinator.shutdown()
    assert errors_of(call(broker, txn_offset_commit, 3, txn_body())) == \
        {("t", 0): E.COORDINATOR_NOT_AVAILABLE}


def test_stale_producer_epoch_is_refused(broker):
    assert txn_commit_call(broker, 3, txn_body(epoch=5)) == {("t", 0): 0}
    assert marker(broker, "g0", True, epoch=5) == [0]
    assert txn_commit_call(broker, 3, txn_body(offsets={("t", 0): 99}, epoch=4)) == \
        {("t", 0): E.INVALID_PRODUCER_EPOCH}
    assert fetch_offsets(broker) == {("t", 0): (42, "m42")}


def test_failover_loads_committed_but_not_aborted_txn_offsets(broker):
    groups = ("g0", "g1")
    for i, group in enumerate(groups):
        assert txn_commit_call(broker, 3, txn_body(group, {("t", 0): 10 + i}, pid=1)) == \
            {("t", 0): 0}
        assert txn_commit_call(broker, 3, txn_body(group, {("t", 1): 20 + i}, pid=2)) == \
            {("t", 1): 0}
        assert txn_commit_call(broker, 3, txn_body(group, {("u", 0): 1}, pid=3)) == \
            {("u", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    for group in groups:
        assert marker(broker, group, True, pid=1) == [0]
        assert marker(broker, group, False, pid=2) == [0]
    assert txn_commit_call(broker, 3, txn_body("g0", {("t", 1): 30}, pid=4)) == {("t", 1): 0}
    before = {g: fetch_offsets(broker, g) for g in groups}
    assert before == {"g0": {("t", 0): (10, "m10")}, "g1": {("t", 0): (11, "m11")}}
    # the offsets partitions move away and come back: everything is re-read from the log
    parts = [p for p in broker.rm.partitions.values() if p.topic == GROUP_METADATA_TOPIC]
    broker.service.on_leadership_change([], parts)
    for p in parts:
        broker.service.elect(p.partition, 9)
    broker.settle()
    assert {g: fetch_offsets(broker, g) for g in groups} == before
    # the still open transaction of producer 4 commits on the new coordinator
    assert marker(broker, "g0", True, pid=4) == [0]
    assert fetch_offsets(broker, "g0") == {("t", 0): (10, "m10"), ("t", 1): (30, "m30")}


def test_offset_fetch_v7_require_stable_waits_for_pending_txn_offsets(broker):
    """KIP-447: with require_stable, a partition whose transactional offset commit is pending
    answers UNSTABLE_OFFSET_COMMIT (the consumer retries) until the marker settles it."""
    assert txn_commit_call(broker, 3, txn_body(offsets={("t", 0): 5})) == {("t", 0): 0}

    def fetch(version: int, stable: bool) -> tuple[int, int]:
        body = {"group_id": "g0", "topics": [{"name": "t", "partition_indexes": [0]}], "require_stable": stable}
        [q] = call(broker, offset_fetch, version, body).topics[0].partitions
        return q.committed_offset, q.error_code

    assert fetch(7, True) == (-1, E.UNSTABLE_OFFSET_COMMIT)
    assert fetch(7, False) == (-1, 0) and fetch(6, False) == (-1, 0)
    assert marker(broker, "g0", True) == [0]
    assert fetch(7, True) == (5, 0)
