"""Fetch v12 (KIP-595's truncation on fetch, as Kafka 2.8's Partition.readRecords answers it):
a fetcher's last fetched epoch checked against the leader's epoch cache."""
from __future__ import annotations

import pytest

from odradek.broker.apis import fetch, produce
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import iter_records

from broker_fixtures import Broker, batch, call, call_deferred, fetch_body, produce_body


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path, **{"replica.lag.time.max.ms": 30000})
    # epoch 3 holds offsets 0-2, epoch 5 offsets 3-4 (log end 5)
    b.lead("t", leader_epoch=3, replicas=[1, 2], isr=[1])
    assert call(b, produce, 8, produce_body("t", batch(3))).responses[0].partition_responses[0].error_code == 0
    b.lead("t", leader_epoch=5, replicas=[1, 2], isr=[1])
    assert call(b, produce, 8, produce_body("t", batch(2))).responses[0].partition_responses[0].error_code == 0
    yield b
    b.close()


def v12(offset: int, last_fetched_epoch: int, replica_id: int = -1, **kw) -> dict:
    body = fetch_body("t", offset=offset, replica_id=replica_id, **kw)
    body["topics"][0]["partitions"][0]["last_fetched_epoch"] = last_fetched_epoch
    return body


def part(resp):
    return resp.responses[0].partition_responses[0]


def test_a_log_that_agrees_reads_as_before(broker):
    p = part(call(broker, fetch, 12, v12(3, 3)))
    assert p.error_code == 0 and [r.offset for r in iter_records(p.record_set)] == [3, 4]
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (-1, -1)
    assert (p.current_leader.leader_id, p.snapshot_id.end_offset) == (-1, -1)   # unset in ZK mode
    p = part(call(broker, fetch, 12, v12(0, -1)))   # not sent: no check
    assert [r.offset for r in iter_records(p.record_set)] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("offset,epoch,diverging", [
    (4, 3, (3, 3)),    # epoch 3 ended at 3 here: the fetcher has offsets of epoch 3 we never had
    (4, 4, (3, 3)),    # epoch 4 never led here: the largest below it is 3, ending at 3
    (2, 1, (1, 0)),    # an epoch before any here ends where the first one starts
])
def test_a_diverged_log_gets_the_epoch_end_and_no_data(broker, offset, epoch, diverging):
    p = part(call(broker, fetch, 12, v12(offset, epoch)))
    assert p.error_code == 0 and not p.record_set
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == diverging
    assert (p.high_watermark, p.log_start_offset) == (5, 0)


def test_an_epoch_the_leader_cannot_place_is_out_of_range(broker):
    assert part(call(broker, fetch, 12, v12(5, 9))).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # KIP-320 fencing comes first
    assert part(call(broker, fetch, 12, v12(5, 9, current_leader_epoch=4))).error_code == \
        ErrorCode.FENCED_LEADER_EPOCH


def test_a_diverged_follower_is_answered_at_once_and_not_recorded(broker):
    rm = broker.rm
    d = call_deferred(broker, fetch, 12, v12(4, 4, replica_id=2, max_wait_ms=500))
    got: list = []
    d.addCallback(got.append)
    assert got, "a diverged fetch waits for nothing"
    assert (part(got[0]).diverging_epoch.epoch, part(got[0]).diverging_epoch.end_offset) == (3, 3)
    assert rm.partitions[("t", 0)].remote[2].leo == -1     # its offset 4 is no LEO of ours
    assert rm.partitions[("t", 0)].isr == [1]
    # once truncated to 3 and fetching with epoch 3, it reads and is recorded
    p = part(call(broker, fetch, 12, v12(3, 3, replica_id=2)))
    assert [r.offset for r in iter_records(p.record_set)] == [3, 4]
    assert rm.partitions[("t", 0)].remote[2].leo == 3


def test_a_parked_fetch_is_still_parked_when_its_epoch_agrees(broker):
    d = call_deferred(broker, fetch, 12, v12(5, 5, max_wait_ms=500, min_bytes=1))
    got: list = []
    d.addCallback(got.append)
    assert not got
    broker.clock.advance(0.6)
    assert got and not part(got[0]).record_set and part(got[0]).error_code == 0
