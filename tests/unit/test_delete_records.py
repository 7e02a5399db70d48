"""DeleteRecords on the leader: the log start moves at once, the answer waits for the replicas."""
from __future__ import annotations

import pytest
from broker_fixtures import Broker, batch, call, call_deferred, fetch_body, produce_body

from odradek.broker.apis import delete_records, fetch, produce
from odradek.broker.config.kafka_config import LogConfig
from odradek.protocol.errors import ErrorCode


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path, broker_id=1)
    try:
        yield b
    finally:
        b.close()


def fill(b: Broker, topic: str = "t", batches: int = 4) -> None:
    for _ in range(batches):
        r = call(b, produce, 8, produce_body(topic, batch(5), acks=1))
        assert r.responses[0].partition_responses[0].error_code == 0


def body(offsets: dict[tuple[str, int], int], timeout_ms: int = 1000) -> dict:
    topics: dict[str, list[dict]] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "offset": o})
    return {"topics": [{"name": t, "partitions": ps} for t, ps in topics.items()], "timeout_ms": timeout_ms}


def results(resp) -> dict[tuple[str, int], tuple[int, int]]:
    return {(t.name, p.partition_index): (p.error_code, p.low_watermark) for t in resp.topics for p in t.partitions}


def consumer_fetch(b: Broker, offset: int) -> int:
    return call(b, fetch, 11, fetch_body("t", offset=offset)).responses[0].partition_responses[0].error_code


def test_alone_the_log_start_moves_and_the_answer_is_immediate(broker):
    broker.lead("t")
    fill(broker)                       # offsets 0..19, HW 20
    out = results(call(broker, delete_records, 2, body({("t", 0): 7})))
    assert out == {("t", 0): (0, 7)}
    assert consumer_fetch(broker, 6) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert consumer_fetch(broker, 7) == 0
    assert results(call(broker, delete_records, 1, body({("t", 0): 3}))) == {("t", 0): (0, 7)}   # never back
    assert results(call(broker, delete_records, 0, body({("t", 0): -1}))) == {("t", 0): (0, 20)}  # -1: the HW


def test_refusals_change_nothing(broker):
    broker.lead("t")
    fill(broker)
    out = results(call(broker, delete_records, 2, body({("t", 0): 21, ("t", 1): 0, ("nope", 0): 0})))
    assert out == {("t", 0): (ErrorCode.OFFSET_OUT_OF_RANGE, -1), ("t", 1): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
                   ("nope", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)}
    assert results(call(broker, delete_records, 2, body({("t", 0): -5})))[("t", 0)][0] == ErrorCode.OFFSET_OUT_OF_RANGE
    broker.rm.log_configs["t"] = LogConfig.from_broker(broker.config, {"cleanup.policy": "compact"})
    broker.rm.get_partition(("t", 0)).log.config = broker.rm.log_configs["t"]
    assert results(call(broker, delete_records, 2, body({("t", 0): 5})))[("t", 0)][0] == ErrorCode.POLICY_VIOLATION
    assert consumer_fetch(broker, 0) == 0


def follower_fetch(b: Broker, offset: int, log_start: int) -> None:
    req = fetch_body("t", offset=offset, replica_id=2)
    req["topics"][0]["partitions"][0]["log_start_offset"] = log_start
    assert call(b, fetch, 11, req).responses[0].partition_responses[0].error_code == 0


def test_the_answer_waits_until_the_follower_log_starts_there_too(broker):
    broker.lead("t", replicas=[1, 2], isr=[1])
    fill(broker)
    follower_fetch(broker, 20, 0)      # caught up; its log still starts at 0
    d = call_deferred(broker, delete_records, 2, body({("t", 0): 10}, timeout_ms=5000))
    seen: list = []
    d.addCallback(seen.append)
    assert not seen
    follower_fetch(broker, 20, 4)      # moving, not there yet
    assert not seen
    follower_fetch(broker, 20, 10)
    assert results(seen[0]) == {("t", 0): (0, 10)}


def test_a_follower_that_never_catches_up_times_the_answer_out(broker):
    broker.lead("t", replicas=[1, 2], isr=[1])
    fill(broker)
    d = call_deferred(broker, delete_records, 2, body({("t", 0): 10}, timeout_ms=3000))
    seen: list = []
    d.addCallback(seen.append)
    broker.clock.advance(3)
    assert results(seen[0]) == {("t", 0): (ErrorCode.REQUEST_TIMED_OUT, -1)}
    assert consumer_fetch(broker, 9) == ErrorCode.OFFSET_OUT_OF_RANGE   # the leader's start moved anyway
