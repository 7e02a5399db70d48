"""Assignors: Kafka's documented examples, properties (hypothesis), and ConsumerProtocol bytes vs kafka-python."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.client import TopicPartition as TP
from odradek.client.assignors import (
    Assignment,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    decode_sticky_user_data,
    encode_sticky_user_data,
    resolve_assignors,
)


def subs(**members):
    return {m: Subscription(list(ts)) for m, ts in members.items()}


def tps(*names):
    out = []
    for n in names:
        topic, p = n.rsplit("p", 1)
        out.append(TP(topic, int(p)))
    return out


# -- Kafka's javadoc examples --------------------------------------------------------------------

def test_range_javadoc_example():
    got = RangeAssignor().assign({"t0": 3, "t1": 3}, subs(C0=["t0", "t1"], C1=["t0", "t1"]))
    assert got == {"C0": tps("t0p0", "t0p1", "t1p0", "t1p1"), "C1": tps("t0p2", "t1p2")}


def test_range_uneven_and_unsubscribed():
    got = RangeAssignor().assign({"t": 7, "u": 2}, subs(a=["t"], b=["t", "u"], c=["t"]))
    assert got == {"a": tps("tp0", "tp1", "tp2"), "b": tps("tp3", "tp4", "up0", "up1"), "c": tps("tp5", "tp6")}


def test_roundrobin_javadoc_examples():
    got = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, subs(C0=["t0", "t1"], C1=["t0", "t1"]))
    assert got == {"C0": tps("t0p0", "t0p2", "t1p1"), "C1": tps("t0p1", "t1p0", "t1p2")}
    got = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3},
                                      subs(C0=["t0"], C1=["t0", "t1"], C2=["t0", "t1", "t2"]))
    assert got == {"C0": tps("t0p0"), "C1": tps("t1p0"), "C2": tps("t1p1", "t2p0", "t2p1", "t2p2")}


def test_static_members_sort_first_by_instance_id():
    s = {"m-a": Subscription(["t"]), "m-b": Subscription(["t"], group_instance_id="z"),
         "m-c": Subscription(["t"], group_instance_id="y")}
    got = RangeAssignor().assign({"t": 3}, s)
    assert got == {"m-c": tps("tp0"), "m-b": tps("tp1"), "m-a": tps("tp2")}


def _sticky_round(assignor_state, partitions, members):
    """One rebalance: members carry user data from their previous assignment, as StickyAssignors do."""
    s = {}
    for m, topics in members.items():
        a = assignor_state.setdefault(m, StickyAssignor())
        s[m] = Subscription(list(topics), a.subscription_user_data(topics))
    result = StickyAssignor().assign(partitions, s)
    gen = max([a.generation for a in assignor_state.values()] + [0]) + 1
    for m in members:
        assignor_state[m].on_assignment(Assignment(result[m]), gen)
    return result


def test_sticky_javadoc_example_1():
    state: dict = {}
    parts = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
    all4 = ["t0", "t1", "t2", "t3"]
    first = _sticky_round(state, parts, {"C0": all4, "C1": all4, "C2": all4})
    assert first == {"C0": tps("t0p0", "t1p1", "t3p0"), "C1": tps("t0p1", "t2p0", "t3p1"),
                     "C2": tps("t1p0", "t2p1")}
    del state["C1"]
    second = _sticky_round(state, parts, {"C0": all4, "C2": all4})
    assert second == {"C0": tps("t0p0", "t1p1", "t3p0", "t2p0"), "C2": tps("t1p0", "t2p1", "t0p1", "t3p1")}


def test_sticky_javadoc_example_2():
    state: dict = {}
    parts = {"t0": 1, "t1": 2, "t2": 3}
    members = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    first = _sticky_round(state, parts, members)
    assert first == {"C0": tps("t0p0"), "C1": tps("t1p0", "t1p1"), "C2": tps("t2p0", "t2p1", "t2p2")}
    del members["C0"], state["C0"]
    second = _sticky_round(state, parts, members)
    assert second == {"C1": tps("t1p0", "t1p1", "t0p0"), "C2": tps("t2p0", "t2p1", "t2p2")}


def test_sticky_ignores_stale_generations_and_double_claims():
    ud_new = encode_sticky_user_data(tps("tp0", "tp1"), 5)
    ud_old = encode_sticky_user_data(tps("tp0", "tp2"), 3)
    got = StickyAssignor().assign({"t": 4}, {"a": Subscription(["t"], ud_new), "b": Subscription(["t"], ud_old)})
    assert got["a"] == tps("tp0", "tp1") and sorted(got["b"]) == tps("tp2", "tp3")
    assert decode_sticky_user_data(ud_new) == (tps("tp0", "tp1"), 5)
    # V0 user data (no generation) still decodes
    assert decode_sticky_user_data(ud_new[:-4]) == (tps("tp0", "tp1"), None)


def test_resolve_names_and_java_classes():
    names = [a.name for a in resolve_assignors(["range", "org.apache.kafka.clients.consumer.RoundRobinAssignor",
                                                StickyAssignor])]
    assert names == ["range", "roundrobin", "sticky"]
    with pytest.raises(ValueError):
        resolve_assignors(["cooperative-nonsense"])


# -- properties ------------------------------------------------------------------------------------

topic_counts = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(1, 8), min_size=1)


def _check_valid(result, partitions, subscriptions):
    seen = [tp for ps in result.values() for tp in ps]
    assert len(seen) == len(set(seen))
    subscribed = {t for s in subscriptions.values() for t in s.topics}
    assert set(seen) == {TP(t, p) for t in subscribed if t in partitions for p in range(partitions[t])}
    for m, ps in result.items():
        assert all(tp.topic in subscriptions[m].topics for tp in ps)


@settings(max_examples=150, deadline=None)
@given(topic_counts, st.integers(1, 7), st.sampled_from([RangeAssignor, RoundRobinAssignor, StickyAssignor]))
def test_all_assignors_valid_and_balanced_for_equal_subscriptions(partitions, n_members, cls):
    topics = sorted(partitions)
    s = {f"m{i}": Subscription(topics) for i in range(n_members)}
    result = cls().assign(partitions, s)
    _check_valid(result, partitions, s)
    sizes = [len(ps) for ps in result.values()]
    if cls is not RangeAssignor:  # range balances per topic only
        assert max(sizes) - min(sizes) <= 1


@settings(max_examples=150, deadline=None)
@given(topic_counts, st.integers(1, 6), st.data())
def test_sticky_keeps_partitions_on_member_add_and_remove(partitions, n_members, data):
    topics = sorted(partitions)
    total = sum(partitions.values())
    state: dict = {}
    members = {f"m{i}": topics for i in range(n_members)}
    before = _sticky_round(state, partitions, members)
    if data.draw(st.booleans()) and n_members > 1:  # remove one member
        gone = data.draw(st.sampled_from(sorted(members)))
        del members[gone], state[gone]
    else:
        members[f"m{n_members}"] = topics
    after = _sticky_round(state, partitions, members)
    _check_valid(after, partitions, {m: Subscription(t) for m, t in members.items()})
    sizes = [len(ps) for ps in after.values()]
    assert max(sizes) - min(sizes) <= 1
    # maximal stickiness: every survivor keeps min(previous, its quota) partitions
    quota_lo, extra = divmod(total, len(members))
    kept = sum(len(set(before[m]) & set(after[m])) for m in members if m in before)
    prev = sorted((len(before[m]) for m in members if m in before), reverse=True)
    best = sum(min(n, quota_lo + (1 if i < extra else 0)) for i, n in enumerate(prev))
    assert kept == best


@settings(max_examples=150, deadline=None)
@given(topic_counts, st.lists(st.sets(st.sampled_from(["a", "b", "c", "d"]), min_size=1), min_size=1, max_size=6))
def test_sticky_general_case_is_balanced(partitions, member_topics):
    s = {f"m{i}": Subscription(sorted(ts)) for i, ts in enumerate(member_topics)}
    result = StickyAssignor().assign(partitions, s)
    _check_valid(result, partitions, s)
    # balanced: no partition could move to an eligible member with two fewer partitions
    for m, ps in result.items():
        for tp in ps:
            for other, ops in result.items():
                if tp.topic in s[other].topics:
                    assert len(ps) <= len(ops) + 1


# -- ConsumerProtocol bytes vs kafka-python ---------------------------------------------------------

def test_subscription_bytes_match_kafka_python_both_ways():
    kp = pytest.importorskip("kafka.protocol.consumer.metadata")
    ours = Subscription(["orders", "pay"], b"ud", [TP("orders", 1), TP("orders", 3), TP("pay", 0)], version=1)
    theirs = kp.ConsumerProtocolSubscription(version=1, topics=["orders", "pay"], user_data=b"ud",
                                             owned_partitions=[("orders", [1, 3]), ("pay", [0])])
    assert ours.encode() == theirs.encode(version=1)
    back = kp.ConsumerProtocolSubscription.decode(ours.encode())
    assert back.topics == ["orders", "pay"] and back.user_data == b"ud"
    assert [(o.topic, list(o.partitions)) for o in back.owned_partitions] == [("orders", [1, 3]), ("pay", [0])]
    v0 = kp.ConsumerProtocolSubscription(version=0, topics=["x"], user_data=None).encode(version=0)
    assert Subscription.decode(v0) == Subscription(["x"], None, [], 0)
    assert Subscription(["x"], None, [], 0).encode() == v0


def test_assignment_bytes_match_kafka_python_both_ways():
    kp = pytest.importorskip("kafka.protocol.consumer.metadata")
    ours = Assignment([TP("t", 0), TP("t", 2), TP("u", 1)], None, version=0)
    theirs = kp.ConsumerProtocolAssignment(version=0, assigned_partitions=[("t", [0, 2]), ("u", [1])],
                                           user_data=None)
    assert ours.encode() == theirs.encode(version=0)
    back = kp.ConsumerProtocolAssignment.decode(Assignment([TP("t", 5)], b"x", version=1).encode())
    assert back.partitions() == [("t", 5)] and back.user_data == b"x"
    mine = Assignment.decode(kp.ConsumerProtocolAssignment(version=1, assigned_partitions=[("t", [4])],
                                                           user_data=b"").encode(version=1))
    assert mine.partitions == [TP("t", 4)] and mine.user_data == b""


def test_newer_versions_parse_with_the_v1_layout():
    data = Subscription(["t"], None, [TP("t", 0)], version=1).encode()
    newer = b"\x00\x03" + data[2:] + b"\x00\x00\x00\x07" + b"\xff\xff"  # v3 adds generation + rack
    assert Subscription.decode(newer).owned_partitions == [TP("t", 0)]
    assert Assignment.decode(b"").partitions == []
