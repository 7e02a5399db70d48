"""LogManager, checkpoint files, meta.properties and the leader epoch cache."""
from __future__ import annotations

import os

import pytest

from odradek.broker.config.kafka_config import KafkaConfig, LogConfig
from odradek.broker.log import (CheckpointError, LeaderEpochFileCache, LogDirError, LogManager,
                                OffsetCheckpointFile)
from odradek.broker.log.checkpoint import read_entries, read_properties

from test_log import Clock, batch, offsets


def kcfg(**kw) -> KafkaConfig:
    props = {"zookeeper.connect": "zk:2181", "broker.id": "1"}
    props.update({k.replace("_", "."): str(v) for k, v in kw.items()})
    return KafkaConfig(props)


def test_offset_checkpoint_round_trip(tmp_path):
    f = OffsetCheckpointFile(str(tmp_path / "recovery-point-offset-checkpoint"))
    assert f.read() == {}
    data = {("a", 0): 5, ("a-b.c_d", 12): 1 << 40, ("z", 3): 0}
    f.write(data)
    assert f.read() == data
    text = open(f.path).read()
    assert text == "0\n3\na 0 5\na-b.c_d 12 1099511627776\nz 3 0\n"
    assert not os.path.exists(f.path + ".tmp")
    open(f.path, "w").write("0\n2\na 0 5\n")
    with pytest.raises(CheckpointError):
        f.read()


def test_leader_epoch_cache(tmp_path):
    path = str(tmp_path / "leader-epoch-checkpoint")
    c = LeaderEpochFileCache(path)
    assert c.latest_epoch == -1 and c.end_offset_for(0, 10) == (-1, -1)
    c.assign(1, 0)
    c.assign(1, 5)       # same epoch: no-op
    c.assign(3, 10)
    c.assign(2, 12)      # stale epoch: ignored
    c.assign(5, 20)
    assert [tuple(e) for e in c.entries] == [(1, 0), (3, 10), (5, 20)]
    assert c.end_offset_for(0, 30) == (0, 0)    # before the first epoch
    assert c.end_offset_for(1, 30) == (1, 10)
    assert c.end_offset_for(4, 30) == (3, 20)   # unknown epoch: largest smaller one
    assert c.end_offset_for(5, 30) == (5, 30)
    assert c.end_offset_for(6, 30) == (-1, -1)
    assert c.epoch_for_offset(15) == 3
    assert LeaderEpochFileCache(path).entries == [] and c.unwritten   # written by flush, not assign
    c.flush()
    assert [tuple(e) for e in LeaderEpochFileCache(path).entries] == [(1, 0), (3, 10), (5, 20)]
    c.truncate_from_start(12)
    assert [tuple(e) for e in c.entries] == [(3, 12), (5, 20)]
    c.truncate_from_end(20)
    assert [tuple(e) for e in LeaderEpochFileCache(path).entries] == [(3, 12)]
    c.assign(7, 9)  # non-monotonic start: older entries dropped
    assert [tuple(e) for e in c.entries] == [(7, 9)]
    c.clear_and_flush()
    assert open(path).read() == "0\n0\n"


def test_manager_create_append_restart_clean(tmp_path):
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    clock = Clock()
    mgr = LogManager(dirs, kcfg(), clock, broker_id=1, cluster_id="abc")
    logs = {p: mgr.get_or_create_log(("t", p)) for p in range(4)}
    assert mgr.get_or_create_log(("t", 0)) is logs[0]
    assert sorted(len(os.listdir(d)) for d in dirs) == sorted(len(os.listdir(d)) for d in dirs)
    per_dir = [sum(1 for n in os.listdir(d) if n.startswith("t-")) for d in dirs]
    assert per_dir == [2, 2]  # spread by fewest partitions
    for p, log in logs.items():
        for _ in range(p + 1):
            log.append_as_leader(batch(2, ts=clock.ms), 0)
    logs[3].leader_epoch_cache.assign(5, 8)   # a new epoch at the log end, as a LeaderAndIsr makes it
    mgr.write_high_watermarks({("t", p): 2 * p for p in range(4)})
    mgr.shutdown()
    for p, log in logs.items():   # the shutdown wrote every epoch checkpoint (synced together)
        assert read_entries(os.path.join(log.dir, "leader-epoch-checkpoint"), 2) == \
            ([["0", "0"], ["5", "8"]] if p == 3 else [["0", "0"]])
        assert not os.path.exists(os.path.join(log.dir, "leader-epoch-checkpoint.tmp"))
    for d in dirs:
        assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
        assert read_properties(os.path.join(d, "meta.properties")) == \
            {"version": "0", "broker.id": "1", "cluster.id": "abc"}
    rp = OffsetCheckpointFile(os.path.join(mgr.log_dir_of(("t", 0)), "recovery-point-offset-checkpoint")).read()
    assert rp[("t", 0)] == 2

    mgr = LogManager(dirs, kcfg(), clock, broker_id=1, cluster_id="abc")
    assert sorted(l.topic_partition for l in mgr.all_logs()) == [("t", p) for p in range(4)]
    assert [mgr.get_log(("t", p)).log_end_offset for p in range(4)] == [2, 4, 6, 8]
    assert mgr.read_high_watermarks() == {("t", p): 2 * p for p in range(4)}
    for d in dirs:
        assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    mgr.shutdown()


