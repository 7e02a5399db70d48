"""Purgatory behaviour with task.Clock: long-poll fetches and acks=all produces."""
from __future__ import annotations

import pytest
from twisted.internet import task

from odradek.broker.apis import fetch, produce
from odradek.broker.log import Log
from odradek.broker.replication.delayed import DelayedOperation, Purgatory
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import iter_records

from broker_fixtures import Broker, batch, call, call_deferred, fetch_body, produce_body


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


def _fired(d):
    box = []
    d.addBoth(box.append)
    return box


class _Op(DelayedOperation):
    def __init__(self, timeout_ms, ready):
        super().__init__(timeout_ms)
        self.ready = ready
        self.completions = []

    def can_complete(self):
        return self.ready[0]

    def on_complete(self):
        self.completions.append(self.expired)


def test_purgatory_completes_once_and_unwatches(broker):
    p = Purgatory("x", broker.clock)
    ready = [False]
    op = _Op(1000, ready)
    assert not p.try_complete_else_watch(op, ["a", "b"])
    assert p.check_and_complete("a") == 0
    ready[0] = True
    assert p.check_and_complete("b") == 1
    assert op.completions == [False] and p.watched() == 0
    broker.clock.advance(2)
    assert op.completions == [False]  # the timer was cancelled


def test_purgatory_expires(broker):
    p = Purgatory("x", broker.clock)
    op = _Op(500, [False])
    p.try_complete_else_watch(op, ["a"])
    broker.clock.advance(0.499)
    assert op.completions == []
    broker.clock.advance(0.002)
    assert op.completions == [True] and p.watched() == 0


@pytest.fixture
def clock():
    return task.Clock()   # a purgatory's own: nothing else scheduled on it


def test_purgatory_expires_each_op_at_its_own_deadline_with_one_timer_per_timeout(clock):
    p = Purgatory("x", clock)
    first, second, other, done = _Op(500, [False]), _Op(500, [False]), _Op(200, [False]), _Op(500, [False])
    p.try_complete_else_watch(first, ["a"])
    clock.advance(0.1)
    p.try_complete_else_watch(second, ["a"])
    p.try_complete_else_watch(other, ["b"])
    p.try_complete_else_watch(done, ["c"])
    assert len(clock.getDelayedCalls()) == 2        # one per timeout, not one per op
    done.ready[0] = True
    assert p.check_and_complete("c") == 1
    clock.advance(0.2)                              # t=0.3: the 200 ms op, parked at 0.1
    assert other.completions == [True] and first.completions == [] and second.completions == []
    clock.advance(0.2)                              # t=0.5: the first 500 ms op only
    assert first.completions == [True] and second.completions == []
    clock.advance(0.099)
    assert second.completions == []
    clock.advance(0.002)                            # t=0.601: the second, 500 ms after it was parked
    assert second.completions == [True] and done.completions == [False]
    assert p.watched() == 0 and clock.getDelayedCalls() == []


def test_purgatory_drops_a_timeout_s_timer_once_its_ops_completed(clock):
    p = Purgatory("x", clock)
    ready = [False]
    ops = [_Op(30000, ready) for _ in range(3)]
    for op in ops:
        p.try_complete_else_watch(op, ["a"])
    ready[0] = True
    assert p.check_and_complete("a") == 3
    assert clock.getDelayedCalls() == []            # nothing left to time out: no timer either
    late = _Op(30000, [False])
    p.try_complete_else_watch(late, ["a"])                 # a new timer, for the new op's deadline
    clock.advance(29.999)
    assert late.completions == []
    clock.advance(0.002)
    assert late.completions == [True]


def test_an_op_parked_by_an_expiring_op_is_timed_from_when_it_was_parked(clock):
    p = Purgatory("x", clock)
    later = _Op(500, [False])

    class Chained(_Op):
        def on_complete(self):
            super().on_complete()
            p.try_complete_else_watch(later, ["b"])

    chained = Chained(500, [False])
    p.try_complete_else_watch(chained, ["a"])
    clock.advance(0.5)
    assert chained.completions == [True] and later.completions == []
    clock.advance(0.499)
    assert later.completions == []
    clock.advance(0.002)
    assert later.completions == [True] and clock.getDelayedCalls() == []


