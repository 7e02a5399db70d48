"""Retention (time, size, log start) and crash recovery of a partition log."""
from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from odradek.broker.log import Log
from odradek.protocol import record_batch as rb

from test_log import Clock, batch, make_log, offsets, reopen


def _fill(log: Log, n: int, **kw) -> None:
    for _ in range(n):
        log.append_as_leader(batch(3, **kw), 0)


# ---------------------------------------------------------------- retention

def test_retention_by_time_moves_log_start_and_never_reuses_offsets(tmp_path):
    clock = Clock()
    log = make_log(tmp_path, clock, segment_bytes=500, retention_ms=10_000)
    now = clock.ms
    _fill(log, 10, ts=now - 20_000)  # old data
    old_segments = len(log.segments)
    _fill(log, 10, ts=now)           # fresh data, in new segments
    assert log.delete_old_segments() >= old_segments - 1
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert all(s.largest_timestamp >= now - 10_000 for s in log.segments)
    assert log.log_start_offset <= 30
    assert offsets(log.read(log.log_start_offset, 1 << 20))[0] <= log.log_start_offset
    with pytest.raises(Exception):
        log.read(0, 100)
    assert glob.glob(os.path.join(log.dir, "*.deleted")) == []
    # everything expires: the active segment is rolled and deleted, LEO kept
    clock.advance(60_000)
    leo = log.log_end_offset
    assert log.delete_old_segments() > 0
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (leo, leo, 1)
    assert log.segments[0].size == 0 and log.segments[0].base_offset == leo
    assert log.delete_old_segments() == 0  # an empty active segment is never deleted
    assert log.append_as_leader(batch(2), 0).first_offset == leo
    log = reopen(log, clock)
    assert log.log_start_offset == leo and log.log_end_offset == leo + 2
    assert offsets(log.read(leo, 1 << 20)) == [leo, leo + 1]


def test_retention_by_bytes(tmp_path):
    clock = Clock()
    log = make_log(tmp_path, clock, segment_bytes=500, retention_bytes=1200)
    _fill(log, 40, ts=clock.ms)
    sizes = [s.size for s in log.segments]
    total = sum(sizes)
    deleted = log.delete_old_segments()
    assert deleted > 0
    # Kafka's rule: delete the oldest while what remains is still ≥ retention.bytes
    assert log.size == total - sum(sizes[:deleted]) >= 1200
    assert log.size - sizes[deleted] < 1200
    assert log.delete_old_segments() == 0
    assert log.log_start_offset == log.segments[0].base_offset
    leo = log.log_end_offset
    assert log.append_as_leader(batch(1), 0).first_offset == leo


def test_retention_respects_high_watermark(tmp_path):
    clock = Clock()
    log = make_log(tmp_path, clock, segment_bytes=300, retention_ms=1000)
    _fill(log, 10, ts=clock.ms - 5000)
    log.update_high_watermark(0)
    assert log.delete_old_segments() == 0
    log.update_high_watermark(log.segments[2].base_offset)
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == log.segments[0].base_offset


def test_compact_only_topic_is_not_deleted_by_retention(tmp_path):
    clock = Clock()
    log = make_log(tmp_path, clock, segment_bytes=300, retention_ms=1, cleanup_policy="compact")
    _fill(log, 10, ts=0)
    assert log.delete_old_segments() == 0


def test_epoch_cache_truncated_from_start(tmp_path):
    clock = Clock()
    log = make_log(tmp_path, clock, segment_bytes=300, retention_ms=1000)
    for e in range(6):
        log.append_as_leader(batch(3, ts=0), e)
    log.append_as_leader(batch(3, ts=clock.ms), 6)
    log.delete_old_segments()
    start = log.log_start_offset
    entries = log.leader_epoch_cache.entries
    assert entries[0].start_offset == start and entries[-1].epoch == 6


# ---------------------------------------------------------------- recovery

def _log_file(log: Log) -> str:
    return log.active_segment.log_path


def _crash(log: Log) -> None:
    """Simulate kill -9: drop the object without close() (file descriptors leak on purpose)."""
    for s in log.segments:
        s.close_handlers()


def test_recovery_truncates_torn_tail(tmp_path):
    log = make_log(tmp_path, segment_bytes=1000)
    _fill(log, 20)
    good = log.log_end_offset
    path = _log_file(log)
    expected = log.read(log.active_segment.base_offset, 1 << 20)
    log.append_as_leader(batch(3), 0)
    _crash(log)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 7)  # partially written last batch
    log = Log(log.dir, log.config, had_clean_shutdown=False)
    assert log.log_end_offset == good
    assert log.read(log.active_segment.base_offset, 1 << 20) == expected
    assert os.path.getsize(path) == log.active_segment.size
    assert log.append_as_leader(batch(1), 0).first_offset == good


