"""Log append/read: offsets, segment rolls, indexes, timestamps, validation before write."""
from __future__ import annotations

import os

import pytest
from hypothesis import given, settings, strategies as st

from odradek.broker.config.kafka_config import LogConfig
from odradek.broker.log import CorruptIndexError, Log, OffsetIndex, TimeIndex
from odradek.protocol import record_batch as rb
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.broker.log.producer_state import ORIGIN_COORDINATOR
from odradek.protocol.records import BatchBuilder, iter_records


class Clock:
    def __init__(self, ms: int = 1_600_000_000_000) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000

    def advance(self, ms: int) -> None:
        self.ms += ms


def batch(n: int = 3, ts: int = 1000, value_size: int = 10, base_offset: int = 0, ts_step: int = 1) -> bytes:
    b = BatchBuilder(base_offset=base_offset)
    for i in range(n):
        b.append(ts + i * ts_step, b"k%d" % i, b"v" * value_size)
    return b.build()


def offsets(data: bytes) -> list[int]:
    return [r.offset for r in iter_records(data)]


def headers(data: bytes) -> list[rb.BatchHeader]:
    return [h for _, h in rb.iter_headers(data)]


def make_log(tmp_path, clock=None, **overrides) -> Log:
    cfg = LogConfig({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return Log(str(tmp_path / "topic-0"), cfg, time=clock or Clock(), had_clean_shutdown=True)


def reopen(log: Log, clock=None, clean: bool = True) -> Log:
    log.close()
    return Log(log.dir, log.config, recovery_point=log.recovery_point, time=clock or log._time,
               log_start_offset=log.log_start_offset, had_clean_shutdown=clean)


def test_offsets_assigned_contiguously_and_round_trip(tmp_path):
    log = make_log(tmp_path)
    infos = [log.append_as_leader(batch(n), leader_epoch=0) for n in (1, 5, 2)]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 0), (1, 5), (6, 7)]
    assert all(i.log_append_time == -1 and i.log_start_offset == 0 for i in infos)
    assert log.log_end_offset == 8
    data = log.read(0, 1 << 20)
    assert offsets(data) == list(range(8))
    assert [h.partition_leader_epoch for h in headers(data)] == [0, 0, 0]
    assert log.read(8, 100) == b""


def test_client_base_offset_is_rewritten_and_bytes_otherwise_kept(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(batch(2), 0)
    with pytest.raises(KafkaError) as refused:   # Kafka: a client's batch starts at baseOffset 0
        log.append_as_leader(batch(3, base_offset=999), 7)
    assert refused.value.code == ErrorCode.INVALID_RECORD and log.log_end_offset == 2
    raw = batch(3)
    log.append_as_leader(raw, 7)
    stored = log.read(2, 1 << 20)
    assert stored[rb.CRC_START - 5:] == raw[rb.CRC_START - 5:]  # magic, crc and everything after unchanged
    h = rb.validate(stored)
    assert (h.base_offset, h.partition_leader_epoch) == (2, 7)


@pytest.mark.parametrize("append_time", [False, True])
def test_a_lent_frames_records_are_stamped_in_place_and_stored_as_a_copy_would_be(tmp_path, append_time):
    """A writable view (a lent Produce frame's records) is the log's to stamp: what is stored is what
    the same batch given as bytes stores; a caller's bytes, bytearray or read-only view is not touched."""
    kwargs = {"message_timestamp_type": "LogAppendTime"} if append_time else {}
    clock = Clock()
    by_copy, in_place = make_log(tmp_path / "a", clock, **kwargs), make_log(tmp_path / "b", clock, **kwargs)
    raw = batch(4)
    for log in (by_copy, in_place):
        log.append_as_leader(batch(2), 3)
    frame = bytearray(b"header" + raw)
    view = memoryview(frame)[6:]
    assert by_copy.append_as_leader(raw, 3) == in_place.append_as_leader(view, 3)
    assert by_copy.read(0, 1 << 20) == in_place.read(0, 1 << 20)
    assert rb.parse_header(view).base_offset == 2 and frame[:6] == b"header"   # stamped there, nothing else
    for untouched in (raw, bytearray(raw), memoryview(raw), memoryview(bytearray(raw)).toreadonly()):
        before = bytes(untouched)
        by_copy.append_as_leader(untouched, 3)
        assert bytes(untouched) == before


def test_multi_batch_append_and_reads_across_rolls(tmp_path):
    log = make_log(tmp_path, segment_bytes=1000)
    with pytest.raises(KafkaError) as refused:   # a client's produce carries one batch per partition
        log.append_as_leader(batch(2) + batch(3), 1)
    assert refused.value.code == ErrorCode.INVALID_RECORD and log.log_end_offset == 0
    expected = 0
    for i in range(40):
        blob = batch(2, value_size=20) + batch(3, value_size=20)
        info = log.append_as_leader(blob, 1, ORIGIN_COORDINATOR)
        assert info.first_offset == expected
        expected = info.last_offset + 1
    assert len(log.segments) > 5
    assert all(s.size <= 1000 for s in log.segments)
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    for a, b in zip(log.segments, log.segments[1:]):
        assert a.next_offset == b.base_offset
        assert os.path.basename(b.log_path) == "%020d.log" % b.base_offset
    seen = []
    offset = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 300)
        got = offsets(data)
        seen.extend(o for o in got if o >= offset)
        offset = got[-1] + 1
    assert seen == list(range(expected))


