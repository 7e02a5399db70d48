"""Sans-IO replication decisions: truncation, out-of-range, follower fetch state, HW, ISR
shrink/expand, ISR-change propagation timing (Kafka 2.8 classic path)."""
from __future__ import annotations

import pytest

from odradek.broker.replication.isr_propagation import IsrChangePropagation
from odradek.broker.log.epoch_cache import LeaderEpochFileCache
from odradek.broker.metadata_cache import PartitionMetadata
from odradek.broker.replication.partition import Partition, RemoteReplica
from odradek.broker.replication.replica_fetcher import (complete_batches, fetcher_id, java_string_hash, out_of_range_action,
                                            truncation_offset)
from odradek.protocol.errors import ErrorCode

from broker_fixtures import batch


def cache_with(tmp_path, entries, name="c"):
    c = LeaderEpochFileCache(str(tmp_path / name))
    for e, o in entries:
        c.assign(e, o)
    return c


# ---------------------------------------------------------------- truncation

def test_truncate_to_leader_end_of_common_epoch(tmp_path):
    # follower: epoch 1 from 0, epoch 2 from 10, LEO 15; leader knows epoch 2 ending at 12
    f = cache_with(tmp_path, [(1, 0), (2, 10)])
    assert truncation_offset(2, 12, 5, 15, lambda e: f.end_offset_for(e, 15)) == (12, True)


def test_old_leader_with_divergent_tail(tmp_path):
    # old leader wrote epoch 1 up to 15 (only 0..9 committed); the new leader started epoch 2 at 10:
    # it answers (1, 10) for our epoch 1 → we drop 10..14
    f = cache_with(tmp_path, [(0, 0), (1, 5)])
    assert truncation_offset(1, 10, 8, 15, lambda e: f.end_offset_for(e, 15)) == (10, True)


def test_follower_behind_leader_keeps_its_log(tmp_path):
    f = cache_with(tmp_path, [(3, 0)])
    assert truncation_offset(3, 100, 0, 7, lambda e: f.end_offset_for(e, 7)) == (7, True)


def test_unknown_leader_epoch_truncates_and_asks_again(tmp_path):
    # follower epochs 1@0, 3@20 (LEO 30); leader has 1, 2, 4 and answers (2, 25) for epoch 3
    f = cache_with(tmp_path, [(1, 0), (3, 20)])
    assert truncation_offset(2, 25, 0, 30, lambda e: f.end_offset_for(e, 30)) == (20, False)
    # after truncation the follower asks with epoch 1 and the leader answers (1, 18)
    f.truncate_from_end(20)
    assert truncation_offset(1, 18, 0, 20, lambda e: f.end_offset_for(e, 20)) == (18, True)


def test_leader_epoch_below_all_follower_epochs(tmp_path):
    f = cache_with(tmp_path, [(5, 10)])
    assert truncation_offset(2, 8, 0, 20, lambda e: f.end_offset_for(e, 20)) == (8, True)


def test_leader_without_answer_uses_the_high_watermark(tmp_path):
    f = cache_with(tmp_path, [(1, 0)])
    assert truncation_offset(-1, -1, 6, 20, lambda e: f.end_offset_for(e, 20)) == (6, True)
    assert truncation_offset(-1, 9, 6, 20, lambda e: f.end_offset_for(e, 20)) == (9, True)  # v0 answer


def test_out_of_range_actions():
    assert out_of_range_action(replica_leo=50, leader_leo=40, leader_log_start=0) == ("truncate", 40)
    assert out_of_range_action(replica_leo=5, leader_leo=100, leader_log_start=30) == ("restart", 30)
    assert out_of_range_action(replica_leo=35, leader_leo=100, leader_log_start=30) == ("fetch", 35)


def test_complete_batches_drops_partial_tail():
    one, two = batch(2), batch(3)
    assert complete_batches(one + two) == one + two
    assert complete_batches(one + two[:20]) == one
    assert complete_batches(b"") == b""


def test_fetcher_id_uses_java_hash():
    assert java_string_hash("test") == 3556498
    assert java_string_hash("") == 0
    assert fetcher_id(("test", 0), 1) == 0
    assert fetcher_id(("test", 1), 4) == (31 * 3556498 + 1) % 4


# ------------------------------------------------------- follower fetch state

def test_update_fetch_state_caught_up_rules():
    r = RemoteReplica()
    r.update_fetch_state(fetch_offset=5, fetch_time_ms=1000, leader_leo=10)
    assert r.last_caught_up_time_ms < 0             # behind, and never reached a previous LEO
    r.update_fetch_state(fetch_offset=10, fetch_time_ms=2000, leader_leo=12)
    assert r.last_caught_up_time_ms == 1000         # reached the LEO seen at the previous fetch
    r.update_fetch_state(fetch_offset=12, fetch_time_ms=3000, leader_leo=12)
    assert r.last_caught_up_time_ms == 3000 and r.leo == 12


class FakeLog:
    def __init__(self, leo=0, start=0):
        self.log_end_offset, self.log_start_offset = leo, start
        self._hw = 0
        self.leader_epoch_cache = None

    def update_high_watermark(self, hw):
        self._hw = min(max(hw, self.log_start_offset), self.log_end_offset)
        return self._hw

    def awaits_sync(self, offset):   # no flush.messages group commit in these tests
        return False


def leader(isr=(1, 2, 3), replicas=(1, 2, 3), leo=10, now=0, lag=30000, hw=None):
    p = Partition("t", 0, 1, lag_time_max_ms=lag)
    p.make_leader(PartitionMetadata("t", 0, 1, 1, 5, list(isr), 3, list(replicas)), FakeLog(leo), hw, now)
    return p


