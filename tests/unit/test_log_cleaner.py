"""LogCleaner: compaction keeps the latest record per key at its original offset, swaps safely."""
from __future__ import annotations

import glob
import os
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from odradek.broker.config.kafka_config import KafkaConfig, LogConfig
from odradek.broker.log import Log, LogManager
from odradek.broker.log.checkpoint import OffsetCheckpointFile
from odradek.broker.log.producer_state import ORIGIN_COORDINATOR
from odradek.broker.log.cleaner import CLEANER_OFFSET_CHECKPOINT, CleaningAborted, LogCleaner, OffsetMap
from odradek.protocol import compression, record_batch as rb
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import LOG_APPEND_TIME, BatchBuilder, iter_batches

from test_log import Clock

DAY_MS = 86_400_000


class _Manager:
    """The slice of LogManager the cleaner uses, for single-log tests."""

    def __init__(self, *logs: Log) -> None:
        self.logs = list(logs)
        self.config = KafkaConfig({"zookeeper.connect": "zk:2181", "broker.id": "1"})

    def all_logs(self) -> list[Log]:
        return self.logs

    def log_dir_of(self, tp) -> str:
        return os.path.dirname(self.logs[0].dir)


def real_clock() -> Clock:
    return Clock(int(time.time() * 1000))


def compact_log(tmp_path, clock: Clock, name: str = "t-0", **overrides) -> Log:
    props = {"cleanup.policy": "compact", "segment.bytes": "600", "index.interval.bytes": "100"}
    props.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return Log(str(tmp_path / name), LogConfig(props), time=clock, had_clean_shutdown=True)


def produce(log: Log, records, ts: int, codec: int = compression.NONE, headers=()) -> None:
    b = BatchBuilder(compression=codec)
    for key, value in records:
        b.append(ts, key, value, list(headers))
    log.append_as_leader(b.build(), leader_epoch=0)


def read_all(log: Log, start: int = 0) -> list:
    """Every record from ``start`` to the LEO, read batch by batch with Log.read."""
    out, offset = [], start
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        assert data, f"no data at {offset} < LEO {log.log_end_offset}"
        for h, recs in iter_batches(data):
            out.extend(r for r in recs if r.offset >= offset)
            offset = h.next_offset
    return out


def latest(records) -> dict:
    m = {}
    for r in records:
        m[r.key] = (r.offset, r.value)
    return m


def assert_increasing(records) -> None:
    offs = [r.offset for r in records]
    assert offs == sorted(set(offs))


def active_bytes(log: Log) -> bytes:
    with open(log.active_segment.log_path, "rb") as f:
        return f.read()


def fill_updates(log: Log, clock: Clock, keys: int = 8, rounds: int = 25, codec: int = compression.NONE) -> None:
    for r in range(rounds):
        produce(log, [(b"key-%d" % k, b"value-%d-%d" % (k, r)) for k in range(keys) if (k + r) % 3], clock.ms, codec)
        clock.advance(10)


# ---------------------------------------------------------------- compaction

def test_updates_shrink_to_latest_per_key_with_offsets_kept(tmp_path):
    clock = real_clock()
    log = compact_log(tmp_path, clock)
    fill_updates(log, clock)
    before = read_all(log)
    active_before, active_base = active_bytes(log), log.active_segment.base_offset
    n_segments = len(log.segments)
    assert n_segments > 5

    stats = LogCleaner(_Manager(log), clock).clean_log(log)

    after = read_all(log)
    assert latest(after) == latest(before)  # same value at the same offset for every key
    assert_increasing(after)
    cleaned = [r for r in after if r.offset < active_base]
    assert len({r.key for r in cleaned}) == len(cleaned)  # one record per key below the active segment
    assert len(after) < len(before) and stats.records_retained < stats.records_read
    assert active_bytes(log) == active_before and log.active_segment.base_offset == active_base
    assert log.log_end_offset == before[-1].offset + 1
    assert stats.end_offset == active_base
    # groups are formed from pre-cleaning sizes: the next pass merges the shrunken segments
    log.roll()
    produce(log, [(b"key-0", b"last")], clock.ms)
    LogCleaner(_Manager(log), clock).clean_log(log)
    assert len(log.segments) < n_segments and log.segments[0].base_offset == 0
    assert all(s.size <= 600 for s in log.segments)
    assert latest(read_all(log))[b"key-0"][1] == b"last"