def test_read_from_middle_of_batch_returns_that_batch(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(batch(5), 0)
    log.append_as_leader(batch(5), 0)
    assert offsets(log.read(7, 1 << 20)) == list(range(5, 10))
    assert offsets(log.read(3, 1 << 20)) == list(range(10))


def test_max_bytes_and_min_one_batch(tmp_path):
    log = make_log(tmp_path)
    big = batch(10, value_size=100)
    log.append_as_leader(big, 0)
    log.append_as_leader(batch(1), 0)
    size = len(big)
    assert log.read(0, 10) == log.read(0, size)  # KIP-74: first batch even if larger
    assert offsets(log.read(0, 10)) == list(range(10))
    assert log.read(0, 10, min_one_batch=False) == b""
    # whole batches only: a max_bytes cutting into the second batch returns the first alone
    assert len(log.read(0, size + 20)) == size
    assert offsets(log.read(0, 1 << 20)) == list(range(11))


def test_read_capped_at_max_offset(tmp_path):
    log = make_log(tmp_path)
    for _ in range(4):
        log.append_as_leader(batch(2), 0)
    assert offsets(log.read(0, 1 << 20, max_offset=4)) == [0, 1, 2, 3]
    assert offsets(log.read(2, 1 << 20, max_offset=5)) == [2, 3, 4, 5]  # batch [4,5] starts below 5
    assert log.read(4, 1 << 20, max_offset=4) == b""
    assert log.read(6, 1 << 20, max_offset=2) == b""


def test_out_of_range_reads(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(batch(3), 0)
    with pytest.raises(KafkaError) as e:
        log.read(4, 100)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    with pytest.raises(KafkaError):
        log.read(-1, 100)
    assert log.read(3, 100) == b""


def test_index_lookups_after_reopen(tmp_path):
    log = make_log(tmp_path, segment_bytes=5000, index_interval_bytes=100)
    for _ in range(100):
        log.append_as_leader(batch(3, value_size=30), 0)
    before = {o: log.read(o, 250) for o in range(0, 300, 7)}
    n_entries = [len(s.offset_index) for s in log.segments]
    assert sum(n_entries) > 20
    log = reopen(log)
    assert [len(s.offset_index) for s in log.segments] == n_entries
    assert log.log_end_offset == 300
    for o, data in before.items():
        assert log.read(o, 250) == data
    # index files are 8-byte entries: relative offset + position
    seg = log.segments[1]
    raw = open(seg.offset_index.path, "rb").read()
    assert len(raw) == 8 * len(seg.offset_index)
    rel, pos = rb.struct.unpack(">ii", raw[:8])
    found = seg.translate_offset(seg.base_offset + rel)
    assert found is not None and found[0] == pos and found[1].last_offset == seg.base_offset + rel


def test_offset_index_unit(tmp_path):
    idx = OffsetIndex(str(tmp_path / "x.index"), 100, max_index_size=24)
    assert idx.lookup(150) == (100, 0)
    idx.append(110, 50)
    idx.append(120, 90)
    assert idx.lookup(115) == (110, 50) and idx.lookup(120) == (120, 90) and idx.lookup(99) == (100, 0)
    idx.append(130, 120)
    assert idx.is_full
    with pytest.raises(ValueError):
        idx.append(125, 130)
    idx.flush()
    idx.truncate_to(120)
    idx.flush()
    again = OffsetIndex(idx.path, 100)
    again.load(log_size=1000)
    bad = OffsetIndex(idx.path, 100)
    with pytest.raises(CorruptIndexError):
        bad.load(log_size=50)
    assert again.last_entry == (110, 50)


def test_time_index_unit(tmp_path):
    idx = TimeIndex(str(tmp_path / "x.timeindex"), 0)
    idx.maybe_append(100, 5)
    idx.maybe_append(100, 6)  # not increasing: ignored
    idx.maybe_append(200, 9)
    assert len(idx) == 2
    assert idx.lookup(100) == (-1, 0)
    assert idx.lookup(150) == (100, 5)
    assert idx.lookup(1000) == (200, 9)
    idx.flush()
    assert os.path.getsize(idx.path) == 24


def test_fetch_offset_by_timestamp(tmp_path):
    log = make_log(tmp_path, segment_bytes=600, index_interval_bytes=50)
    for i in range(30):  # batch i holds 2 records with timestamps 1000+10i, 1000+10i+1
        log.append_as_leader(batch(2, ts=1000 + 10 * i), 0)
    assert len(log.segments) > 3
    # the first RECORD with a timestamp >= the target, not the first batch
    assert log.fetch_offset_by_timestamp(0) == (0, 1000)
    assert log.fetch_offset_by_timestamp(1001) == (1, 1001)
    assert log.fetch_offset_by_timestamp(1002) == (2, 1010)
    assert log.fetch_offset_by_timestamp(1150) == (30, 1150)
    assert log.fetch_offset_by_timestamp(1291) == (59, 1291)
    assert log.fetch_offset_by_timestamp(1292) is None
    assert log.fetch_offset_by_timestamp(-2) == (0, -1)
    assert log.fetch_offset_by_timestamp(-1) == (60, -1)
    log = reopen(log)
    assert log.fetch_offset_by_timestamp(1150) == (30, 1150)
    assert log.fetch_offset_by_timestamp(1291) == (59, 1291)


def test_log_append_time(tmp_path):
    clock = Clock()
    log = make_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(batch(3, ts=5), 0)
    assert info.log_append_time == clock.ms
    data = log.read(0, 1 << 20)
    h = rb.validate(data)  # CRC recomputed
    assert h.timestamp_type == 1 and h.max_timestamp == clock.ms
    assert all(r.timestamp == clock.ms for r in iter_records(data))


def test_roll_on_segment_ms(tmp_path):
    clock = Clock()
    log = make_log(tmp_path, clock, segment_ms=1000)
    log.append_as_leader(batch(1), 0)
    clock.advance(500)
    log.append_as_leader(batch(1), 0)
    assert len(log.segments) == 1
    clock.advance(600)
    log.append_as_leader(batch(1), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_on_full_index(tmp_path):
    log = make_log(tmp_path, segment_index_bytes=16, index_interval_bytes=1)
    for _ in range(10):
        log.append_as_leader(batch(1), 0)
    assert len(log.segments) > 2
    assert all(len(s.offset_index) <= 2 for s in log.segments)
    assert offsets(b"".join(log.read(s.base_offset, 1 << 20) for s in log.segments)) == list(range(10))


def test_roll_on_relative_offset_overflow(tmp_path):
    log = make_log(tmp_path)
    log.append_as_follower(batch(1, base_offset=0))
    log.append_as_follower(batch(1, base_offset=2**31 + 5))
    assert [s.base_offset for s in log.segments] == [0, 2**31 + 5]
    assert offsets(log.read(2**31 + 5, 1000)) == [2**31 + 5]


def _corrupt_crc(b: bytes) -> bytes:
    m = bytearray(b)
    m[-1] ^= 0xFF
    return bytes(m)


def _bad_magic(b: bytes) -> bytes:
    m = bytearray(b)
    m[16] = 1
    return bytes(m)


@pytest.mark.parametrize("bad,code", [
    (lambda: batch(2) + _corrupt_crc(batch(2)), ErrorCode.CORRUPT_MESSAGE),
    (lambda: batch(2) + _bad_magic(batch(2)), ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
    (lambda: batch(2) + batch(2)[:-3], ErrorCode.CORRUPT_MESSAGE),
    (lambda: batch(2) + b"\x00" * 10, ErrorCode.CORRUPT_MESSAGE),
    (lambda: b"", ErrorCode.CORRUPT_MESSAGE),
    (lambda: batch(2) + batch(200, value_size=100), ErrorCode.MESSAGE_TOO_LARGE),
])
def test_bad_batch_leaves_log_byte_identical(tmp_path, bad, code):
    log = make_log(tmp_path, segment_bytes=2000, max_message_bytes=10000)
    for _ in range(10):
        log.append_as_leader(batch(3), 0)
    def state():
        files = {n: open(os.path.join(log.dir, n), "rb").read() for n in os.listdir(log.dir)}
        return files, [(s.size, len(s.offset_index), len(s.time_index)) for s in log.segments]
    snapshot = state()
    leo = log.log_end_offset
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(bad(), 1)
    assert e.value.code == code
    assert state() == snapshot
    log = reopen(log)
    assert log.log_end_offset == leo and log.latest_epoch == 0


def test_epoch_cache_follows_appends(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(batch(2), 0)
    log.append_as_leader(batch(2), 0)
    log.append_as_leader(batch(2), 3)
    assert [tuple(e) for e in log.leader_epoch_cache.entries] == [(0, 0), (3, 4)]
    assert log.end_offset_for_epoch(0) == (0, 4)
    assert log.end_offset_for_epoch(2) == (0, 4)
    assert log.end_offset_for_epoch(3) == (3, 6)
    assert log.end_offset_for_epoch(9) == (-1, -1)
    path = os.path.join(log.dir, "leader-epoch-checkpoint")
    assert not os.path.exists(path)   # new epochs wait for the log's flush (no fsync per new epoch)
    log.flush()
    assert open(path).read() == "0\n2\n0 0\n3 4\n"
    assert log.recovery_point == 6


def test_epoch_checkpoint_is_written_before_the_recovery_point_passes_its_entries(tmp_path):
    log = make_log(tmp_path, segment_bytes=600)
    path = os.path.join(log.dir, "leader-epoch-checkpoint")
    log.append_as_leader(batch(2), 0)
    log.append_as_leader(batch(2), 2)
    assert log.recovery_point == 0 and not os.path.exists(path)
    log.append_as_leader(batch(2, value_size=250), 4)   # past segment.bytes: the roll flushes up to 4
    assert len(log.segments) == 2 and log.recovery_point == 4
    assert open(path).read() == "0\n2\n0 0\n2 2\n"    # epoch 4 starts at the new recovery point
    log.append_as_leader(batch(2), 6)
    reopened = reopen(log)   # a clean close writes what is left
    assert [tuple(e) for e in reopened.leader_epoch_cache.entries] == [(0, 0), (2, 2), (4, 4), (6, 6)]


def test_epochs_not_yet_written_come_back_from_the_batches_after_a_crash(tmp_path):
    log = make_log(tmp_path, segment_bytes=600)
    log.append_as_leader(batch(2), 0)
    log.append_as_leader(batch(2, value_size=250), 3)
    log.append_as_leader(batch(2), 5)           # rolled: the file holds (0, 0) and (3, 2)
    log.append_as_leader(batch(2), 8)           # in memory only
    assert log.leader_epoch_cache.unwritten
    # a crash: no close, no clean-shutdown marker; recovery starts at the recovery point
    crashed = Log(log.dir, log.config, recovery_point=log.recovery_point, had_clean_shutdown=False)
    assert [tuple(e) for e in crashed.leader_epoch_cache.entries] == [(0, 0), (3, 2), (5, 4), (8, 6)]
    assert crashed.end_offset_for_epoch(5) == (5, 6)


def test_follower_append_keeps_offsets_and_epochs(tmp_path):
    leader = make_log(tmp_path / "l")
    follower = make_log(tmp_path / "f")
    for epoch in (0, 0, 2, 5):
        leader.append_as_leader(batch(2), epoch)
    data = leader.read(0, 1 << 20)
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, 7)
    assert follower.read(0, 1 << 20) == data
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
    with pytest.raises(KafkaError):
        follower.append_as_follower(leader.read(6, 1 << 20))  # below the LEO


def test_truncate_to_and_epochs(tmp_path):
    log = make_log(tmp_path, segment_bytes=500)
    for epoch in range(10):
        log.append_as_leader(batch(3), epoch)
    assert len(log.segments) > 2
    assert log.truncate_to(14)  # inside the batch 12..14: whole batch removed
    assert log.log_end_offset == 12
    assert offsets(log.read(9, 1 << 20))[-1] == 11
    assert log.latest_epoch == 3
    assert log.append_as_leader(batch(1), 11).first_offset == 12
    log = reopen(log, clean=False)
    assert log.log_end_offset == 13 and log.latest_epoch == 11
    assert not log.truncate_to(100)
    log.truncate_fully_and_start_at(50)
    assert (log.log_start_offset, log.log_end_offset, log.latest_epoch) == (50, 50, -1)
    assert log.append_as_leader(batch(2), 12).first_offset == 50
    assert [s.base_offset for s in log.segments] == [50]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(0, 120)), min_size=1, max_size=25),
       st.integers(800, 3000), st.integers(0, 400))  # segment.bytes holds the largest batch (~720 B)
def test_property_every_offset_readable(tmp_path_factory, appends, segment_bytes, max_bytes):
    tmp = tmp_path_factory.mktemp("prop")
    log = make_log(tmp, segment_bytes=segment_bytes, index_interval_bytes=64)
    total = 0
    for n, size in appends:
        info = log.append_as_leader(batch(n, value_size=size), 0)
        assert info.first_offset == total
        total += n
    for reopened in (False, True):
        if reopened:
            log = reopen(log, clean=False)
        for o in range(total):
            got = offsets(log.read(o, max_bytes))
            assert got[0] <= o <= got[-1]
            assert got == list(range(got[0], got[-1] + 1))
    log.close()


def test_load_drops_epochs_past_the_log_end_in_memory_and_every_load_again(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(batch(2), 1)
    log.leader_epoch_cache.assign(4, 2)   # a leader epoch begun at the log end, no record in it
    log = reopen(log)                      # the close writes both entries
    path = os.path.join(log.dir, "leader-epoch-checkpoint")
    assert [tuple(e) for e in log.leader_epoch_cache.entries] == [(1, 0)]   # as Kafka's load
    assert open(path).read() == "0\n2\n1 0\n4 2\n"   # not rewritten by the load (no fsync per log)
    crashed = Log(log.dir, log.config, recovery_point=log.recovery_point, had_clean_shutdown=False)
    assert [tuple(e) for e in crashed.leader_epoch_cache.entries] == [(1, 0)]   # the next load again
    crashed.close()
    assert open(path).read() == "0\n1\n1 0\n"


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(0, 120)), min_size=1, max_size=25),
       st.integers(800, 3000), st.data())
