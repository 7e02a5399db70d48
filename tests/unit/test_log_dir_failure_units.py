"""Log-dir failure: the channel, several log dirs, the broker's handling and the controller's.

I/O errors are real: a write to ``/dev/full`` (ENOSPC) under the active segment, or a
checkpoint whose target path is a directory (the rename fails).
"""
from __future__ import annotations

import os
import uuid

import pytest

from odradek.broker.controller.request_batch import LEADER_AND_ISR, STOP_REPLICA
from odradek.broker.log.checkpoint import HIGH_WATERMARK_CHECKPOINT
from odradek.broker.log.log_dir_failure import LogDirFailureChannel
from odradek.broker.log.manager import LogDirError, LogManager
from odradek.broker.metadata_cache import PartitionMetadata
from odradek.broker.replication.log_dir_failure_handler import LogDirFailureHandler
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.znodes import LeaderIsrAndControllerEpoch as S
from odradek.zk.znodes import LogDirEventNotificationSequenceZNode

from odradek.broker.controller.core import ControllerCore

from broker_fixtures import Broker, batch
from test_controller_core import FakeChannels, FakeZk, broker, run


def test_channel_reports_a_dir_once_and_guards_turn_os_errors_into_storage_errors(tmp_path):
    channel = LogDirFailureChannel()
    told: list[str] = []
    channel.add_listener(told.append)
    d = str(tmp_path / "a")
    with pytest.raises(KafkaError) as e:
        with channel.guard(d, "writing", "x"):
            raise OSError(28, "No space left on device")
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    channel.maybe_add_offline_log_dir(d, "again", OSError(5, "EIO"))
    assert told == [os.path.abspath(d)] and channel.offline_dirs == [os.path.abspath(d)]
    with pytest.raises(KafkaError) as e:       # an offline dir is never written again
        with channel.guard(d, "writing", "y"):
            raise AssertionError("not reached")
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(ValueError):            # other errors pass through untouched
        with channel.guard(str(tmp_path / "b"), "reading", "z"):
            raise ValueError("not I/O")
    assert not channel.is_offline(str(tmp_path / "b"))


def test_log_dir_event_znode_is_kafkas_json():
    data = LogDirEventNotificationSequenceZNode.encode(3)
    assert data == b'{"version":1,"broker":3,"event":1}'
    assert LogDirEventNotificationSequenceZNode.decode(data) == 3
    assert LogDirEventNotificationSequenceZNode.decode(b'{"version":1,"broker":3,"event":2}') is None
    assert LogDirEventNotificationSequenceZNode.decode(b"junk") is None


def two_dir_broker(tmp_path) -> Broker:
    dirs = f"{tmp_path / 'd1'},{tmp_path / 'd2'}"
    return Broker(tmp_path, log_dirs=dirs)


def test_new_logs_go_to_the_dir_with_fewest_partitions_and_a_restart_finds_them_all(tmp_path):
    b = two_dir_broker(tmp_path)
    b.lead("t", partitions=5)
    placed = {p: os.path.basename(b.log_manager.log_dir_of(("t", p))) for p in range(5)}
    assert sorted(placed.values()) == ["d1", "d1", "d1", "d2", "d2"]
    for p in range(5):
        assert os.path.isdir(tmp_path / placed[p] / f"t-{p}")
    b.rm.append_records(1000, 1, {("t", p): batch(2) for p in range(5)})
    b.close()
    again = LogManager(b.config.log_dirs, b.config)
    try:
        assert {tp: os.path.basename(again.log_dir_of(tp) or "") for tp in
                (log.topic_partition for log in again.all_logs())} == {("t", p): placed[p] for p in range(5)}
        assert all(log.log_end_offset == 2 for log in again.all_logs())
    finally:
        again.shutdown()


class Recorder:
    def __init__(self, broker: Broker):
        self.notified = 0
        self.fatal: list[str] = []
        self.handler = LogDirFailureHandler(broker.rm, broker.log_manager, self.notify, self.fatal.append)
        broker.log_manager.failure_channel.add_listener(self.handler.handle)   # inline: no reactor here

    def notify(self):
        self.notified += 1
        return "log_dir_event_0000000000"