def test_reads_at_removed_offsets_return_the_next_batch(tmp_path):
    clock = real_clock()
    log = compact_log(tmp_path, clock)
    fill_updates(log, clock)
    before = {r.offset for r in read_all(log)}
    LogCleaner(_Manager(log), clock).clean_log(log)
    kept = sorted(r.offset for r in read_all(log))
    removed = sorted(before - set(kept))
    assert removed
    for off in removed[:40]:
        data = log.read(off, 1 << 20, min_one_batch=True)
        first = [r.offset for _, recs in iter_batches(data) for r in recs if r.offset >= off][0]
        assert first == min(o for o in kept if o >= off)
    # and after a reopen (indexes loaded from the cleaned files)
    log.close()
    log = Log(log.dir, log.config, recovery_point=log.recovery_point, time=clock, had_clean_shutdown=True)
    assert sorted(r.offset for r in read_all(log)) == kept
    assert sorted(r.offset for r in read_all(log, removed[0])) == [o for o in kept if o >= removed[0]]


def test_tombstones_kept_then_removed_after_delete_retention(tmp_path):
    clock = real_clock()
    log = compact_log(tmp_path, clock, delete_retention_ms=DAY_MS)
    cleaner = LogCleaner(_Manager(log), clock)
    produce(log, [(b"a", b"1"), (b"b", b"1")], clock.ms)
    produce(log, [(b"a", None)], clock.ms)
    log.roll()
    produce(log, [(b"c", b"1")], clock.ms)
    cleaner.clean_log(log)
    assert {r.key: r.value for r in read_all(log)} == {b"a": None, b"b": b"1", b"c": b"1"}
    assert [r.offset for r in read_all(log)] == [1, 2, 3]

    clock.advance(DAY_MS + 60_000)  # the tombstone's segment is now older than delete.retention.ms
    log.roll()
    produce(log, [(b"d", b"1")], clock.ms)
    stats = cleaner.clean_log(log)
    assert stats.tombstones_removed == 1
    assert {r.key: r.value for r in read_all(log)} == {b"b": b"1", b"c": b"1", b"d": b"1"}


def test_tombstone_older_than_retention_is_removed_with_the_values_it_deletes(tmp_path):
    clock = real_clock()
    log = compact_log(tmp_path, clock, delete_retention_ms=1000)
    produce(log, [(b"a", b"1")], clock.ms)
    produce(log, [(b"a", None), (b"b", b"2")], clock.ms)
    log.roll()
    produce(log, [(b"z", b"active")], clock.ms)
    for seg in log.segments[:-1]:
        os.utime(seg.log_path, (time.time() - 10, time.time() - 10))
    LogCleaner(_Manager(log), clock).clean_log(log)
    assert [(r.offset, r.key) for r in read_all(log)] == [(2, b"b"), (3, b"z")]


def test_min_compaction_lag_respected(tmp_path):
    clock = real_clock()
    log = compact_log(tmp_path, clock, min_compaction_lag_ms=60_000)
    fill_updates(log, clock, rounds=10)
    cleaner = LogCleaner(_Manager(log), clock)
    n = len(read_all(log))
    assert not cleaner.clean_log(log).cleaned and len(read_all(log)) == n
    clock.advance(61_000)
    assert cleaner.clean_log(log).cleaned and len(read_all(log)) < n


def test_high_watermark_bounds_the_dirty_section(tmp_path):
    clock = real_clock()
    log = compact_log(tmp_path, clock)
    fill_updates(log, clock, rounds=12)
    hw = log.segments[2].base_offset
    log.update_high_watermark(hw)
    stats = LogCleaner(_Manager(log), clock).clean_log(log)
    assert stats.end_offset <= hw
    later = [r.offset for r in read_all(log) if r.offset >= hw]
    assert len(later) == log.log_end_offset - hw  # nothing at/after the HW was touched


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD])
def test_compressed_batches_recompressed_with_same_codec(tmp_path, codec):
    clock = real_clock()
    log = compact_log(tmp_path, clock, segment_bytes=2000)
    for r in range(12):
        produce(log, [(b"k%d" % k, b"v%d-%d" % (k, r) * 5) for k in range(6)], clock.ms, codec,
                headers=[("h", b"x"), ("n", None)])
        clock.advance(5)
    produce(log, [(b"k%d" % k, b"partial") for k in range(3)], clock.ms, codec)  # the last full batch
    log.roll()                                                                  # is partly superseded
    produce(log, [(b"active", b"x")], clock.ms, codec)
    before = read_all(log)
    LogCleaner(_Manager(log), clock).clean_log(log)
    data = log.read(0, 1 << 22)
    rewritten = [h for h, _ in iter_batches(data)]
    assert all(h.compression == codec for h in rewritten)
    assert any(h.records_count < h.last_offset_delta + 1 for h in rewritten)  # gaps inside a batch
    after = read_all(log)
    assert latest(after) == latest(before)
    assert all(r.headers == [("h", b"x"), ("n", None)] for r in after if r.value not in (b"partial", b"x"))
    assert sum(1 for r in after if r.headers) == 3