def test_manager_unclean_restart_recovers(tmp_path):
    d = str(tmp_path / "logs")
    mgr = LogManager([d], kcfg())
    log = mgr.get_or_create_log(("t", 0), LogConfig({"segment.bytes": "400"}))
    for _ in range(20):
        log.append_as_leader(batch(2), 0)
    leo = log.log_end_offset
    mgr.checkpoint_recovery_points()
    path = log.active_segment.log_path
    for s in log.segments:
        s.close_handlers()
    mgr._unlock_all()  # simulated crash: no shutdown()
    with open(path, "ab") as f:
        f.write(batch(2)[:30])  # torn write
    mgr = LogManager([d], kcfg(), topic_config=lambda t: LogConfig({"segment.bytes": "400"}))
    log = mgr.get_log(("t", 0))
    assert log.log_end_offset == leo
    assert offsets(log.read(leo - 2, 1000)) == [leo - 2, leo - 1]
    mgr.shutdown()


def test_manager_delete_log_and_retention(tmp_path):
    d = str(tmp_path / "logs")
    clock = Clock()
    mgr = LogManager([d], kcfg(log_retention_ms=1000, log_segment_bytes=300), clock)
    a = mgr.get_or_create_log(("a", 0))
    b = mgr.get_or_create_log(("b", 0))
    for _ in range(10):
        a.append_as_leader(batch(2, ts=clock.ms - 5000), 0)
        b.append_as_leader(batch(2, ts=clock.ms), 0)
    assert mgr.cleanup_logs() > 0
    assert a.log_start_offset == 20 and b.log_start_offset == 0
    assert mgr.delete_log(("b", 0))
    assert not mgr.delete_log(("b", 0))
    assert sorted(n for n in os.listdir(d) if not n.startswith(".")) == [
        "a-0", "log-start-offset-checkpoint", "recovery-point-offset-checkpoint"]
    mgr.checkpoint_log_start_offsets()
    assert OffsetCheckpointFile(os.path.join(d, "log-start-offset-checkpoint")).read() == {("a", 0): 20}
    mgr.shutdown()
    mgr = LogManager([d], kcfg(), clock)
    assert mgr.get_log(("a", 0)).log_start_offset == 20 and mgr.get_log(("b", 0)) is None
    mgr.shutdown()


def test_manager_lock_and_meta_mismatch(tmp_path):
    d = str(tmp_path / "logs")
    mgr = LogManager([d], kcfg(), broker_id=1, cluster_id="c1")
    with pytest.raises(LogDirError, match="lock"):
        LogManager([d], kcfg())
    mgr.shutdown()
    with pytest.raises(LogDirError, match="broker.id 2 doesn't match stored broker.id 1"):
        LogManager([d], kcfg(), broker_id=2)
    with pytest.raises(LogDirError, match="Cluster ID"):
        LogManager([d], kcfg(), broker_id=1, cluster_id="other")
    LogManager([d], kcfg(), broker_id=1, cluster_id="c1").shutdown()


def test_manager_removes_stale_delete_dirs(tmp_path):
    d = tmp_path / "logs"
    (d / "t-0.0123abcd-delete").mkdir(parents=True)
    (d / "not-a-partition").mkdir()
    mgr = LogManager([str(d)], kcfg())
    assert not (d / "t-0.0123abcd-delete").exists()
    assert mgr.all_logs() == []
    mgr.shutdown()


def test_logs_not_flushed_for_their_flush_ms_are_flushed_by_the_flusher(tmp_path):
    """Kafka's LogManager.flushDirtyLogs (run every log.flush.scheduler.interval.ms): a log whose
    last flush is flush.ms or more ago is flushed; its recovery point reaches its LEO."""
    clock = Clock()
    configs = {"hourly": LogConfig({"flush.ms": "3600000"}), "second": LogConfig({"flush.ms": "1000"})}
    mgr = LogManager([str(tmp_path / "d")], kcfg(), clock, broker_id=1, cluster_id="abc",
                     topic_config=lambda topic: configs.get(topic, LogConfig()))
    logs = {t: mgr.get_or_create_log((t, 0)) for t in ("hourly", "second", "default")}
    for log in logs.values():
        log.append_as_leader(batch(3, ts=clock.ms), 0)
    clock.advance(999)
    mgr.flush_dirty_logs()
    assert [log.recovery_point for log in logs.values()] == [0, 0, 0]
    clock.advance(1)
    mgr.flush_dirty_logs()
    assert [log.recovery_point for log in logs.values()] == [0, 3, 0]
    logs["second"].append_as_leader(batch(2, ts=clock.ms), 0)
    clock.advance(500)
    mgr.flush_dirty_logs()
    assert logs["second"].recovery_point == 3   # flushed half a second ago
    clock.advance(500)
    mgr.flush_dirty_logs()
    assert logs["second"].recovery_point == 5
    mgr.shutdown()