def fill(log) -> None:
    """Every later write to the active segment fails with ENOSPC (the device is full)."""
    seg = log.active_segment
    os.close(seg._fd)
    seg._fd = os.open("/dev/full", os.O_WRONLY | os.O_APPEND)


def test_enospc_on_append_takes_only_that_dir_offline(tmp_path):
    b = two_dir_broker(tmp_path)
    rec = Recorder(b)
    b.lead("t", partitions=2)
    lm = b.log_manager
    bad_dir = lm.log_dir_of(("t", 1))
    assert bad_dir != lm.log_dir_of(("t", 0))
    fill(lm.get_log(("t", 1)))
    res = b.rm.append_records(1000, 1, {("t", 0): batch(1), ("t", 1): batch(1)}).result
    assert res[("t", 0)]["error_code"] == 0
    assert res[("t", 1)]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    assert lm.failure_channel.offline_dirs == [bad_dir] and rec.notified == 1 and not rec.fatal
    assert ("t", 1) not in b.rm.partitions and lm.get_log(("t", 1)) is None
    # still serving the other dir; the offline partition answers KAFKA_STORAGE_ERROR everywhere
    assert b.rm.append_records(1000, 1, {("t", 0): batch(1)}).result[("t", 0)]["error_code"] == 0
    assert b.rm.append_records(1000, 1, {("t", 1): batch(1)}).result[("t", 1)]["error_code"] == 56
    st = PartitionMetadata("t", 1, 1, 1, 5, [1], 0, [1])
    assert b.rm.become_leader_or_follower(1, [st])[1][("t", 1)] == ErrorCode.KAFKA_STORAGE_ERROR
    # while a dir is offline a replica gets a log only if it is new to this broker (LeaderAndIsr's
    # is_new): another one's data may be in the offline dir
    old, new = PartitionMetadata("u", 0, 1, 1, 1, [1], 0, [1]), PartitionMetadata("u", 1, 1, 1, 1, [1], 0, [1],
                                                                                   is_new=True)
    assert b.rm.become_leader_or_follower(1, [old, new])[1] == {("u", 0): ErrorCode.KAFKA_STORAGE_ERROR,
                                                               ("u", 1): ErrorCode.NONE}
    assert lm.get_log(("u", 0)) is None and lm.log_dir_of(("u", 1)) == lm.log_dir_of(("t", 0)) != bad_dir
    assert b.rm.append_records(1000, 1, {("u", 1): batch(1)}).result[("u", 1)]["error_code"] == 0
    b.rm.checkpoint_high_watermarks()          # only the live dir is written
    assert not os.path.exists(os.path.join(bad_dir, ".kafka_cleanshutdown"))
    b.close()
    assert os.path.exists(os.path.join(lm.log_dir_of(("t", 0)) or "", ".kafka_cleanshutdown"))


def test_a_failed_high_watermark_checkpoint_takes_the_dir_offline_and_the_last_dir_is_fatal(tmp_path):
    b = Broker(tmp_path)
    rec = Recorder(b)
    b.lead("t")
    d = b.log_manager.log_dirs[0]
    os.mkdir(os.path.join(d, HIGH_WATERMARK_CHECKPOINT + ".tmp"))   # the write cannot even start
    b.rm.checkpoint_high_watermarks()           # no traceback escapes
    assert b.log_manager.all_offline and rec.fatal == [d] and rec.notified == 0
    assert b.rm.append_records(1000, 1, {("t", 0): batch(1)}).result[("t", 0)]["error_code"] == 56
    b.close()                                   # a clean shutdown writes nothing to the failed dir
    assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))


