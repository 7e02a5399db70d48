"""AlterReplicaLogDirs on one broker: the codes, the future log, the move and its swap, a restart."""
from __future__ import annotations

import os
import shutil

import pytest
from broker_fixtures import Broker, batch, call, fetch_body, produce_body

from odradek.broker.apis import alter_replica_log_dirs, describe_log_dirs, fetch, produce
from odradek.broker.replication.log_dir_mover import ReplicaAlterLogDirsManager
from odradek.protocol.errors import ErrorCode


def make(tmp_path) -> Broker:
    dirs = f"{tmp_path}/d1,{tmp_path}/d2"
    b = Broker(tmp_path, broker_id=1, log_dirs=dirs)
    b.rm.log_dir_mover = ReplicaAlterLogDirsManager(b.rm, b.log_manager, b.clock, max_bytes=200,
                                                    delete_dir=lambda p: shutil.rmtree(p, True))
    b.rm.log_dir_mover.start()
    return b


@pytest.fixture
def broker(tmp_path):
    b = make(tmp_path)
    try:
        yield b
    finally:
        b.close()


def alter(b: Broker, moves: dict[tuple[str, int], str], version: int = 2) -> dict[tuple[str, int], int]:
    by_dir: dict[str, dict[str, list[int]]] = {}
    for (t, p), d in moves.items():
        by_dir.setdefault(d, {}).setdefault(t, []).append(p)
    resp = call(b, alter_replica_log_dirs, version, {"dirs": [
        {"path": d, "topics": [{"name": t, "partitions": ps} for t, ps in ts.items()]} for d, ts in by_dir.items()]})
    return {(r.topic_name, p.partition_index): p.error_code for r in resp.results for p in r.partitions}


def describe(b: Broker) -> dict[tuple[str, str, int, bool], tuple[int, int]]:
    resp = call(b, describe_log_dirs, 2, {"topics": None})
    return {(r.log_dir, t.name, p.partition_index, p.is_future_key): (p.partition_size, p.offset_lag)
            for r in resp.results for t in r.topics for p in t.partitions}


def produce_n(b: Broker, n: int) -> None:
    for _ in range(n):
        r = call(b, produce, 8, produce_body("t", batch(3, b"x" * 20), acks=1))
        assert r.responses[0].partition_responses[0].error_code == 0


def read_all(b: Broker) -> int:
    offset = 0
    while True:
        r = call(b, fetch, 11, fetch_body("t", offset=offset)).responses[0].partition_responses[0]
        assert r.error_code == 0
        if not r.record_set:
            return offset
        from odradek.protocol.record_batch import iter_headers
        for _, h in iter_headers(r.record_set):
            assert h.base_offset == offset
            offset = h.next_offset


def step(b: Broker) -> None:
    """One reactor turn of the mover (task.Clock would run its zero-delay reschedules at once)."""
    mover = b.rm.log_dir_mover
    if mover._call is not None and mover._call.active():
        mover._call.cancel()
    mover._tick()


def test_bad_inputs_get_kafka_codes_and_change_nothing(broker, tmp_path):
    broker.lead("t")
    d1, d2 = broker.log_manager.log_dirs
    src = broker.log_manager.log_dir_of(("t", 0))
    assert alter(broker, {("t", 0): str(tmp_path / "elsewhere")}) == {("t", 0): ErrorCode.LOG_DIR_NOT_FOUND}
    assert alter(broker, {("t", 0): "relative/d1"}) == {("t", 0): ErrorCode.LOG_DIR_NOT_FOUND}
    assert alter(broker, {("nope", 0): d2}) == {("nope", 0): ErrorCode.REPLICA_NOT_AVAILABLE}
    assert alter(broker, {("x" * 240, 0): d2}) == {("x" * 240, 0): ErrorCode.INVALID_TOPIC_EXCEPTION}
    assert alter(broker, {("t", 0): src}) == {("t", 0): ErrorCode.NONE}   # already there: nothing to do
    assert broker.log_manager.future_logs() == []
    assert sorted(os.listdir(d1) + os.listdir(d2)).count("t-0") == 1
    assert not [n for d in (d1, d2) for n in os.listdir(d) if n.endswith("-future")]
    broker.rm.offline_partitions.add(("t", 1))
    assert alter(broker, {("t", 1): d2}) == {("t", 1): ErrorCode.KAFKA_STORAGE_ERROR}


def test_preferred_dir_is_used_when_the_replica_is_created(broker):
    d1, d2 = broker.log_manager.log_dirs
    assert alter(broker, {("t", 0): d2}, version=0) == {("t", 0): ErrorCode.REPLICA_NOT_AVAILABLE}
    broker.lead("t")
    assert broker.log_manager.log_dir_of(("t", 0)) == d2
    assert broker.log_manager.future_logs() == []


def test_move_under_produce_carries_the_state_over(broker):
    broker.lead("t")
    lm = broker.log_manager
    src = lm.log_dir_of(("t", 0))
    dst = next(d for d in lm.log_dirs if d != src)
    produce_n(broker, 20)
    epochs = lm.get_log(("t", 0)).leader_epoch_cache.entries
    assert alter(broker, {("t", 0): dst}) == {("t", 0): 0}
    future = lm.get_future_log(("t", 0))
    assert future is not None and os.path.dirname(future.dir) == dst
    shown = describe(broker)
    assert shown[(dst, "t", 0, True)][1] == 60 and shown[(src, "t", 0, False)][1] == 0
    step(broker)                       # one chunk copied
    produce_n(broker, 5)               # the partition keeps serving while it moves
    assert 0 < describe(broker)[(dst, "t", 0, True)][1] < 75
    for i in range(200):
        if lm.get_future_log(("t", 0)) is None:
            break
        step(broker)
        if i % 3 == 0:
            produce_n(broker, 1)
    assert lm.get_future_log(("t", 0)) is None and lm.log_dir_of(("t", 0)) == dst
    assert sorted(os.listdir(src)) == sorted(n for n in os.listdir(src) if not n.startswith("t-0"))
    assert "t-0" in os.listdir(dst)
    log_ = lm.get_log(("t", 0))
    p = broker.rm.partitions[("t", 0)]
    assert p.log is log_ and log_.dir == os.path.join(dst, "t-0")
    assert log_.leader_epoch_cache.entries == epochs
    assert p.high_watermark == log_.log_end_offset
    assert read_all(broker) == log_.log_end_offset
    produce_n(broker, 2)
    assert read_all(broker) == log_.log_end_offset
    assert [k for k in describe(broker) if k[3]] == []