def test_rebuilt_batch_keeps_header_fields_and_log_append_time(tmp_path):
    clock = real_clock()
    log = compact_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    b = BatchBuilder(producer_id=42, producer_epoch=3, base_sequence=7)
    for k in (b"a", b"b", b"c"):
        b.append(clock.ms - 5, k, b"x")
    log.append_as_leader(b.build(), leader_epoch=4)
    produce(log, [(b"b", b"y")], clock.ms)
    log.roll()
    produce(log, [(b"z", b"z")], clock.ms)
    LogCleaner(_Manager(log), clock).clean_log(log)
    (h, recs), *_ = list(iter_batches(log.read(0, 1 << 20)))
    assert (h.base_offset, h.last_offset_delta, h.records_count) == (0, 2, 2)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch) == (42, 3, 7, 4)
    assert h.timestamp_type == LOG_APPEND_TIME and all(r.timestamp == h.max_timestamp for r in recs)
    assert [r.offset for r in recs] == [0, 2]
    rb.validate(log.read(0, 1 << 20))  # the CRC is right


def test_null_keys_dropped_and_detected(tmp_path):
    clock = real_clock()
    log = compact_log(tmp_path, clock)
    b = BatchBuilder()
    b.append(clock.ms, None, b"no key")
    b.append(clock.ms, b"k", b"v")
    records = b.build()
    with pytest.raises(KafkaError) as refused:   # a client may not write it to a compacted log
        log.append_as_leader(records, 0)
    assert refused.value.code == ErrorCode.INVALID_RECORD and log.log_end_offset == 0
    log.append_as_leader(records, 0, ORIGIN_COORDINATOR)   # as if written before the topic was compacted
    log.roll()
    produce(log, [(b"z", b"z")], clock.ms)
    stats = LogCleaner(_Manager(log), clock).clean_log(log)
    assert stats.null_keys_removed == 1
    assert [(r.offset, r.key) for r in read_all(log)] == [(1, b"k"), (2, b"z")]


def test_empty_cleaned_segment_and_empty_batches(tmp_path):
    clock = real_clock()
    log = compact_log(tmp_path, clock, segment_bytes=100)
    produce(log, [(b"a", b"1")], clock.ms)
    produce(log, [(b"a", b"2")], clock.ms)  # rolls: segment 0 is entirely superseded
    empty = bytearray(rb.pack_header(rb.BatchHeader(3, 49, 0, 2, 0, 0, 0, clock.ms, clock.ms, -1, -1, -1, 0)))
    empty[17:21] = rb.compute_crc(empty, 0, len(empty)).to_bytes(4, "big")
    log.append_as_follower(bytes(empty))  # an empty batch (as Kafka's cleaner may leave)
    produce(log, [(b"b", b"1")], clock.ms)
    log.roll()
    produce(log, [(b"z", b"z")], clock.ms)
    LogCleaner(_Manager(log), clock).clean_log(log)
    assert [(r.offset, r.key) for r in read_all(log)] == [(1, b"a"), (4, b"b"), (5, b"z")]
    log = _reopen(log, clock, clean=False)
    assert [(r.offset, r.key) for r in read_all(log)] == [(1, b"a"), (4, b"b"), (5, b"z")]


# ---------------------------------------------------------------- checkpoint and passes