def test_purgatory_shutdown_expires_everything_and_leaves_no_timer(clock):
    p = Purgatory("x", clock)
    ops = [_Op(t, [False]) for t in (100, 100, 5000)]
    for op in ops:
        p.try_complete_else_watch(op, ["a"])
    p.shutdown()
    assert [op.completions for op in ops] == [[True]] * 3
    assert p.watched() == 0 and clock.getDelayedCalls() == []


def test_long_poll_fetch_woken_by_append(broker):
    broker.lead("t")
    box = _fired(call_deferred(broker, fetch, 11, fetch_body("t", max_wait_ms=5000)))
    assert box == [] and broker.rm.fetch_purgatory.watched() == 1
    broker.clock.advance(1)
    assert box == []
    call(broker, produce, 8, produce_body("t", batch(2)))
    assert len(box) == 1
    p = box[0].responses[0].partition_responses[0]
    assert [r.offset for r in iter_records(p.record_set)] == [0, 1]
    assert broker.rm.fetch_purgatory.watched() == 0


def test_long_poll_fetch_times_out_empty(broker):
    broker.lead("t")
    box = _fired(call_deferred(broker, fetch, 11, fetch_body("t", max_wait_ms=500)))
    broker.clock.advance(0.4)
    assert box == []
    broker.clock.advance(0.2)
    p = box[0].responses[0].partition_responses[0]
    assert p.error_code == 0 and not p.record_set and p.high_watermark == 0


def test_long_poll_min_bytes(broker):
    broker.lead("t")
    box = _fired(call_deferred(broker, fetch, 11, fetch_body("t", max_wait_ms=5000, min_bytes=1000)))
    call(broker, produce, 8, produce_body("t", batch(1)))
    assert box == []  # ~80 bytes are not enough
    call(broker, produce, 8, produce_body("t", batch(5, value=b"y" * 300)))
    assert len(box) == 1
    assert len(list(iter_records(box[0].responses[0].partition_responses[0].record_set))) == 6


def test_a_parked_fetch_counts_its_min_bytes_from_positions_and_answers_at_a_roll(tmp_path, monkeypatch):
    """Kafka's DelayedFetch: the bytes a parked fetch waits for are counted from batch positions,
    without reading them (each append checks it: a read would cost up to max_bytes per append),
    and a fetch whose offset is no longer in the segment the log end is in answers at once."""
    b = Broker(tmp_path, log_segment_bytes=4000)
    try:
        b.lead("t")
        reads: list[tuple] = []
        read = Log.read
        monkeypatch.setattr(Log, "read", lambda log, *args, **kw: (reads.append(args), read(log, *args, **kw))[1])
        box = _fired(call_deferred(b, fetch, 11, fetch_body("t", max_wait_ms=5000, min_bytes=1200)))
        reads.clear()
        for _ in range(2):
            call(b, produce, 8, produce_body("t", batch(1, value=b"x" * 500)))
            assert box == [] and reads == []   # ~570 bytes a batch: not enough, and nothing read to know it
        call(b, produce, 8, produce_body("t", batch(1, value=b"x" * 500)))
        assert len(box) == 1 and len(reads) == 1   # enough: answered, with the one read of its answer
        assert len(list(iter_records(box[0].responses[0].partition_responses[0].record_set))) == 3
        log_ = b.rm.partitions[("t", 0)].log
        box = _fired(call_deferred(b, fetch, 11, fetch_body("t", offset=3, max_wait_ms=5000, min_bytes=100_000)))
        while len(log_.segments) == 1:
            assert box == []
            call(b, produce, 8, produce_body("t", batch(1, value=b"x" * 500)))
        assert len(box) == 1   # the append that rolled the log answered it, with what it has
        records = list(iter_records(box[0].responses[0].partition_responses[0].record_set))
        assert records and records[0].offset == 3
    finally:
        b.close()


def test_long_poll_answers_when_leadership_moves(broker):
    broker.lead("t")
    box = _fired(call_deferred(broker, fetch, 11, fetch_body("t", max_wait_ms=5000)))
    from odradek.broker.metadata_cache import PartitionMetadata
    broker.rm.become_leader_or_follower(2, [PartitionMetadata("t", 0, 2, 2, 1, [2, 1], 1, [2, 1])])
    assert box and box[0].responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_acks_all_waits_for_follower(broker):
    broker.lead("t", replicas=[1, 2], isr=[1, 2])
    box = _fired(call_deferred(broker, produce, 8, produce_body("t", batch(3), acks=-1, timeout_ms=3000)))
    assert box == [] and broker.rm.produce_purgatory.watched() == 1
    # the follower fetches at 0 (nothing replicated yet), then at 3 (caught up)
    call(broker, fetch, 11, fetch_body("t", offset=0, replica_id=2))
    assert box == []
    p = call(broker, fetch, 11, fetch_body("t", offset=3, replica_id=2)).responses[0].partition_responses[0]
    assert p.high_watermark == 3
    r = box[0].responses[0].partition_responses[0]
    assert (r.error_code, r.base_offset) == (0, 0)


