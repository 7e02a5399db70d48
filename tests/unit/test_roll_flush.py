"""A rolled segment's flush, as Kafka's roll schedules it, and the ``flush.ms`` flusher's: the fsync
off the reactor (the server's thread pool), the recovery point moved only once it is done, and
never over a truncation."""
from __future__ import annotations

import errno
import os

import pytest
from twisted.internet import defer

from odradek.broker.config.kafka_config import LogConfig
from odradek.broker.log import LogManager

from test_log import Clock, batch
from test_log_manager import kcfg


class Pool:
    """The server's thread pool, run by hand: a call waits until the test runs it."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __call__(self, fn, *args) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        self.calls.append((fn, args, d))
        return d

    def run(self, n: int | None = None) -> None:
        calls = self.calls[:n]
        del self.calls[:len(calls)]
        for fn, args, d in calls:
            try:
                result = fn(*args)
            except Exception:
                d.errback()
            else:
                d.callback(result)


@pytest.fixture
def fsyncs(monkeypatch):
    """The names of the segment and producer snapshot files fsynced, in order."""
    done: list[str] = []
    real = os.fsync

    def fsync(fd):
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        if name.split(".")[-1] in ("log", "index", "timeindex", "txnindex", "snapshot") or "(deleted)" in name:
            done.append(name)
        real(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    return done


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rolled_log(tmp_path, pool):
    mgr = LogManager([str(tmp_path)], kcfg())
    mgr.run_syncs_in(pool)
    log = mgr.get_or_create_log(("t", 0), LogConfig({"segment.bytes": "400"}))
    while len(log.segments) < 2:
        log.append_as_leader(batch(2), 0)
    return mgr, log


def test_a_roll_leaves_the_fsync_to_the_thread_and_moves_the_recovery_point_after_it(tmp_path, fsyncs):
    pool = Pool()
    mgr, log = rolled_log(tmp_path, pool)
    base = log.segments[1].base_offset
    assert fsyncs == [] and len(pool.calls) == 1   # nothing synced on the reactor
    assert log.recovery_point == 0
    pool.run()
    # the old segment's files (no transaction was aborted: no .txnindex), the roll's producer snapshot
    assert fsyncs == ["00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
                      f"{base:020d}.snapshot"]
    assert log.recovery_point == base
    mgr.shutdown()


def test_a_truncation_while_the_sync_runs_keeps_the_recovery_point(tmp_path, fsyncs):
    """Offsets below the rolled base written again after a truncation were not in the sync."""
    pool = Pool()
    mgr, log = rolled_log(tmp_path, pool)
    base = log.segments[1].base_offset
    log.truncate_to(2)
    while log.log_end_offset <= base:
        log.append_as_leader(batch(2), 0)
    pool.run(1)   # the sync prepared before the truncation
    assert log.recovery_point == 0
    pool.run()    # that of the roll after it
    assert log.recovery_point == log.segments[-1].base_offset > 0
    mgr.shutdown()


def test_a_sync_of_a_deleted_log_closes_its_descriptors(tmp_path, fsyncs):
    pool = Pool()
    before = open_fds()
    mgr, log = rolled_log(tmp_path, pool)
    mgr.delete_log(("t", 0))
    pool.run()   # the files are gone: their descriptors still sync what they held
    assert len(fsyncs) == 4 and all(name.endswith("(deleted)") for name in fsyncs)
    mgr.shutdown()
    assert open_fds() == before


def test_a_failed_sync_takes_the_log_dir_offline(tmp_path, monkeypatch):
    pool = Pool()
    mgr, log = rolled_log(tmp_path, pool)

    def fail(fd):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(os, "fsync", fail)
    before = open_fds()
    pool.run()
    assert mgr.failure_channel.is_offline(str(tmp_path))
    assert log.recovery_point == 0
    assert open_fds() == before - 4   # the sync's descriptors are closed all the same


def test_the_flush_ms_flusher_syncs_on_the_thread(tmp_path, fsyncs):
    clock = Clock()
    mgr = LogManager([str(tmp_path)], kcfg(), clock,
                     topic_config=lambda t: LogConfig({"flush.ms": "1000"} if t == "second" else {}))
    pool = Pool()
    mgr.run_syncs_in(pool)
    logs = {t: mgr.get_or_create_log((t, 0)) for t in ("second", "default")}
    for log in logs.values():
        log.append_as_leader(batch(3, ts=clock.ms), 0)
    clock.advance(1000)
    done = mgr.flush_dirty_logs()
    assert fsyncs == [] and logs["second"].recovery_point == 0   # nothing synced on the reactor
    pool.run()
    assert done.called and logs["second"].recovery_point == 3 and logs["default"].recovery_point == 0
    assert fsyncs == ["00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex"]
    mgr.shutdown()