def test_property_bytes_between_two_offsets_are_the_batches_from_one_to_the_other(tmp_path_factory, appends,
                                                                                  segment_bytes, data):
    """What a parked fetch counts (``Log.bytes_between``): the batches of one segment from the one
    holding ``start`` up to the one holding ``end`` (all of them when ``end`` is the log end),
    as the segment file holds them; None when ``start`` and ``end`` are in different segments."""
    log = make_log(tmp_path_factory.mktemp("span"), segment_bytes=segment_bytes, index_interval_bytes=64)
    for n, size in appends:
        log.append_as_leader(batch(n, value_size=size), 0)
    leo = log.log_end_offset
    for _ in range(20):
        start = data.draw(st.integers(0, leo - 1))
        end = data.draw(st.integers(start + 1, leo))
        holding = [s for s in log.segments if s.base_offset <= start][-1]
        if [s for s in log.segments if s.base_offset <= end][-1] is not holding:   # (a rolled, empty one too)
            assert log.bytes_between(start, end) is None
            continue
        with open(holding.log_path, "rb") as f:
            stored = f.read()
        expected = sum(h.size for _, h in rb.iter_headers(stored)
                       if h.last_offset >= start and (end == leo or h.last_offset < end))
        assert log.bytes_between(start, end) == expected
    log.close()