def test_checkpoint_advances_and_second_pass_is_noop(tmp_path):
    clock = real_clock()
    log = compact_log(tmp_path, clock)
    fill_updates(log, clock)
    cleaner = LogCleaner(_Manager(log), clock)
    stats = cleaner.clean_log(log)
    cp_path = os.path.join(str(tmp_path), CLEANER_OFFSET_CHECKPOINT)
    assert OffsetCheckpointFile(cp_path).read() == {("t", 0): stats.end_offset}
    files = {p: (os.stat(p).st_mtime_ns, os.stat(p).st_size) for p in glob.glob(log.dir + "/*")}
    again = LogCleaner(_Manager(log), clock).clean_log(log)  # a fresh cleaner reads the checkpoint
    assert not again.cleaned and again.first_dirty_offset == stats.end_offset
    assert {p: (os.stat(p).st_mtime_ns, os.stat(p).st_size) for p in glob.glob(log.dir + "/*")} == files
    # new data: only it is dirty, the map covers it, and the checkpoint moves on
    fill_updates(log, clock, rounds=6)
    third = cleaner.clean_log(log)
    assert third.cleaned and third.first_dirty_offset == stats.end_offset > 0
    assert third.end_offset == log.active_segment.base_offset
    cleaner.maybe_truncate_checkpoint(("t", 0), 5)
    assert OffsetCheckpointFile(cp_path).read() == {("t", 0): 5}


def test_offset_map_bound_cleans_in_several_passes(tmp_path):
    clock = real_clock()
    log = compact_log(tmp_path, clock)
    fill_updates(log, clock, keys=30, rounds=10)
    before = latest(read_all(log))
    cleaner = LogCleaner(_Manager(log), clock, max_map_entries=40)
    ends = []
    while True:
        stats = cleaner.clean_log(log)
        if not stats.cleaned:
            break
        ends.append(stats.end_offset)
    assert len(ends) > 2 and ends == sorted(ends)
    assert latest(read_all(log)) == before


def test_clean_once_picks_dirty_compacted_logs(tmp_path):
    clock = real_clock()
    cfg = KafkaConfig({"zookeeper.connect": "zk:2181", "broker.id": "1", "log.segment.bytes": "600"})
    compact = LogConfig({"cleanup.policy": "compact", "segment.bytes": "600"})
    deleting = LogConfig({"segment.bytes": "600"})
    mgr = LogManager([str(tmp_path / "d")], cfg, clock)
    try:
        c, d = mgr.get_or_create_log(("c", 0), compact), mgr.get_or_create_log(("d", 0), deleting)
        for log in (c, d):
            fill_updates(log, clock)
        cleaner = LogCleaner(mgr, clock, max_logs_per_pass=5)
        ratio, dirty = cleaner.dirty_ratio(c)
        assert ratio == 1.0 and dirty > 0
        done = cleaner.clean_once()
        assert [(t, p) for t, p, _ in done] == [("c", 0)] and done[0][2].cleaned
        assert cleaner.dirty_ratio(c)[0] == 0.0
        assert cleaner.clean_once() == []
        # below min.cleanable.dirty.ratio: not cleaned
        produce(c, [(b"key-0", b"new")], clock.ms)
        c.roll()
        assert 0 < cleaner.dirty_ratio(c)[0] < 0.5 and cleaner.clean_once() == []
    finally:
        mgr.shutdown()


def test_a_log_is_cleaned_once_max_compaction_lag_has_passed_whatever_its_dirty_ratio(tmp_path):
    """KIP-354: a dirty inactive segment whose first batch is older than max.compaction.lag.ms
    gets its log cleaned even below min.cleanable.dirty.ratio; a ratio only at the minimum (1.0
    here, the most any log can have) is not enough, as in Kafka."""
    clock = real_clock()
    cfg = KafkaConfig({"zookeeper.connect": "zk:2181", "broker.id": "1", "log.segment.bytes": "600"})
    mgr = LogManager([str(tmp_path / "d")], cfg, clock)
    try:
        c = mgr.get_or_create_log(("c", 0), LogConfig({"cleanup.policy": "compact", "segment.bytes": "600",
                                                        "min.cleanable.dirty.ratio": "1.0"}))
        fill_updates(c, clock)
        before = latest(read_all(c))
        cleaner = LogCleaner(mgr, clock, max_logs_per_pass=5)
        assert cleaner.dirty_ratio(c)[0] == 1.0 and cleaner.clean_once() == []
        c.config = c.config.with_overrides({"max.compaction.lag.ms": "60000"})
        first_batch_ts = next(c.segments[0].iter_batch_headers())[1].max_timestamp
        clock.ms = first_batch_ts + 60000   # not yet more than the lag
        assert cleaner.clean_once() == []
        clock.advance(1)
        done = cleaner.clean_once()
        assert [(t, p) for t, p, _ in done] == [("c", 0)] and done[0][2].cleaned
        assert latest(read_all(c)) == before and len(read_all(c)) < 8 * 25 * 2 // 3
        # nothing dirty is left below the active segment: nothing more to clean, overdue or not
        clock.advance(3_600_000)
        assert cleaner.clean_once() == []
    finally:
        mgr.shutdown()