def test_a_new_move_replaces_a_running_one_and_a_restart_resumes(tmp_path):
    b = make(tmp_path)
    b.lead("t")
    lm = b.log_manager
    src = lm.log_dir_of(("t", 0))
    dst = next(d for d in lm.log_dirs if d != src)
    produce_n(b, 10)
    assert alter(b, {("t", 0): dst}) == {("t", 0): 0}
    first = lm.get_future_log(("t", 0)).dir
    assert alter(b, {("t", 0): src}) == {("t", 0): 0}     # back to where it is: the move stops
    assert lm.get_future_log(("t", 0)) is None and not os.path.exists(first)
    assert alter(b, {("t", 0): dst}) == {("t", 0): 0}
    step(b)
    b.rm.log_dir_mover.stop()
    b.close()
    b = make(tmp_path)
    try:
        lm = b.log_manager
        assert lm.get_future_log(("t", 0)) is not None and lm.log_dir_of(("t", 0)) == src
        b.lead("t", leader_epoch=1)
        for _ in range(100):
            if lm.get_future_log(("t", 0)) is None:
                break
            step(b)
        assert lm.log_dir_of(("t", 0)) == dst
        assert read_all(b) == 30
    finally:
        b.close()


def test_a_crash_between_the_swap_renames_is_completed_at_the_next_start(tmp_path):
    b = make(tmp_path)
    b.lead("t")
    lm = b.log_manager
    src = lm.log_dir_of(("t", 0))
    dst = next(d for d in lm.log_dirs if d != src)
    produce_n(b, 10)
    assert alter(b, {("t", 0): dst}) == {("t", 0): 0}
    future, current = lm.get_future_log(("t", 0)), lm.get_log(("t", 0))
    future.append_as_follower(current.read(0, 10 ** 6))    # caught up, and the swap begins:
    b.rm.log_dir_mover.stop()
    b.close()
    os.rename(os.path.join(src, "t-0"), os.path.join(src, "t-0." + "0" * 32 + "-delete"))   # the crash point
    b = make(tmp_path)
    try:
        assert b.log_manager.log_dir_of(("t", 0)) == dst and b.log_manager.future_logs() == []
        assert sorted(n for n in os.listdir(src) if n.startswith("t-0")) == []
        b.lead("t", leader_epoch=1)
        assert read_all(b) == 30
    finally:
        b.close()


def test_a_truncated_current_log_truncates_the_future_log(broker):
    broker.lead("t")
    lm = broker.log_manager
    src = lm.log_dir_of(("t", 0))
    dst = next(d for d in lm.log_dirs if d != src)
    produce_n(broker, 10)
    assert alter(broker, {("t", 0): dst}) == {("t", 0): 0}
    step(broker)
    step(broker)
    future = lm.get_future_log(("t", 0))
    assert future.log_end_offset == 6
    broker.rm.partitions[("t", 0)].truncate_to(3)
    assert future.log_end_offset == 3
    broker.rm.partitions[("t", 0)].truncate_fully_and_start_at(0)
    assert future.log_end_offset == 0


def test_the_cleaner_leaves_exactly_the_moving_partitions_alone(broker):
    from odradek.broker.log.cleaner import LogCleaner
    broker.rm.cleaner = LogCleaner(broker.log_manager)
    broker.lead("t", partitions=2)
    lm = broker.log_manager
    dst = next(d for d in lm.log_dirs if d != lm.log_dir_of(("t", 0)))
    produce_n(broker, 2)
    assert alter(broker, {("t", 0): dst}) == {("t", 0): 0}
    assert broker.rm.cleaner.paused == {("t", 0)}
    for _ in range(10):
        step(broker)
    assert lm.log_dir_of(("t", 0)) == dst and broker.rm.cleaner.paused == frozenset()


def test_without_alter_on_the_cluster_nothing_moves(broker):
    from odradek.broker.security.authorizer import AclAuthorizer
    from odradek.protocol.acl import (CLUSTER_NAME, AccessControlEntry, AclOperation as Op, AclPermissionType,
                                      PatternType, ResourcePattern, ResourceType as RT)
    broker.lead("t")
    lm = broker.log_manager
    dst = next(d for d in lm.log_dirs if d != lm.log_dir_of(("t", 0)))
    broker.ctx.authorizer = AclAuthorizer()
    assert alter(broker, {("t", 0): dst, ("t", 1): dst}) == {
        ("t", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ("t", 1): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    assert lm.future_logs() == [] and lm.preferred_log_dirs == {}
    broker.ctx.authorizer.apply({ResourcePattern(RT.CLUSTER, CLUSTER_NAME, PatternType.LITERAL): frozenset(
        {AccessControlEntry("User:ANONYMOUS", "*", Op.ALTER, AclPermissionType.ALLOW)})})
    assert alter(broker, {("t", 0): dst}) == {("t", 0): 0}
    broker.ctx.authorizer = None
