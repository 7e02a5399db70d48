"""kill -9 of the group coordinator: members find the new coordinator (the new leader of the
group's ``__consumer_offsets`` partition, which loads it from its replica) and the committed
offsets are intact."""
from __future__ import annotations

import time

import pytest

from groups_support import (CLIENTS, GROUP_OVERRIDES, Members, committed, create_topic, find_coordinator,
                            produce, wait_for_coordinator, wait_until)

OVERRIDES = {**GROUP_OVERRIDES, "replica.lag.time.max.ms": 6000}


@pytest.fixture
def members(tmp_path):
    m = Members(tmp_path)
    try:
        yield m
    finally:
        m.stop_all()


@pytest.mark.parametrize("client", CLIENTS)
def test_coordinator_kill9(cluster_factory, members, client):
    cluster = cluster_factory(brokers=3, overrides=OVERRIDES)
    topic, group = "payments", f"failover-{client}"
    create_topic(cluster, topic, 3)
    old = wait_for_coordinator(cluster, group)
    first = [f"a{i}" for i in range(150)]
    produce(cluster, topic, first, partitions=3)
    try:
        ms = [members.start(client, cluster, group, topic, f"m{i}", commit="after", session_ms=6000)
              for i in range(2)]
        done = {0: 50, 1: 50, 2: 50}
        wait_until(lambda: committed(cluster, group, topic, 3) == done, 90, "commits of the first records")
        seen = lambda: {ev["v"] for m in ms for ev in m.events("rec")}  # noqa: E731
        assert seen() >= set(first)

        t0 = time.monotonic()
        cluster.kill_broker(old)
        new = wait_until(lambda: (n := find_coordinator(cluster, group)) not in (None, old) and n, 90,
                         "a new coordinator")
        wait_until(lambda: committed(cluster, group, topic, 3) == done, 90,
                   "the committed offsets on the new coordinator")
        t_failover = time.monotonic() - t0

        second = [f"b{i}" for i in range(60)]
        produce(cluster, topic, second, partitions=3)
        wait_until(lambda: seen() >= set(second), 120, "members consume after the failover")
        wait_until(lambda: committed(cluster, group, topic, 3) == {0: 70, 1: 70, 2: 70}, 120,
                   "members commit to the new coordinator")
        assert all(m.alive for m in ms)
        print(f"\n[{client}] coordinator {old} -> {new}: offsets readable again after {t_failover:.2f}s")
    except BaseException:
        print(members.dump())
        raise