def test_an_io_error_while_choosing_logs_takes_the_log_dir_offline(tmp_path):
    """Reading a segment to decide whether its log is due (max.compaction.lag.ms) fails: the dir goes
    offline, as an error while cleaning does, where it used to be passed over in silence."""
    clock = real_clock()
    cfg = KafkaConfig({"zookeeper.connect": "zk:2181", "broker.id": "1", "log.segment.bytes": "600"})
    mgr = LogManager([str(tmp_path / "d")], cfg, clock)
    offline: list[str] = []
    mgr.failure_channel.add_listener(offline.append)
    try:
        c = mgr.get_or_create_log(("c", 0), LogConfig({"cleanup.policy": "compact", "segment.bytes": "600",
                                                        "min.cleanable.dirty.ratio": "1.0",
                                                        "max.compaction.lag.ms": "60000"}))
        fill_updates(c, clock)
        os.close(c.segments[0]._fd)   # its reads now fail (EBADF), as on a disk gone bad
        cleaner = LogCleaner(mgr, clock)
        assert cleaner.clean_once() == []
        assert offline == [mgr.log_dir_of(("c", 0))] and not cleaner.uncleanable
        c.segments[0]._fd = -1   # closed already: the shutdown must not close it again
    finally:
        mgr.shutdown()


def test_an_io_error_while_cleaning_takes_the_log_dir_offline_and_the_other_dir_is_cleaned(tmp_path):
    clock = real_clock()
    cfg = KafkaConfig({"zookeeper.connect": "zk:2181", "broker.id": "1", "log.segment.bytes": "600"})
    compact = LogConfig({"cleanup.policy": "compact", "segment.bytes": "600"})
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    mgr = LogManager(dirs, cfg, clock)
    offline: list[str] = []
    # what the broker's LogDirFailureHandler does, inline (no reactor here)
    mgr.failure_channel.add_listener(lambda d: offline.append(d) or mgr.handle_log_dir_failure(d))
    try:
        a, b = mgr.get_or_create_log(("a", 0), compact), mgr.get_or_create_log(("b", 0), compact)
        assert (mgr.log_dir_of(("a", 0)), mgr.log_dir_of(("b", 0))) == (dirs[0], dirs[1])
        for log in (a, b):
            fill_updates(log, clock)
        before = read_all(a)
        # a real I/O error: the cleaned segment's path is a directory (unlink gives EISDIR)
        blocker = a.segments[0].log_path + ".cleaned"
        os.mkdir(blocker)
        cleaner = LogCleaner(mgr, clock, max_logs_per_pass=1)
        b_ratio = cleaner.dirty_ratio(b)[0]
        assert cleaner.dirty_ratio(a)[0] >= b_ratio   # equal: "a" is the first candidate
        assert cleaner.clean_once() == []
        assert offline == [dirs[0]] and mgr.failure_channel.offline_dirs == [dirs[0]]
        assert not cleaner.uncleanable and [lg.topic for lg in mgr.all_logs()] == ["b"]
        # the failed dir's files are as they were: repaired and reopened, "a" has every record
        os.rmdir(blocker)
        reopened = Log(a.dir, compact, time=clock)
        assert [(r.offset, r.key, r.value) for r in read_all(reopened)] == \
            [(r.offset, r.key, r.value) for r in before]
        reopened.close()
        done = cleaner.clean_once()
        assert [(t, p) for t, p, _ in done] == [("b", 0)] and done[0][2].cleaned
    finally:
        mgr.shutdown()


