"""GroupState transition table, membership bookkeeping and protocol selection."""
from __future__ import annotations

import itertools

import pytest

from odradek.broker.group.metadata import (
    TRANSITIONS, GroupMetadata, GroupState, IllegalStateTransition, MemberMetadata,
)

S = GroupState
# Kafka 2.8 GroupMetadata.validPreviousStates, written out independently
VALID_PREVIOUS = {
    S.DEAD: {S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD},
    S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
    S.STABLE: {S.COMPLETING_REBALANCE},
    S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
    S.EMPTY: {S.PREPARING_REBALANCE},
}


def test_state_names_are_kafkas():
    assert [s.value for s in S] == ["Empty", "PreparingRebalance", "CompletingRebalance",
                                    "Stable", "Dead"]


def test_table_matches_kafka():
    for src, dst in itertools.product(S, S):
        assert (dst in TRANSITIONS[src]) == (src in VALID_PREVIOUS[dst]), (src, dst)


@pytest.mark.parametrize("src,dst", list(itertools.product(S, S)))
def test_every_transition(src, dst):
    now = [100]
    group = GroupMetadata("g", lambda: now[0], state=src)
    now[0] = 200
    if src in VALID_PREVIOUS[dst]:
        group.transition_to(dst)
        assert group.state is dst and group.current_state_timestamp == 200
    else:
        with pytest.raises(IllegalStateTransition):
            group.transition_to(dst)
        assert group.state is src and group.current_state_timestamp == 100


def member(mid: str, protocols, instance=None) -> MemberMetadata:
    return MemberMetadata(mid, instance, "c", "h", 1000, 1000, "consumer", protocols)


def test_add_remove_counts_and_leader():
    group = GroupMetadata("g", lambda: 0)
    a, b = member("a", [("x", b"1"), ("y", b"2")]), member("b", [("y", b"3")])
    group.add(a, object())
    group.add(b)
    assert group.leader_id == "a" and group.protocol_type == "consumer"
    assert group.num_awaiting_join == 1 and not group.has_all_members_joined()
    assert group.supported_protocols == {"x": 1, "y": 2}
    assert group.candidate_protocols() == {"y"}
    group.remove("a")
    assert group.leader_id == "b" and group.num_awaiting_join == 0
    assert group.supported_protocols == {"y": 1}
    group.remove("b")
    assert group.leader_id is None and not group.supported_protocols


def test_supports_protocols():
    group = GroupMetadata("g", lambda: 0)
    assert group.supports_protocols("consumer", ["x"])
    assert not group.supports_protocols("", ["x"]) and not group.supports_protocols("c", [])
    group.add(member("a", [("x", b""), ("y", b"")]))
    group.transition_to(S.PREPARING_REBALANCE)
    assert group.supports_protocols("consumer", ["z", "y"])
    assert not group.supports_protocols("consumer", ["z"])
    assert not group.supports_protocols("connect", ["x"])


def test_select_protocol_votes_and_ties():
    group = GroupMetadata("g", lambda: 0)
    group.add(member("a", [("x", b""), ("y", b""), ("z", b"")]))
    group.add(member("b", [("y", b""), ("x", b"")]))
    group.add(member("c", [("y", b""), ("x", b""), ("q", b"")]))
    assert group.candidate_protocols() == {"x", "y"}
    assert group.select_protocol() == "y"          # 2 votes against 1
    tie = GroupMetadata("g", lambda: 0)
    tie.add(member("a", [("y", b""), ("x", b"")]))
    tie.add(member("b", [("x", b""), ("y", b"")]))
    assert tie.select_protocol() == "x"            # 1-1: broken by name
    with pytest.raises(ValueError):
        GroupMetadata("g", lambda: 0).select_protocol()


def test_update_member_and_static_replacement():
    group = GroupMetadata("g", lambda: 0)
    m = member("old", [("x", b"")], instance="i")
    group.add(m)
    group.static_members["i"] = "old"
    group.update_member(m, [("y", b"")], "cb")
    assert group.num_awaiting_join == 1 and group.supported_protocols == {"y": 1}
    fenced = []

    class C:
        def complete(self, v):
            fenced.append(v)
    m.join_completion = C()
    group.replace_static_member("old", "new", "i", "fenced-join", "fenced-sync")
    assert fenced == ["fenced-join"] and group.num_awaiting_join == 0
    assert group.leader_id == "new" and group.static_members == {"i": "new"}
    assert group.is_static_member_fenced("old", "i") and not group.is_static_member_fenced("new", "i")
    assert not group.is_static_member_fenced("any", None)


def test_elect_new_joined_leader():
    group = GroupMetadata("g", lambda: 0)
    group.add(member("a", [("x", b"")]))
    group.add(member("b", [("x", b"")]), object())
    assert group.maybe_elect_new_joined_leader() and group.leader_id == "b"
    group.remove("b")
    assert not group.maybe_elect_new_joined_leader()
