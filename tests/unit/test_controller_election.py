"""Leader election algorithms and ISR shrink (pure)."""
from odradek.broker.controller import election as e


def test_initial_leader_is_first_live_replica_isr_all_live():
    r = e.initial_leader_and_isr([3, 1, 2], live={1, 2})
    assert (r.leader, r.isr) == (1, [1, 2])
    assert e.initial_leader_and_isr([3], live={1}).leader is None


def test_offline_election_prefers_assignment_order_in_isr_and_live():
    r = e.offline_partition_leader_election([1, 2, 3], isr=[3, 2], live={2, 3}, unclean_enabled=False)
    assert (r.leader, r.isr, r.unclean) == (2, [3, 2], False)


def test_offline_election_drops_dead_from_isr():
    r = e.offline_partition_leader_election([1, 2, 3], isr=[1, 2, 3], live={2, 3}, unclean_enabled=False)
    assert (r.leader, r.isr) == (2, [2, 3])


def test_offline_election_without_isr_member_is_clean_failure():
    r = e.offline_partition_leader_election([1, 2, 3], isr=[1], live={2, 3}, unclean_enabled=False)
    assert r.leader is None


def test_unclean_election_takes_first_live_and_isr_is_leader_only():
    r = e.offline_partition_leader_election([1, 2, 3], isr=[1], live={3, 2}, unclean_enabled=True)
    assert (r.leader, r.isr, r.unclean) == (2, [2], True)
    assert e.offline_partition_leader_election([1], [1], set(), True).leader is None


def test_preferred_election_only_head():
    assert e.preferred_replica_partition_leader_election([1, 2], [1, 2], {1, 2}).leader == 1
    assert e.preferred_replica_partition_leader_election([1, 2], [2], {1, 2}).leader is None
    assert e.preferred_replica_partition_leader_election([1, 2], [1, 2], {2}).leader is None


def test_controlled_shutdown_election_skips_shutting_down_and_shrinks_isr():
    r = e.controlled_shutdown_partition_leader_election([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1})
    assert (r.leader, r.isr) == (2, [2, 3])
    r = e.controlled_shutdown_partition_leader_election([1, 2], [1], {1, 2}, {1})
    assert r.leader is None


def test_reassign_election():
    assert e.reassign_partition_leader_election([4, 2], [2, 4], {2, 4}).leader == 4
    assert e.reassign_partition_leader_election([4, 2], [2], {2, 4}).leader == 2


def test_remove_replica_from_isr_keeps_last_member_and_drops_leader():
    assert e.remove_replica_from_isr(1, [1, 2, 3], 2) == (1, [1, 3])
    assert e.remove_replica_from_isr(1, [1, 2], 1) == (e.NO_LEADER, [2])
    assert e.remove_replica_from_isr(1, [1], 1) == (e.NO_LEADER, [1])
