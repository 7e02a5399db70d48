"""Delivery guarantees of a group consumer killed with SIGKILL at random points and restarted:
commit after processing = at-least-once (every record processed, maybe twice); commit before
processing = at-most-once (no record processed twice)."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from groups_support import GROUP_OVERRIDES, Members, committed, create_topic, produce, wait_for_coordinator, wait_until

N = 900
PARTITIONS = 3
KILLS = 4


@pytest.fixture
def members(tmp_path):
    m = Members(tmp_path)
    try:
        yield m
    finally:
        m.stop_all()


def run_with_kills(cluster, members, group: str, topic: str, commit: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    for i in range(KILLS):
        m = members.start("kafka-python", cluster, group, topic, f"{commit}-{i}", commit=commit,
                          session_ms=3000, delay_ms=2, batch=20)
        target = rng.randint(5, 120)
        wait_until(lambda: len(m.events("rec")) >= target or not m.alive, 90, f"{m.name} processing")
        m.kill()
    final = members.start("kafka-python", cluster, group, topic, f"{commit}-final", commit=commit,
                          session_ms=3000, batch=50)
    end = {p: N // PARTITIONS for p in range(PARTITIONS)}
    wait_until(lambda: committed(cluster, group, topic, PARTITIONS) == end, 180, "the final commit at the end")
    final.stop()
    return [ev["v"] for m in members.all for ev in m.events("rec")]


def test_commit_after_processing_is_at_least_once(cluster_factory, members):
    cluster = cluster_factory(brokers=3, overrides=GROUP_OVERRIDES)
    topic, group = "alo", "alo-group"
    create_topic(cluster, topic, PARTITIONS)
    wait_for_coordinator(cluster, group)
    values = [f"r{i}" for i in range(N)]
    produce(cluster, topic, values, partitions=PARTITIONS)
    try:
        seen = run_with_kills(cluster, members, group, topic, "after", seed=7)
    except BaseException:
        print(members.dump())
        raise
    assert set(seen) == set(values)
    dups = sum(c - 1 for c in Counter(seen).values())
    print(f"\nat-least-once: {len(values)} records, {dups} processed twice after {KILLS} kill -9")


def test_commit_before_processing_is_at_most_once(cluster_factory, members):
    cluster = cluster_factory(brokers=3, overrides=GROUP_OVERRIDES)
    topic, group = "amo", "amo-group"
    create_topic(cluster, topic, PARTITIONS)
    wait_for_coordinator(cluster, group)
    values = [f"r{i}" for i in range(N)]
    produce(cluster, topic, values, partitions=PARTITIONS)
    try:
        seen = run_with_kills(cluster, members, group, topic, "before", seed=11)
    except BaseException:
        print(members.dump())
        raise
    counts = Counter(seen)
    assert max(counts.values()) == 1, [v for v, c in counts.items() if c > 1][:10]
    assert set(seen) <= set(values)
    print(f"\nat-most-once: {len(values)} records, {len(values) - len(counts)} lost, 0 twice after {KILLS} kill -9")