def test_a_segment_file_gone_meanwhile_ends_the_pass_only(tmp_path):
    clock = real_clock()
    cfg = KafkaConfig({"zookeeper.connect": "zk:2181", "broker.id": "1", "log.segment.bytes": "600"})
    mgr = LogManager([str(tmp_path / "d")], cfg, clock)
    try:
        log = mgr.get_or_create_log(("c", 0), LogConfig({"cleanup.policy": "compact", "segment.bytes": "600"}))
        fill_updates(log, clock)
        path = log.segments[0].log_path
        os.rename(path, path + ".deleted")     # as retention renames a segment it deletes
        cleaner = LogCleaner(mgr, clock)
        assert cleaner.clean_once() == []
        assert not cleaner.uncleanable and mgr.failure_channel.offline_dirs == []
        os.rename(path + ".deleted", path)
        assert [(t, p) for t, p, _ in cleaner.clean_once()] == [("c", 0)]
    finally:
        mgr.shutdown()


def test_compact_delete_topics_get_retention_too(tmp_path):
    clock = real_clock()
    log = compact_log(tmp_path, clock, cleanup_policy="compact,delete", retention_ms=10_000)
    produce(log, [(b"a", b"old")], clock.ms - 60_000)
    log.roll()
    produce(log, [(b"b", b"new")], clock.ms)
    log.roll()
    produce(log, [(b"c", b"new")], clock.ms)
    assert log.config.compact and log.config.delete_enabled
    assert log.delete_old_segments() == 1 and log.log_start_offset == 1
    LogCleaner(_Manager(log), clock).clean_log(log)
    assert [r.key for r in read_all(log, log.log_start_offset)] == [b"b", b"c"]


def test_pass_aborted_when_segments_change_and_swap_runner_used(tmp_path):
    clock = real_clock()
    log = compact_log(tmp_path, clock)
    fill_updates(log, clock, rounds=10)
    expected = read_all(log)
    swaps = []

    def runner(fn):  # e.g. retention removed the first segment between read and swap
        log._remove_segments([log.segments[0]])
        return fn()

    cleaner = LogCleaner(_Manager(log), clock, swap_runner=runner)
    with pytest.raises(CleaningAborted):
        cleaner.clean_log(log)
    assert not _leftovers(log)
    assert read_all(log, log.segments[0].base_offset) == [r for r in expected
                                                          if r.offset >= log.segments[0].base_offset]
    cleaner = LogCleaner(_Manager(log), clock, swap_runner=lambda fn: swaps.append(1) or fn())
    assert cleaner.clean_log(log).cleaned and swaps
    log.config = log.config.with_overrides({"min.cleanable.dirty.ratio": "0.01"})
    fill_updates(log, clock, rounds=3)
    cleaner._swap_runner = runner
    assert cleaner.clean_once() == [] and not cleaner.uncleanable  # aborted, not uncleanable


def test_offset_map_long_keys():
    m = OffsetMap(10)
    long_a, long_b = b"a" * 100, b"a" * 99 + b"b"
    m.put(long_a, 5)
    m.put(long_b, 7)
    m.put(b"short", 9)
    assert (m.get(long_a), m.get(long_b), m.get(b"short"), m.get(b"none")) == (5, 7, 9, -1)
    assert len(m) == 3 and m.latest_offset == 9


# ---------------------------------------------------------------- crash safety

def _crash(log: Log) -> None:
    for s in log.segments:
        s.close_handlers()


def _reopen(log: Log, clock, clean: bool = False) -> Log:
    if clean:
        log.close()
    else:
        _crash(log)
    return Log(log.dir, log.config, recovery_point=log.recovery_point, time=clock,
               log_start_offset=log.log_start_offset, had_clean_shutdown=clean)


class _Crash(BaseException):
    pass