def test_bytes_between_from_a_gap_at_a_segments_end_is_left_to_the_read(tmp_path):
    """A compacted log's segment may end before the next one begins (offsets 3-9 here): from an
    offset in that gap the batches are in the next segment, so a parked fetch is answered at once."""
    log = make_log(tmp_path)
    log.append_as_follower(batch(3, base_offset=0))
    log.roll(10)
    log.append_as_follower(batch(2, base_offset=10))
    assert [s.base_offset for s in log.segments] == [0, 10]
    assert log.bytes_between(5, 12) is None and offsets(log.read(5, 1 << 20)) == [10, 11]
    assert log.bytes_between(10, 12) == len(log.read(10, 1 << 20)) and log.bytes_between(0, 3) == len(batch(3))
    log.close()


def test_bytes_between_after_a_truncation_counts_from_where_the_batches_are_now(tmp_path):
    """Positions a segment remembered (``position_of``) are forgotten when it is truncated: the
    offsets appended again may sit elsewhere."""
    log = make_log(tmp_path)
    for _ in range(3):
        log.append_as_leader(batch(2), 0)
    small = len(batch(2))
    assert log.bytes_between(4, 6) == small and log.bytes_between(2, 6) == 2 * small
    log.truncate_to(2)
    log.append_as_leader(batch(2, value_size=300), 0)
    log.append_as_leader(batch(2), 0)
    assert log.bytes_between(4, 6) == small
    assert log.bytes_between(2, 6) == len(batch(2, value_size=300)) + small == len(log.read(2, 1 << 20))
    log.close()


