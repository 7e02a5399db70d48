"""Log compaction of a compacted topic on 3 brokers: many updates per key shrink to (about)
the latest value per key, a consumer reading from the beginning sees the latest state, and a
record without a key is refused (INVALID_RECORD), also by the follower that takes over (its log
was created with the topic's config from ZooKeeper, not the broker's ``delete`` default)."""
from __future__ import annotations

import signal

import pytest

from groups_support import GROUP_OVERRIDES, create_topic, wait_until
from odradek_test_support import read_partition

KEYS = 40
ROUNDS = 50
SEGMENT_BYTES = 4096
# The cleaner never touches the active segment, which may hold up to SEGMENT_BYTES of the latest
# writes (a record of these keys and values takes at least 20 bytes in a v2 batch); below it, one
# record per key is left. (The bound was 3 * KEYS, which 3 rounds in the active segment exceed:
# 40 cleaned + 120 active records when each round is one 1 KB batch.)
MOST_AFTER_CLEANING = KEYS + SEGMENT_BYTES // 20


def test_compacted_topic_keeps_the_latest_value_per_key(cluster_factory):
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError, KafkaError
    cluster = cluster_factory(brokers=3, overrides={**GROUP_OVERRIDES, "log.cleaner.backoff.ms": 300})
    topic = "profiles"
    create_topic(cluster, topic, 1, configs={"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
                                              "min.cleanable.dirty.ratio": "0.01"})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=2)
    latest = {}
    try:
        for r in range(ROUNDS):
            for k in range(KEYS):
                key, value = f"user-{k}".encode(), f"user-{k}-v{r}".encode()
                producer.send(topic, key=key, value=value, partition=0)
                latest[key] = value
            producer.flush(30)
        with pytest.raises(KafkaError) as info:
            producer.send(topic, key=None, value=b"no key", partition=0).get(timeout=30)
        assert isinstance(info.value, InvalidRecordError), info.value
    finally:
        producer.close(10)
    total = KEYS * ROUNDS
    state = wait_until(lambda: (recs := read_partition(cluster.bootstrap_servers, topic, 0)) and
                       len(recs) <= MOST_AFTER_CLEANING and recs, 120, "the compacted log to shrink")
    assert dict(state) == latest   # last write per key wins, nothing lost
    print(f"\ncompaction: {total} records -> {len(state)} for {KEYS} keys")

    old = cluster.leader(topic, 0)
    cluster.kill_broker(old, sig=signal.SIGTERM)   # controlled shutdown: a follower leads at once
    wait_until(lambda: cluster.leader(topic, 0) not in (old, None), 60, "a follower to take over")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", retries=5)
    try:
        producer.send(topic, key=b"user-0", value=b"after failover", partition=0).get(timeout=60)
        with pytest.raises(KafkaError) as info:
            producer.send(topic, key=None, value=b"no key", partition=0).get(timeout=60)
        assert isinstance(info.value, InvalidRecordError), info.value
    finally:
        producer.close(10)
