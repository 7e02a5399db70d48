"""Consumer groups with third-party clients (kafka-python, confluent-kafka, aiokafka) against
3 real brokers: partition sharing, rebalances on join / leave / kill -9, independent groups,
committed offsets surviving a restart, and sync-commit latency.

Every member is its own process (``group_member.py``), so it can be killed with SIGKILL.
Times printed with ``-s`` are wall-clock measurements on this machine.
"""
from __future__ import annotations

import time

import pytest

from groups_support import (CLIENTS, GROUP_OVERRIDES, Members, balanced, committed, create_topic, produce,
                            wait_for_coordinator, wait_until)

SESSION_MS = 4000


@pytest.fixture
def members(tmp_path):
    m = Members(tmp_path)
    try:
        yield m
    finally:
        m.stop_all()


def processed(ms, kind="v") -> list:
    return [ev[kind] for m in ms for ev in m.events("rec")]


@pytest.mark.parametrize("client", CLIENTS)
def test_members_share_partitions_and_rebalance(cluster_factory, members, client):
    cluster = cluster_factory(brokers=3, overrides=GROUP_OVERRIDES)
    topic, group = "events", f"share-{client}"
    create_topic(cluster, topic, 6)
    wait_for_coordinator(cluster, group)
    try:
        t0 = time.monotonic()
        ms = [members.start(client, cluster, group, topic, f"m{i}", session_ms=SESSION_MS) for i in range(3)]
        got = wait_until(lambda: balanced(ms, 6), 120, "3 members with 2 partitions each")
        t_three = time.monotonic() - t0
        assert sorted(len(a) for a in got.values()) == [2, 2, 2]

        t0 = time.monotonic()
        fourth = members.start(client, cluster, group, topic, "m3", session_ms=SESSION_MS)
        got = wait_until(lambda: balanced(ms + [fourth], 6), 120, "6 partitions over 4 members")
        t_four = time.monotonic() - t0
        assert sorted(len(a) for a in got.values()) == [1, 1, 2, 2]

        values = [f"v{i}" for i in range(120)]
        produce(cluster, topic, values, partitions=6)
        wait_until(lambda: set(processed(ms + [fourth])) >= set(values), 60, "every record consumed")
        owners = {m.name: set(m.assignment()) for m in ms + [fourth]}
        for m in ms + [fourth]:   # each member consumed only its own partitions
            assert {ev["p"] for ev in m.events("rec")} <= owners[m.name]

        t0 = time.monotonic()
        ms[0].stop()   # clean close: LeaveGroup
        rest = ms[1:] + [fourth]
        wait_until(lambda: balanced(rest, 6), 60, "rebalance after a member left")
        t_leave = time.monotonic() - t0

        t0 = time.monotonic()
        fourth.kill()  # SIGKILL: no LeaveGroup, the session timeout removes it
        got = wait_until(lambda: balanced(ms[1:], 6), 60, "rebalance after kill -9 of a member")
        t_kill = time.monotonic() - t0
        assert sorted(len(a) for a in got.values()) == [3, 3]
        assert t_kill >= SESSION_MS / 1000 * 0.9   # moved by the session timeout, not before

        more = [f"w{i}" for i in range(60)]
        produce(cluster, topic, more, partitions=6)
        wait_until(lambda: set(processed(ms[1:])) >= set(more), 60, "records after the rebalances")
        print(f"\n[{client}] 3 members joined+balanced in {t_three:.2f}s (incl. process start); "
              f"4th member {t_four:.2f}s; clean leave {t_leave:.2f}s; kill -9 {t_kill:.2f}s "
              f"(session.timeout.ms={SESSION_MS})")
    except BaseException:
        print(members.dump())
        raise


@pytest.mark.parametrize("client", CLIENTS)
def test_groups_are_independent_and_commits_survive_a_restart(cluster_factory, members, client):
    cluster = cluster_factory(brokers=3, overrides=GROUP_OVERRIDES)
    topic = "orders"
    create_topic(cluster, topic, 3)
    g1, g2 = f"billing-{client}", f"audit-{client}"
    for g in (g1, g2):
        wait_for_coordinator(cluster, g)
    first = [f"a{i}" for i in range(90)]
    produce(cluster, topic, first, partitions=3)
    try:
        a = members.start(client, cluster, g1, topic, "billing", commit="after", session_ms=SESSION_MS)
        b = members.start(client, cluster, g2, topic, "audit", commit="after", session_ms=SESSION_MS)
        for m in (a, b):   # each group receives every record
            wait_until(lambda m=m: sorted(processed([m])) == sorted(first), 90, f"{m.name} reads everything")
        wait_until(lambda: committed(cluster, g1, topic, 3) == {0: 30, 1: 30, 2: 30}, 60, "g1 commits")
        a.stop()

        second = [f"b{i}" for i in range(30)]
        produce(cluster, topic, second, partitions=3)
        again = members.start(client, cluster, g1, topic, "billing-2", commit="after", session_ms=SESSION_MS)
        wait_until(lambda: set(processed([again])) >= set(second), 90, "the restarted member reads new records")
        recs = again.events("rec")
        assert all(ev["o"] >= 30 for ev in recs), "resumed before the committed offset"
        assert sorted(ev["v"] for ev in recs) == sorted(second)   # nothing old, nothing twice
        wait_until(lambda: sorted(processed([b])) == sorted(first + second), 60, "g2 reads the new records")
    except BaseException:
        print(members.dump())
        raise