def test_a_dir_that_cannot_be_used_at_startup_starts_offline(tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where a directory should be")
    b = Broker(tmp_path, log_dirs=f"{tmp_path / 'ok'},{blocked}")
    assert b.log_manager.failure_channel.offline_dirs == [str(blocked)]
    assert b.log_manager.live_log_dirs == [str(tmp_path / "ok")]
    # its partitions may be in the offline dir: no replica is created empty elsewhere
    st = PartitionMetadata("t", 0, 1, 1, 0, [1], 0, [1])
    assert b.rm.become_leader_or_follower(1, [st])[1][("t", 0)] == ErrorCode.KAFKA_STORAGE_ERROR
    b.close()


def test_with_every_dir_unusable_the_broker_does_not_start(tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("x")
    with pytest.raises(LogDirError):
        Broker(tmp_path, log_dirs=str(blocked))


# ---------------------------------------------------------------- controller


class LogDirFakeZk(FakeZk):
    def __init__(self) -> None:
        super().__init__()
        self.log_dir_events: dict[str, int] = {}

    async def get_log_dir_event_notifications(self):
        return sorted(self.log_dir_events)

    async def get_broker_ids_from_log_dir_events(self, names):
        return [self.log_dir_events[n] for n in names if n in self.log_dir_events]

    async def delete_log_dir_event_notifications(self, names):
        self._fence()
        for n in names:
            self.log_dir_events.pop(n, None)


def test_controller_moves_leaders_off_replicas_on_an_offline_dir():
    zk = LogDirFakeZk()
    for b in (1, 2, 3):
        zk.brokers[b] = broker(b)
    zk.topics["t"] = {0: [2, 1, 3], 1: [1, 2, 3]}
    zk.states.update({("t", 0): S(2, 4, [2, 1, 3], 1, 0), ("t", 1): S(1, 4, [1, 2, 3], 1, 0)})
    zk.log_dir_events = {"log_dir_event_0000000000": 2}   # pending at failover: deleted
    ch = FakeChannels()
    core = ControllerCore(1, zk, ch)
    run(core.on_controller_failover(5, 0))
    assert zk.log_dir_events == {}
    ch.take()
    # the notification makes the controller ask broker 2 about every replica it hosts
    zk.log_dir_events = {"log_dir_event_0000000001": 2}
    run(core.on_log_dir_event_notification())
    assert zk.log_dir_events == {}
    lais = ch.take(LEADER_AND_ISR)
    assert [r.broker_id for r in lais] == [2]
    # broker 2 answers KAFKA_STORAGE_ERROR for t-0 only
    run(core.on_leader_and_isr_response(2, {("t", 0): 56, ("t", 1): 0}))
    assert zk.states[("t", 0)].leader == 1 and 2 not in zk.states[("t", 0)].isr
    assert zk.states[("t", 1)].leader == 1 and zk.states[("t", 1)].isr == [1, 2, 3]
    assert [r.broker_id for r in ch.take(STOP_REPLICA)] == [2]
    assert not core.ctx.is_replica_online(2, ("t", 0)) and core.ctx.is_replica_online(2, ("t", 1))
    # the same answer again changes nothing; a re-registered broker starts with every dir online
    writes = len(zk.writes)
    run(core.on_leader_and_isr_response(2, {("t", 0): 56}))
    assert len(zk.writes) == writes
    core.log_dirs.forget_brokers([2])
    assert core.ctx.is_replica_online(2, ("t", 0))


def test_leader_and_isr_answers_are_read_per_partition_in_every_version():
    from odradek.broker.controller.log_dir_failure import partition_errors
    from odradek.protocol.apis import leader_and_isr as lai
    request = {"topic_states": [{"topic_name": "a"}, {"topic_name": "b"}]}
    v4 = {"error_code": 0, "partition_errors": [{"topic_name": "a", "partition_index": 0, "error_code": 56},
                                                {"topic_name": "b", "partition_index": 1, "error_code": 0}]}
    zero = uuid.UUID(int=0)
    v5 = {"error_code": 0, "topics": [
        {"topic_id": zero, "partition_errors": [{"partition_index": 0, "error_code": 56}]},
        {"topic_id": zero, "partition_errors": [{"partition_index": 1, "error_code": 0}]}]}
    for version, body in ((4, v4), (5, v5)):
        decoded = lai.Response.decode(lai.Response.encode(body, version), version)
        assert partition_errors(version, request, decoded) == {("a", 0): 56, ("b", 1): 0}