def test_acks_all_times_out(broker):
    broker.lead("t", replicas=[1, 2], isr=[1, 2])
    box = _fired(call_deferred(broker, produce, 8, produce_body("t", batch(3), acks=-1, timeout_ms=1500)))
    broker.clock.advance(1.6)
    r = box[0].responses[0].partition_responses[0]
    assert r.error_code == ErrorCode.REQUEST_TIMED_OUT
    # a consumer does not see the unreplicated records
    p = call(broker, fetch, 11, fetch_body("t")).responses[0].partition_responses[0]
    assert p.high_watermark == 0 and not p.record_set
    # but a follower does
    p = call(broker, fetch, 11, fetch_body("t", replica_id=2)).responses[0].partition_responses[0]
    assert len(list(iter_records(p.record_set))) == 3


def test_consumer_long_poll_woken_by_hw_advance(broker):
    broker.lead("t", replicas=[1, 2], isr=[1, 2])
    call(broker, produce, 8, produce_body("t", batch(2), acks=1))
    box = _fired(call_deferred(broker, fetch, 11, fetch_body("t", max_wait_ms=5000)))
    assert box == []
    call(broker, fetch, 11, fetch_body("t", offset=2, replica_id=2))
    assert len(box) == 1
    assert len(list(iter_records(box[0].responses[0].partition_responses[0].record_set))) == 2


def _counting_reads(broker) -> list:
    reads: list = []
    read = broker.rm.read_from_local_log

    def counted(params, **kw):
        reads.append(params.replica_id)
        return read(params, **kw)
    broker.rm.read_from_local_log = counted
    return reads


def test_an_idle_fetch_is_answered_at_its_timeout_from_its_first_read(broker):
    """Nothing to send and nothing changed while parked: the partitions are read once, not again
    at the timeout, and the answer is what a second read would give (the HW this fetch moved)."""
    broker.lead("t", replicas=[1, 2], isr=[1, 2])
    call(broker, produce, 8, produce_body("t", batch(2), acks=1))
    reads = _counting_reads(broker)
    box = _fired(call_deferred(broker, fetch, 11, fetch_body("t", offset=2, replica_id=2, max_wait_ms=500)))
    broker.clock.advance(0.6)
    p = box[0].responses[0].partition_responses[0]
    assert (p.error_code, p.high_watermark, bytes(p.record_set or b"")) == (0, 2, b"")
    assert reads == [2]


def test_a_fetch_whose_partition_changed_while_parked_is_read_again_at_its_timeout(broker):
    """Another follower moves the HW of a parked follower fetch's partition: nothing to send at
    once, but the timeout's answer carries the new HW."""
    broker.lead("t", replicas=[1, 2, 3], isr=[1, 2, 3])
    call(broker, produce, 8, produce_body("t", batch(2), acks=1))
    reads = _counting_reads(broker)
    box = _fired(call_deferred(broker, fetch, 11, fetch_body("t", offset=2, replica_id=2, max_wait_ms=500)))
    assert box == [] and broker.rm.get_partition(("t", 0)).high_watermark == 0   # replica 3 is at 0
    call(broker, fetch, 11, fetch_body("t", offset=2, replica_id=3))
    assert box == [] and broker.rm.get_partition(("t", 0)).high_watermark == 2
    broker.clock.advance(0.6)
    assert box[0].responses[0].partition_responses[0].high_watermark == 2
    assert reads == [2, 3, 2]   # the parked fetch was read again at its timeout


def test_a_consumer_fetch_short_of_min_bytes_at_its_timeout_gets_what_arrived(broker):
    broker.lead("t")
    box = _fired(call_deferred(broker, fetch, 11, fetch_body("t", max_wait_ms=500, min_bytes=1000)))
    call(broker, produce, 8, produce_body("t", batch(1)))
    assert box == []
    broker.clock.advance(0.6)
    assert [r.offset for r in iter_records(box[0].responses[0].partition_responses[0].record_set)] == [0]