def _leftovers(log: Log) -> list[str]:
    return [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap", ".deleted"))]


@pytest.mark.parametrize("crash_at", range(0, 26))
def test_crash_during_swap_leaves_a_consistent_log(tmp_path, monkeypatch, crash_at):
    """Crash at the n-th rename of a pass that merges segments: .cleaned→.swap, old segments
    →.deleted, .swap→final, for three groups, then the checkpoint (25 renames)."""
    clock = real_clock()
    log = compact_log(tmp_path, clock)
    fill_updates(log, clock, rounds=12)
    LogCleaner(_Manager(log), clock).clean_log(log)  # leaves small segments to merge
    fill_updates(log, clock, rounds=4)
    expected = latest(read_all(log))
    real_replace, calls = os.replace, [0]

    def replace(src, dst):
        if calls[0] == crash_at:
            raise _Crash()
        calls[0] += 1
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    try:
        LogCleaner(_Manager(log), clock).clean_log(log)
        crashed = False
    except _Crash:
        crashed = True
    monkeypatch.setattr(os, "replace", real_replace)
    assert crashed == (crash_at < 25)
    log = _reopen(log, clock)
    assert not _leftovers(log)
    records = read_all(log)
    assert_increasing(records)
    assert latest(records) == expected
    # and a cleaner run afterwards still converges
    LogCleaner(_Manager(log), clock).clean_log(log)
    assert latest(read_all(log)) == expected


@pytest.mark.parametrize("crash_at", [3, 4, 5, 7, 9])
def test_committed_swap_replaces_every_overlapping_old_segment(tmp_path, monkeypatch, crash_at):
    """Crash after the commit (the .log.swap rename) with old segments still on disk."""
    clock = real_clock()
    log = compact_log(tmp_path, clock)
    for seg_records in ([(b"a1", b"1"), (b"x", b"1")], [(b"b1", b"1"), (b"x", b"2")], [(b"x", b"3")]):
        produce(log, seg_records, clock.ms)
        log.roll()
    produce(log, [(b"z", b"active")], clock.ms)
    real_replace, calls = os.replace, [0]

    def replace(src, dst):
        if calls[0] == crash_at:
            raise _Crash()
        calls[0] += 1
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(_Crash):
        LogCleaner(_Manager(log), clock).clean_log(log)
    monkeypatch.undo()
    assert any(n.endswith(".log.swap") for n in os.listdir(log.dir))
    log = _reopen(log, clock)
    assert [s.base_offset for s in log.segments] == [0, 5]
    assert [(r.offset, r.key, r.value) for r in read_all(log)] == [
        (0, b"a1", b"1"), (2, b"b1", b"1"), (4, b"x", b"3"), (5, b"z", b"active")]


def test_crash_with_cleaned_files_left_behind(tmp_path, monkeypatch):
    clock = real_clock()
    log = compact_log(tmp_path, clock)
    fill_updates(log, clock)
    expected = read_all(log)

    def boom(self, base, old):
        raise _Crash()

    monkeypatch.setattr(Log, "replace_segments", boom)
    with pytest.raises(_Crash):
        LogCleaner(_Manager(log), clock).clean_log(log)
    monkeypatch.undo()
    assert any(n.endswith(".log.cleaned") for n in os.listdir(log.dir))
    log = _reopen(log, clock)
    assert not _leftovers(log)
    assert read_all(log) == expected  # untouched


def test_index_swap_files_of_uncommitted_swap_are_dropped(tmp_path):
    clock = real_clock()
    log = compact_log(tmp_path, clock)
    fill_updates(log, clock, rounds=8)
    expected = read_all(log)
    seg = log.segments[0]
    with open(seg.offset_index.path + ".swap", "wb") as f:
        f.write(b"\x00\x00\x00\x07\x00\x00\x00\x10")  # garbage that must not replace the index
    log = _reopen(log, clock, clean=True)
    assert not _leftovers(log)
    assert read_all(log) == expected


# ---------------------------------------------------------------- property

_updates = st.lists(st.tuples(st.integers(0, 12), st.one_of(st.none(), st.binary(min_size=0, max_size=30))),
                    min_size=1, max_size=120)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(_updates.map(lambda u: u[:8]), min_size=1, max_size=25),  # batches <= ~420 B
       segment_bytes=st.integers(450, 1500), codec=st.sampled_from([compression.NONE, compression.LZ4]),
       passes=st.integers(1, 3))
def test_property_cleaning_preserves_latest_per_key(tmp_path_factory, batches, segment_bytes, codec, passes):
    clock = real_clock()
    log = compact_log(tmp_path_factory.mktemp("p"), clock, segment_bytes=segment_bytes)
    cleaner = LogCleaner(_Manager(log), clock, max_map_entries=30)
    chunks = [batches[i::passes] for i in range(passes)]
    for chunk in chunks:
        for updates in chunk:
            produce(log, [(b"k%d" % k, v) for k, v in updates], clock.ms, codec)
        expected = latest(read_all(log))
        cleaner.clean_log(log)
        records = read_all(log)
        assert_increasing(records)
        assert latest(records) == expected
    log = _reopen(log, clock, clean=True)
    assert latest(read_all(log)) == expected
    log.close()
