"""Produce / Fetch / ListOffsets handlers against a real LogManager in a tmp dir."""
from __future__ import annotations

import pytest

from odradek.broker.apis import fetch, list_offsets, produce
from odradek.protocol.compression import NONE
from odradek.protocol.errors import ErrorCode
from odradek.protocol.legacy_records import build_set
from odradek.protocol.records import iter_records

from broker_fixtures import Broker, batch, call, fetch_body, produce_body


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


def _part(resp):
    return resp.responses[0].partition_responses[0]


def test_produce_then_fetch_round_trip(broker):
    broker.lead("t", partitions=2)
    r1 = _part(call(broker, produce, 8, produce_body("t", batch(3))))
    r2 = _part(call(broker, produce, 8, produce_body("t", batch(2))))
    assert (r1.error_code, r1.base_offset, r1.log_start_offset) == (0, 0, 0)
    assert (r2.error_code, r2.base_offset) == (0, 3)
    assert r1.log_append_time_ms == -1
    resp = call(broker, fetch, 11, fetch_body("t"))
    assert resp.error_code == 0 and resp.session_id == 0
    p = resp.responses[0].partition_responses[0]
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (0, 5, 5, 0)
    assert p.preferred_read_replica == -1
    recs = list(iter_records(p.record_set))
    assert [r.offset for r in recs] == [0, 1, 2, 3, 4]
    assert recs[3].value == b"v0" and recs[0].key == b"k0"
    # a fetch from the middle of the log, and at the end
    p = call(broker, fetch, 4, fetch_body("t", offset=3)).responses[0].partition_responses[0]
    assert [r.offset for r in iter_records(p.record_set)] == [3, 4]
    p = call(broker, fetch, 4, fetch_body("t", offset=5)).responses[0].partition_responses[0]
    assert p.error_code == 0 and not p.record_set


def test_produce_errors_per_partition(broker):
    broker.lead("t")
    assert _part(call(broker, produce, 8, produce_body("nope", batch()))).error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _part(call(broker, produce, 8, produce_body("t", batch(), partition=5))).error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _part(call(broker, produce, 8, produce_body("t", batch(), acks=2))).error_code == \
        ErrorCode.INVALID_REQUIRED_ACKS
    legacy = build_set(1, NONE, [(0, -1, b"k", b"v")])   # magic 1 is for Produce v0-2 only
    assert _part(call(broker, produce, 3, produce_body("t", legacy))).error_code == ErrorCode.INVALID_RECORD
    assert _part(call(broker, produce, 8, produce_body("t", batch() + batch()))).error_code == \
        ErrorCode.INVALID_RECORD
    assert _part(call(broker, produce, 8, produce_body("t", None))).error_code == ErrorCode.INVALID_RECORD


def test_corrupt_batch_leaves_log_untouched(broker):
    broker.lead("t")
    call(broker, produce, 8, produce_body("t", batch(2)))
    bad = bytearray(batch(2))
    bad[-1] ^= 0xFF  # break the CRC
    r = _part(call(broker, produce, 8, produce_body("t", bytes(bad))))
    assert r.error_code == ErrorCode.CORRUPT_MESSAGE and r.base_offset == -1
    log = broker.log_manager.get_log(("t", 0))
    assert log.log_end_offset == 2
    r = _part(call(broker, produce, 8, produce_body("t", batch(1))))
    assert (r.error_code, r.base_offset) == (0, 2)


def test_not_leader_when_follower(broker):
    broker.lead("t", replicas=[2, 1], isr=[2, 1], leader=2)
    assert _part(call(broker, produce, 8, produce_body("t", batch()))).error_code == \
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    p = call(broker, fetch, 11, fetch_body("t")).responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and p.high_watermark == -1


def test_acks_all_not_enough_replicas(tmp_path):
    b = Broker(tmp_path, min_insync_replicas=2)
    try:
        b.lead("t")
        r = _part(call(b, produce, 8, produce_body("t", batch(), acks=-1)))
        assert r.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert b.log_manager.get_log(("t", 0)).log_end_offset == 0
        r = _part(call(b, produce, 8, produce_body("t", batch(), acks=1)))
        assert r.error_code == 0
    finally:
        b.close()


