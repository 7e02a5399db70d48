"""RecordAccumulator and futures: linger, batch.size, draining, retries, per-batch results."""
from __future__ import annotations

import time

import pytest

from odradek.client.accumulator import RECORD_OVERHEAD, RecordAccumulator
from odradek.client.structs import KafkaTimeoutError, TopicPartition
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import iter_records

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def acc(**kw) -> RecordAccumulator:
    args = dict(batch_size=1024, compression=0, linger_ms=50, buffer_memory=1 << 20, max_block_ms=100,
                retry_backoff_ms=100)
    args.update(kw)
    return RecordAccumulator(**args)


def leader(topic, partition):
    return {0: 1, 1: 2}.get(partition, -1)


def append(a, tp, value=b"v" * 100, key=None, **kw):
    size = RECORD_OVERHEAD + len(value) + (len(key) if key else 0)
    return a.append(tp, 1000, key, value, [], size, **kw)


def test_not_ready_before_linger_then_ready():
    a = acc(linger_ms=50)
    append(a, TP0)
    now = time.monotonic()
    nodes, delay, unknown = a.ready(now, leader)
    assert nodes == set() and 0 < delay <= 0.05 and not unknown
    nodes, _, _ = a.ready(now + 0.06, leader)
    assert nodes == {1}


def test_linger_zero_is_ready_at_once():
    a = acc(linger_ms=0)
    append(a, TP0)
    assert a.ready(time.monotonic(), leader)[0] == {1}


def test_full_batch_is_ready_and_starts_a_new_one():
    a = acc(batch_size=1024, linger_ms=10_000)
    new_batches = [append(a, TP0)[1] for _ in range(20)]
    assert new_batches[0] is True
    assert new_batches.count(True) >= 2            # 20 x ~121 bytes do not fit in 1024
    assert a.ready(time.monotonic(), leader)[0] == {1}
    drained = a.drain({1}, leader, 1 << 20, time.monotonic())
    batch = drained[1][0]
    assert batch.builder.estimated_size() <= 1024
    assert len(drained[1]) == 1                    # one batch per partition per request


def test_queued_batches_tell_a_full_batch_waiting_from_one_taken():
    """What the producer hands the GIL to its sender for: a new batch behind a full one, not a
    new batch after the sender took the one before."""
    a = acc(batch_size=1024, linger_ms=0)
    assert a.queued_batches(TP0) == 0
    assert append(a, TP0)[1] is True and a.queued_batches(TP0) == 1
    while not append(a, TP0)[1]:
        pass                                       # ... until the batch is full: a new one behind it
    assert a.queued_batches(TP0) == 2
    a.drain({1}, leader, 1 << 20, time.monotonic())
    a.drain({1}, leader, 1 << 20, time.monotonic())
    assert a.queued_batches(TP0) == 0
    assert append(a, TP0)[1] is True and a.queued_batches(TP0) == 1   # the sender took the one before


def test_abort_on_new_batch_for_sticky_partitioning():
    a = acc(batch_size=200)
    fut, new = append(a, TP0)
    assert fut is not None and new
    fut, new = append(a, TP0, abort_on_new_batch=True)
    assert fut is None and new                      # would need a new batch: caller re-picks a partition


def test_drain_respects_max_request_size_and_leaders():
    a = acc(linger_ms=0)
    append(a, TP0)
    append(a, TP1)
    out = a.drain({1}, leader, 1 << 20, time.monotonic())
    assert list(out) == [1] and out[1][0].tp == TP0
    assert a.ready(time.monotonic(), leader)[0] == {2}


def test_unknown_leader_is_reported():
    a = acc(linger_ms=0)
    append(a, TopicPartition("t", 7))
    nodes, _, unknown = a.ready(time.monotonic(), leader)
    assert nodes == set() and unknown == {"t"}


def test_futures_share_the_batch_result():
    a = acc(linger_ms=0)
    f1, _ = append(a, TP0, key=b"a")
    f2, _ = append(a, TP0, key=b"bb")
    assert f1.batch is f2.batch and not f1.is_done()
    batch = a.drain({1}, leader, 1 << 20, time.monotonic())[1][0]
    recs = list(iter_records(batch.build()))
    assert [r.key for r in recs] == [b"a", b"bb"]
    seen = []
    f2.add_callback(seen.append)
    a.complete(batch, 40, -1, None)
    md1, md2 = f1.get(0), f2.get(0)
    assert (md1.offset, md2.offset) == (40, 41)
    assert md1.timestamp == 1000 and md1.serialized_key_size == 1 and md2.serialized_key_size == 2
    assert seen == [md2]
    late = []
    f1.add_callback(late.append)                   # after completion: runs at once
    assert late == [md1]


def test_failed_batch_fails_every_future_and_errbacks():
    a = acc(linger_ms=0)
    f, _ = append(a, TP0)
    errs = []
    f.add_errback(errs.append)
    batch = a.drain({1}, leader, 1 << 20, time.monotonic())[1][0]
    a.complete(batch, -1, -1, KafkaError(ErrorCode.MESSAGE_TOO_LARGE))
    with pytest.raises(KafkaError) as e:
        f.get(0)
    assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE and errs == [e.value]


def test_get_times_out():
    a = acc()
    f, _ = append(a, TP0)
    with pytest.raises(KafkaTimeoutError):
        f.get(0.01)


def test_reenqueued_batch_backs_off_and_goes_first():
    a = acc(linger_ms=0, retry_backoff_ms=100)
    append(a, TP0, value=b"first")
    now = time.monotonic()
    batch = a.drain({1}, leader, 1 << 20, now)[1][0]
    batch.build()
    append(a, TP0, value=b"second")
    a.reenqueue(batch, now)
    assert a.ready(now + 0.01, leader)[0] == set()          # backing off
    assert a.drain({1}, leader, 1 << 20, now + 0.01) == {}
    out = a.drain({1}, leader, 1 << 20, now + 0.2)
    assert out[1][0] is batch and batch.attempts == 1       # the retried batch goes first, same bytes
    fut, new = append(a, TP0, value=b"third")
    assert new is False                                      # appends go to the open batch, never the retried one


def test_buffer_memory_blocks_then_times_out():
    a = acc(batch_size=1000, buffer_memory=1500, max_block_ms=50)
    append(a, TP0)
    with pytest.raises(KafkaTimeoutError):
        append(a, TP1)


def test_expired_batches():
    a = acc()
    append(a, TP0)
    assert a.expired(time.monotonic(), 10.0) == []
    assert len(a.expired(time.monotonic() + 11, 10.0)) == 1
