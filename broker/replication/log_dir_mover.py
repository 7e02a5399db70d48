"""Moving a replica between this broker's log dirs while it serves (AlterReplicaLogDirs, KIP-113).

Kafka's ReplicaManager.alterReplicaLogDirs, Partition.maybeCreateFutureReplica and
ReplicaAlterLogDirsThread, as one object driven by the reactor.

Invariants:
- the work list IS the log manager's future logs: a future log is filled from its partition's
  current log (read locally, never over the network) while the partition keeps serving; one
  chunk of at most ``replica.fetch.max.bytes`` per reactor turn, round-robin over the moving
  partitions, paused while ``replica.alter.log.dirs.io.max.bytes.per.second`` (the sampled
  ``ReplicationQuota``) is exceeded; a partition not online here (offline dir, not yet led or
  followed after a restart) waits; a future log removed meanwhile (deletion, a new move) simply
  leaves the list. A restart therefore resumes every move it loads;
- the future log never runs ahead of the current one: a truncation of the current log
  truncates it too (``on_truncate``), and data below the current log start is skipped;
- the future replaces the current log in the same reactor turn in which it has caught up with
  the current log end (no append can interleave): the producer state, leader epoch cache, HW
  and log start carry over, the old dir is renamed ``-delete`` and removed in the thread pool;
- the log cleaner skips exactly the moving partitions (``LogCleaner.paused``, replaced whole
  whenever the future logs change, so a deleted or finished move never stays paused).
"""
from __future__ import annotations

import logging
import os
import shutil
from typing import Any, Callable

from twisted.internet import defer, threads

from odradek.protocol.errors import ErrorCode, KafkaError

from ..log.epoch_cache import LEADER_EPOCH_CHECKPOINT
from ..log.log import UnexpectedAppendOffsetError
from .replication_quota import ReplicationQuota

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
MAX_NAME_LENGTH = 255          # a future dir's name must fit (Kafka's check, KAFKA-4893)
FUTURE_NAME_EXTRA = 1 + 32 + len("-future")   # ".<uuid hex>-future"
WAIT_S = 0.1                    # re-check while throttled or while a moving partition is not online