def test_recovery_at_corrupt_crc_deletes_later_segments(tmp_path):
    log = make_log(tmp_path, segment_bytes=600)
    _fill(log, 30)
    assert len(log.segments) >= 4
    victim = log.segments[1]
    pos, h = list(victim.iter_batch_headers())[2]
    keep_until = h.base_offset
    path = victim.log_path
    _crash(log)
    with open(path, "r+b") as f:
        f.seek(pos + rb.HEADER_SIZE + 2)
        byte = f.read(1)
        f.seek(pos + rb.HEADER_SIZE + 2)
        f.write(bytes([byte[0] ^ 0x55]))
    log = Log(log.dir, log.config, recovery_point=0, had_clean_shutdown=False)
    assert log.log_end_offset == keep_until
    assert [s.base_offset for s in log.segments] == [0, victim.base_offset]
    assert offsets(log.read(0, 1 << 20))[0] == 0
    assert sorted(os.listdir(log.dir)) == sorted(
        ["%020d.%s" % (b, ext) for b in (0, victim.base_offset) for ext in ("log", "index", "timeindex")]
        + ["%020d.snapshot" % victim.base_offset]   # producer snapshots above the new LEO are gone
        + ["leader-epoch-checkpoint"])


def test_recovery_rebuilds_deleted_indexes(tmp_path):
    log = make_log(tmp_path, segment_bytes=5000, index_interval_bytes=100)
    _fill(log, 100, value_size=20)
    reads = {o: log.read(o, 500) for o in range(0, 300, 11)}
    n_entries = [len(s.offset_index) for s in log.segments]
    ts = log.fetch_offset_by_timestamp(1001)
    log.close()
    for p in glob.glob(os.path.join(log.dir, "*index")):
        os.remove(p)
    for clean in (True, False):
        log = Log(log.dir, log.config, had_clean_shutdown=clean)
        assert [len(s.offset_index) for s in log.segments] == n_entries
        assert all(os.path.exists(s.offset_index.path) for s in log.segments)
        assert {o: log.read(o, 500) for o in reads} == reads
        assert log.fetch_offset_by_timestamp(1001) == ts
        log.close()


def test_corrupt_index_file_is_rebuilt(tmp_path):
    log = make_log(tmp_path, index_interval_bytes=50)
    _fill(log, 30)
    reads = log.read(40, 300)
    path = log.active_segment.offset_index.path
    log.close()
    with open(path, "r+b") as f:
        f.seek(4)
        f.write(b"\x7f\xff\xff\xff")  # position beyond the log
    log = Log(log.dir, log.config, had_clean_shutdown=True)
    assert log.read(40, 300) == reads and log.log_end_offset == 90


def test_clean_shutdown_skips_recovery_of_flushed_segments(tmp_path):
    log = make_log(tmp_path, segment_bytes=500)
    _fill(log, 20)
    first = log.segments[0].log_path
    log.close()
    with open(first, "r+b") as f:  # corruption in a flushed segment is not re-checked
        f.seek(100)
        f.write(b"\x00")
    log = Log(log.dir, log.config, recovery_point=log.recovery_point, had_clean_shutdown=True)
    assert log.log_end_offset == 60


_WRITER = textwrap.dedent("""
    import os, sys
    from odradek.broker.config.kafka_config import LogConfig
    from odradek.broker.log import Log
    from odradek.protocol.records import BatchBuilder
    log = Log(sys.argv[1], LogConfig({"segment.bytes": "4000"}), had_clean_shutdown=True)
    n = 0
    while True:
        b = BatchBuilder()
        for i in range(3):
            b.append(1000, None, b"x" * 50)
        info = log.append_as_leader(b.build(), 0)
        n = info.last_offset + 1
        if n % 300 == 0:
            print(n, flush=True)
""")


def test_kill_dash_9_loses_nothing_acknowledged(tmp_path):
    d = str(tmp_path / "t-0")
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, d], stdout=subprocess.PIPE, text=True)
    acked = 0
    try:
        for line in proc.stdout:
            acked = int(line)
            if acked >= 3000:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    log = Log(d, make_log(tmp_path / "x").config, had_clean_shutdown=False)
    assert log.log_end_offset >= acked
    got, o = 0, 0
    while o < log.log_end_offset:
        offs = offsets(log.read(o, 1 << 20))
        assert offs[0] <= o
        o = offs[-1] + 1
        got = o
    assert got == log.log_end_offset