def test_hw_is_min_leo_over_isr_and_never_decreases():
    p = leader(leo=10)
    assert p.high_watermark == 0
    assert not p.update_follower_fetch_state(2, 10, 100)   # 3 has not fetched yet
    assert p.update_follower_fetch_state(3, 7, 100)
    assert p.high_watermark == 7
    p.update_follower_fetch_state(3, 4, 200)               # a stale fetch never lowers the HW
    assert p.high_watermark == 7
    p.update_follower_fetch_state(3, 10, 300)
    assert p.high_watermark == 10


def test_hw_counts_recently_caught_up_non_isr_follower():
    p = leader(isr=(1, 2), leo=10, lag=1000)
    p.update_follower_fetch_state(2, 10, 100)
    assert p.high_watermark == 10
    p.log.log_end_offset = 20
    p.update_follower_fetch_state(3, 20, 200)              # 3 caught up (not in ISR): counted
    p.update_follower_fetch_state(2, 15, 300)
    assert p.high_watermark == 15


def test_shrink_decision_with_fake_clock():
    p = leader(leo=10, now=0, lag=1000)
    p.update_follower_fetch_state(2, 10, 500)
    p.update_follower_fetch_state(3, 4, 500)
    assert p.out_of_sync_replicas(1000, 1000) == set()     # 3 was caught up at become-leader (t=0)
    assert p.out_of_sync_replicas(1001, 1000) == {3}
    p.update_follower_fetch_state(3, 10, 1100)             # at the LEO again: in sync
    assert p.out_of_sync_replicas(1200, 1000) == set()
    # a follower at the leader's LEO is never out of sync, however long ago it fetched
    assert p.out_of_sync_replicas(99999, 1000) == set()


def test_expand_decision_and_pending_update():
    p = leader(isr=(1, 2), leo=10, now=0)
    p.update_follower_fetch_state(2, 10, 10)
    assert p.high_watermark == 10
    p.update_follower_fetch_state(3, 8, 20)
    assert not p.needs_expand_isr(3)                       # below the HW
    p.update_follower_fetch_state(3, 10, 30)
    assert p.needs_expand_isr(3)
    state = p.prepare_isr_update([1, 2, 3])
    assert (state.leader, state.leader_epoch, state.isr, state.zk_version) == (1, 5, [1, 2, 3], 3)
    assert not p.needs_expand_isr(3) and p.out_of_sync_replicas(10**9, 1) == set()   # one at a time
    assert p.complete_isr_update(5, [1, 2, 3], 4)
    assert (p.isr, p.zk_version, p.pending_isr) == ([1, 2, 3], 4, None)


def test_expand_needs_the_epoch_start_offset():
    p = leader(isr=(1, 2), leo=10, now=0, hw=3)
    assert p.high_watermark == 3 and p.leader_epoch_start_offset == 10
    p.update_follower_fetch_state(3, 5, 10)
    assert not p.needs_expand_isr(3)                       # ≥ HW but not ≥ epoch start


def test_isr_write_version_mismatch_keeps_isr():
    p = leader(now=0)
    p.prepare_isr_update([1, 2])
    assert not p.complete_isr_update(5, [1, 2], None)
    assert p.isr == [1, 2, 3] and p.pending_isr is None and p.zk_version == 3


def test_isr_write_ignored_after_new_epoch():
    p = leader(now=0)
    p.prepare_isr_update([1, 2])
    p.make_leader(PartitionMetadata("t", 0, 1, 1, 6, [1, 2, 3], 7, [1, 2, 3]), p.log, None, 10)
    assert not p.complete_isr_update(5, [1, 2], 8)
    assert p.isr == [1, 2, 3] and p.zk_version == 7


def test_enough_replicas_after_shrink():
    p = leader(leo=10, now=0)

    def not_asked() -> int:
        raise AssertionError("min.insync.replicas looked up while the HW is short")
    assert p.check_enough_replicas_reach_offset(10, not_asked) == (False, ErrorCode.NONE)
    p.prepare_isr_update([1])
    p.complete_isr_update(5, [1], 4)
    assert p.maybe_increment_high_watermark(10**6)
    assert p.check_enough_replicas_reach_offset(10, lambda: 2) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    assert p.check_enough_replicas_reach_offset(10, lambda: 1) == (True, ErrorCode.NONE)


def test_new_leader_resets_caught_up_times():
    p = leader(isr=(1, 2), now=5000)
    assert p.remote[2].last_caught_up_time_ms == 5000 and p.remote[3].last_caught_up_time_ms < 0
    assert p.remote[2].leo == -1


# ------------------------------------------------------- ISR propagation

def test_isr_change_propagation_blackout_and_interval():
    prop = IsrChangePropagation(now_ms=0)
    assert prop.due(100000) is None                        # nothing changed
    prop.record(("t", 0), 1000)
    assert prop.due(2500) is None and prop.due(6000) is None  # still within 5 s of the change
    assert prop.due(6001) == [("t", 0)]
    assert prop.due(9000) is None
    # changes that never stop: propagated once 60 s passed since the last propagation
    for t in range(7000, 70000, 1000):
        prop.record(("t", t % 3), t)
        out = prop.due(t + 1)
        if out:
            assert t + 1 > 6001 + 60000
            break
    else:
        pytest.fail("never propagated")
    prop.record(("x", 1), 80000)
    prop.restore([("y", 2)])
    assert prop.due(85001) == [("x", 1), ("y", 2)]