def test_flush_messages_flushes_once_that_many_offsets_are_unflushed(tmp_path):
    """Kafka's Log.append: once LEO - recovery point reaches flush.messages, the log is fsynced and
    the recovery point (where a crash recovery starts) moves to the LEO; the default never flushes."""
    log = make_log(tmp_path / "every-three", flush_messages=3)
    log.append_as_leader(batch(1), 0)
    log.append_as_leader(batch(1), 0)
    assert log.recovery_point == 0
    log.append_as_leader(batch(1), 0)
    assert log.recovery_point == 3
    log.append_as_follower(batch(2, base_offset=3))   # a follower's batch of 2
    assert log.recovery_point == 3   # 2 unflushed
    log.append_as_leader(batch(1), 0)
    assert log.recovery_point == 6
    default = make_log(tmp_path / "default")
    for _ in range(50):
        default.append_as_leader(batch(2), 0)
    assert default.recovery_point == 0 and default.log_end_offset == 100
    default.close()
    log.close()


def test_a_compacted_log_rolls_its_active_segment_once_max_compaction_lag_old(tmp_path):
    """KIP-354: the records of a compacted log must become cleanable within max.compaction.lag.ms,
    so the next append after the active segment is that old rolls it (segment.ms still governs a
    delete log, and a compacted one whose lag is longer)."""
    clock = Clock()
    logs = {name: make_log(tmp_path / name, clock, cleanup_policy=policy, max_compaction_lag_ms=1000)
            for name, policy in (("compacted", "compact"), ("deleting", "delete"))}
    for log in logs.values():
        log.append_as_leader(batch(1), 0)
    clock.advance(1000)
    for log in logs.values():
        log.append_as_leader(batch(1), 0)
    assert [len(log.segments) for log in logs.values()] == [1, 1]
    clock.advance(1)
    for log in logs.values():
        log.append_as_leader(batch(1), 0)
    assert [len(log.segments) for log in logs.values()] == [2, 1]
    for log in logs.values():
        log.close()
