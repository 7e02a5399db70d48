"""The replication throttle (KIP-73): the sampled rate, which replicas a topic's lists throttle, and
the leader's Fetch answer to a throttled follower."""
from __future__ import annotations

import pytest
from broker_fixtures import Broker, batch, call, fetch_body, produce_body

from odradek.broker.apis import fetch, produce
from odradek.broker.config.kafka_config import LogConfig
from odradek.broker.replication.replication_quota import UNLIMITED, ReplicationQuota, is_throttled


def test_the_rate_counts_at_least_ten_windows_and_forgets_after_eleven():
    q = ReplicationQuota(limit=100)
    assert q.enabled and q.rate(0.0) == 0.0
    q.record(1000, 0.0)
    assert q.rate(0.0) == pytest.approx(100.0)      # 1000 B over the 10 s minimum
    assert not q.is_exceeded(0.0)
    q.record(100, 0.5)
    assert q.rate(0.5) == pytest.approx(1100 / 10.5)  # the elapsed half window counts too
    assert q.is_exceeded(0.5)
    q.record(2000, 12.0)                            # the first window is gone
    assert q.rate(12.0) == pytest.approx(200.0)
    assert not q.is_exceeded(30.0)                  # everything forgotten
    assert not ReplicationQuota().enabled and ReplicationQuota().limit == UNLIMITED


def test_throttled_replica_lists():
    assert is_throttled(["*"], 7, 3)
    assert is_throttled(["0:1", "1:2"], 1, 2) and not is_throttled(["0:1", "1:2"], 1, 1)
    assert not is_throttled([], 0, 1) and not is_throttled(None, 0, 1)
    assert not is_throttled(["x:1", "0:"], 0, 1)     # malformed entries throttle nothing


@pytest.fixture
def leader(tmp_path):
    b = Broker(tmp_path, broker_id=1)
    b.lead("t", replicas=[1, 2], isr=[1])
    b.rm.log_configs["t"] = LogConfig.from_broker(b.config, {"leader.replication.throttled.replicas": "0:1"})
    for _ in range(4):
        r = call(b, produce, 8, produce_body("t", batch(10, b"x" * 500), acks=1))
        assert r.responses[0].partition_responses[0].error_code == 0
    try:
        yield b
    finally:
        b.close()


def records_of(b: Broker, replica_id: int, offset: int = 0) -> bytes:
    r = call(b, fetch, 11, fetch_body("t", offset=offset, replica_id=replica_id, partition_max_bytes=6000))
    p = r.responses[0].partition_responses[0]
    assert p.error_code == 0
    return p.record_set or b""


def test_a_follower_outside_the_isr_gets_nothing_while_the_leader_quota_is_exceeded(leader):
    leader.rm.leader_quota.limit = 100           # B/s: one fetch of ~5 kB exceeds it
    first = records_of(leader, 2)
    assert first
    assert leader.rm.leader_quota.rate(leader.clock.seconds()) > 100
    assert records_of(leader, 2, offset=10) == b""          # throttled: no data, no error
    assert records_of(leader, -1, offset=10)                # consumers are not throttled
    leader.clock.advance(60)                                # the quota recovers
    assert records_of(leader, 2, offset=10)


def test_in_sync_followers_and_unlisted_partitions_are_never_throttled(leader):
    leader.rm.leader_quota.limit = 1
    leader.rm.leader_quota.record(10_000, leader.clock.seconds())
    b = leader
    b.lead("t", replicas=[1, 2], isr=[1, 2], leader_epoch=1)       # follower 2 is in the ISR now
    b.rm.log_configs["t"] = LogConfig.from_broker(b.config, {"leader.replication.throttled.replicas": "0:1"})
    assert records_of(b, 2)
    b.lead("t", replicas=[1, 2], isr=[1], leader_epoch=2)
    b.rm.log_configs["t"] = LogConfig.from_broker(b.config, {"leader.replication.throttled.replicas": "0:3"})
    assert records_of(b, 2)                                         # the list names another broker