class ReplicaAlterLogDirsManager:
    def __init__(self, replica_manager: Any, log_manager: Any, scheduler: Any, max_bytes: int = 1048576,
                 delete_dir: Callable[[str], Any] | None = None):
        self.rm = replica_manager
        self.lm = log_manager
        self.scheduler = scheduler
        self.max_bytes = max_bytes
        self.quota = ReplicationQuota()
        self._delete_dir = delete_dir or (lambda path: threads.deferToThread(shutil.rmtree, path, True))
        self._call: Any = None
        self._next = 0
        self._running = False
        self.moves_completed = 0

    # ------------------------------------------------------------ the request
    def alter(self, partition_dirs: dict[TopicPartition, str]) -> dict[TopicPartition, ErrorCode]:
        """Kafka's ReplicaManager.alterReplicaLogDirs: per partition, its error code."""
        out: dict[TopicPartition, ErrorCode] = {}
        try:
            self._alter_all(partition_dirs, out)
        finally:
            self._sync_paused()
        self.wake()
        return out

    def _alter_all(self, partition_dirs: dict[TopicPartition, str], out: dict[TopicPartition, ErrorCode]) -> None:
        for tp, d in partition_dirs.items():
            try:
                self._alter_one(tp, d)
                out[tp] = ErrorCode.NONE
            except KafkaError as e:
                log.warning("Unable to alter log dirs for %s-%d: %s", tp[0], tp[1], e.message or e.code.name)
                out[tp] = e.code
            except Exception:
                log.exception("Error while changing replica dir for partition %s-%d", *tp)
                out[tp] = ErrorCode.UNKNOWN_SERVER_ERROR

    def _alter_one(self, tp: TopicPartition, d: str) -> None:
        lm, rm = self.lm, self.rm
        if len(f"{tp[0]}-{tp[1]}") + FUTURE_NAME_EXTRA > MAX_NAME_LENGTH:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic name is too long.")
        lm.check_log_dir(d)
        if tp in rm.offline_partitions:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Partition {tp[0]}-{tp[1]} is offline")
        future_dir = lm.future_log_dir_of(tp)
        if future_dir is not None and future_dir != d:   # a different running move: it stops
            lm.remove_future_log(tp)
        lm.maybe_update_preferred_log_dir(tp, d)
        p = rm.partitions.get(tp)
        current = lm.get_log(tp)
        if p is None or p.log is None or current is None:
            # the replica is created in ``d`` when it comes (Kafka keeps REPLICA_NOT_AVAILABLE here)
            raise KafkaError(ErrorCode.REPLICA_NOT_AVAILABLE, f"no replica of {tp[0]}-{tp[1]} on this broker")
        if lm.log_dir_of(tp) == d or lm.future_log_dir_of(tp) == d:
            lm.preferred_log_dirs.pop(tp, None)
            return
        with p.io_guard("creating the future log of"):
            future = lm.create_future_log(tp, d, rm.log_config(tp[0]))
        log.info("moving %s-%d from %s to %s (future log %s)", tp[0], tp[1], lm.log_dir_of(tp), d, future.dir)

    # ------------------------------------------------------------ the mover
    def start(self) -> None:
        self._running = True
        self.wake()     # moves loaded at startup resume

    def stop(self) -> None:
        self._running = False
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None

    def wake(self) -> None:
        """Copy now (a move started, a partition came online, the throttle changed)."""
        self._schedule(0)

    def _schedule(self, delay: float) -> None:
        if not self._running:
            return
        if self._call is not None and self._call.active():
            if delay > 0 or self._call.getTime() <= self.scheduler.seconds():
                return
            self._call.cancel()
        self._call = self.scheduler.callLater(delay, self._tick)

    def _tick(self) -> None:
        self._call = None
        self._sync_paused()
        futures = self.lm.future_logs()
        if not futures:
            return
        if self.quota.is_exceeded(self.scheduler.seconds()):
            self._schedule(WAIT_S)
            return
        busy = False
        for i in range(len(futures)):
            future = futures[(self._next + i) % len(futures)]
            p = self.rm.partitions.get(future.topic_partition)
            if p is None or p.log is None:
                continue
            self._next = (self._next + i + 1) % len(futures)
            try:
                busy = self._step(p, future)
            except KafkaError as e:
                log.warning("moving %s-%d: %s", p.topic, p.partition, e)
            except Exception:
                log.exception("moving %s-%d failed", p.topic, p.partition)
            break
        self._schedule(0 if busy else WAIT_S)

    def _step(self, p: Any, future: Any) -> bool:
        """Copy one chunk; swap once caught up. True while there is more to copy now."""
        current = p.log
        if current.log_start_offset > future.log_end_offset:   # deleted meanwhile: not copied
            with p.io_guard("truncating the future log of", future):
                future.truncate_fully_and_start_at(current.log_start_offset)
        if future.log_end_offset < current.log_end_offset:
            with p.io_guard("reading"):
                data = current.read(future.log_end_offset, self.max_bytes, None, True)
            if data:
                with p.io_guard("appending to the future log of", future):
                    try:
                        future.append_as_follower(data)
                    except UnexpectedAppendOffsetError as e:
                        if future.size:
                            raise
                        # the log start is inside the first batch: the future starts at that batch
                        future.truncate_fully_and_start_at(e.first_offset)
                        future.append_as_follower(data)
                self.quota.record(len(data), self.scheduler.seconds())
        if future.log_end_offset == current.log_end_offset:
            self._complete(p, future)
            return False
        return True

    def on_truncate(self, tp: TopicPartition, offset: int) -> None:
        """The current log was truncated to ``offset``: so is the future log."""
        future = self.lm.get_future_log(tp)
        if future is None:
            return
        if offset < future.log_start_offset:
            future.truncate_fully_and_start_at(offset)
        elif future.log_end_offset > offset:
            future.truncate_to(offset)

    def _complete(self, p: Any, future: Any) -> None:
        """Kafka's maybeReplaceCurrentWithFutureReplica, in this reactor turn."""
        tp = p.tp
        current = p.log
        hw = p.high_watermark
        with p.io_guard("replacing the current log with the future log of", future):
            new, trash = self.lm.replace_current_with_future(tp)
            new.config = current.config
            new.producer_state = current.producer_state
            new.producer_state.dir = new.dir
            new.leader_epoch_cache = current.leader_epoch_cache
            new.leader_epoch_cache.move_to(os.path.join(new.dir, LEADER_EPOCH_CHECKPOINT))
        new.log_start_offset = current.log_start_offset
        p.log = new
        p.high_watermark = hw
        self.moves_completed += 1
        self._sync_paused()
        d = defer.maybeDeferred(self._delete_dir, trash)
        d.addErrback(lambda f: log.warning("deleting %s failed: %s", trash, f.getErrorMessage()))
        self.rm.wake([tp])

    # ------------------------------------------------------------ the cleaner
    def _sync_paused(self) -> None:
        """The cleaner leaves exactly the moving partitions alone (a new set: its thread reads it)."""
        cleaner = getattr(self.rm.cleaner, "cleaner", self.rm.cleaner)
        if cleaner is not None and hasattr(cleaner, "paused"):
            cleaner.paused = frozenset(f.topic_partition for f in self.lm.future_logs())