def test_acks_all_rf1_completes_immediately(broker):
    broker.lead("t")
    r = _part(call(broker, produce, 8, produce_body("t", batch(4), acks=-1)))
    assert (r.error_code, r.base_offset) == (0, 0)


def test_acks_zero_has_no_response(broker):
    broker.lead("t")
    assert call(broker, produce, 8, produce_body("t", batch(), acks=0)) is None
    assert broker.log_manager.get_log(("t", 0)).log_end_offset == 3


def test_fetch_offset_out_of_range_and_leader_epoch(broker):
    broker.lead("t", leader_epoch=3)
    call(broker, produce, 8, produce_body("t", batch(2)))
    for off in (-1, 3):
        p = call(broker, fetch, 11, fetch_body("t", offset=off)).responses[0].partition_responses[0]
        assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    p = call(broker, fetch, 11, fetch_body("t", current_leader_epoch=2)).responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.FENCED_LEADER_EPOCH
    p = call(broker, fetch, 11, fetch_body("t", current_leader_epoch=4)).responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    p = call(broker, fetch, 11, fetch_body("t", current_leader_epoch=3)).responses[0].partition_responses[0]
    assert p.error_code == 0 and len(list(iter_records(p.record_set))) == 2


def test_fetch_max_bytes_gives_at_least_one_batch(broker):
    broker.lead("t", partitions=2)
    for p in (0, 1):
        for _ in range(3):
            call(broker, produce, 8, produce_body("t", batch(5, value=b"x" * 200), partition=p))
    body = fetch_body("t", max_bytes=10, partition_max_bytes=10)
    body["topics"][0]["partitions"].append(dict(body["topics"][0]["partitions"][0], partition=1))
    parts = call(broker, fetch, 11, body).responses[0].partition_responses
    first = list(iter_records(parts[0].record_set))
    assert [r.offset for r in first] == [0, 1, 2, 3, 4]  # exactly one batch despite max_bytes=10
    assert not parts[1].record_set  # the total budget is spent


def test_list_offsets(broker):
    broker.lead("t", leader_epoch=2)
    call(broker, produce, 8, produce_body("t", batch(3, timestamp=1000)))
    call(broker, produce, 8, produce_body("t", batch(3, timestamp=5000)))

    def lo(version, ts, topic="t"):
        body = {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                            "timestamp": ts, "max_num_offsets": 1}]}]}
        return call(broker, list_offsets, version, body).topics[0].partitions[0]

    p = lo(5, -1)
    assert (p.error_code, p.offset, p.timestamp, p.leader_epoch) == (0, 6, -1, 2)
    p = lo(5, -2)
    assert (p.error_code, p.offset) == (0, 0)
    p = lo(5, 4000)
    assert (p.offset, p.timestamp) == (3, 5000)  # the first record at or after 4000, as Kafka
    p = lo(5, 99999)
    assert (p.error_code, p.offset, p.timestamp) == (0, -1, -1)
    p = lo(0, -1)
    assert p.old_style_offsets == [6]
    assert lo(5, -1, topic="nope").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_idempotent_duplicate_and_gap(broker):
    broker.lead("t")
    b0 = batch(2, producer_id=7, producer_epoch=0, base_sequence=0)
    assert _part(call(broker, produce, 8, produce_body("t", b0, acks=-1))).base_offset == 0
    assert _part(call(broker, produce, 8, produce_body("t", batch(1)))).base_offset == 2
    dup = _part(call(broker, produce, 8, produce_body("t", b0, acks=-1)))
    assert (dup.error_code, dup.base_offset) == (0, 0)
    assert broker.log_manager.get_log(("t", 0)).log_end_offset == 3
    gap = batch(1, producer_id=7, producer_epoch=0, base_sequence=5)
    assert _part(call(broker, produce, 8, produce_body("t", gap))).error_code == \
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    nxt = batch(1, producer_id=7, producer_epoch=0, base_sequence=2)
    assert _part(call(broker, produce, 8, produce_body("t", nxt))).base_offset == 3
    # a producer id unknown to this leader is accepted at any sequence
    other = batch(1, producer_id=8, producer_epoch=0, base_sequence=17)
    assert _part(call(broker, produce, 8, produce_body("t", other))).error_code == 0
