"""LogManager: every partition log of this broker, across its log directories.

Invariants:
- each log dir is locked (``.lock``, flock) while the manager owns it;
- ``.kafka_cleanshutdown`` exists in a log dir only between ``shutdown()`` and the
  next load: it is removed as soon as the logs are loaded, so a later crash is
  seen as unclean and the logs are recovered from their checkpointed recovery points;
- checkpoint files name only partitions present in their log dir;
- a partition has at most one future log (AlterReplicaLogDirs: ``<topic>-<p>.<uuid>-future`` in
  another dir than its current log), never without a current log except after a crash inside
  ``replace_current_with_future``, which the next load completes (the future is promoted);
- an I/O error under a log dir (loading, creating a log, retention, any checkpoint)
  goes to the ``LogDirFailureChannel``: the dir is offline until restart, its logs are
  closed and forgotten (``handle_log_dir_failure``), nothing is written there again, and
  new logs go only to live dirs, meanwhile only for replicas new to this broker (LeaderAndIsr's
  ``is_new``). With every dir offline the broker must stop
  (``LogDirError`` at load; ``all_offline`` afterwards).
All methods are short blocking file operations, called from the reactor thread, but for the
periodic checkpoints (``checkpoint_recovery_points``, ``checkpoint_log_start_offsets``,
``write_high_watermarks``) and ``logs_due_for_cleanup``, which the broker runs on a thread: they
read the tables through ``broker/periodic.py:items_from_thread`` (or key by key), and every
checkpoint file is written under one lock, so two writers never share a ``.tmp`` file.
"""
from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
import time as _time
import uuid
from typing import Any, Callable, ContextManager, Iterable, Mapping

from odradek.protocol.errors import ErrorCode, KafkaError

from ..config.kafka_config import KafkaConfig, LogConfig
from .checkpoint import (CLEAN_SHUTDOWN_FILE, HIGH_WATERMARK_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                         META_PROPERTIES, RECOVERY_POINT_CHECKPOINT, CheckpointError,
                         OffsetCheckpointFile, read_properties, write_properties)
from .producer_state import DEFAULT_EXPIRATION_MS
from .epoch_cache import flush_all
from .log import FUTURE_DIR_SUFFIX, Log, parse_topic_partition
from .log_syncs import LogSyncs
from .log_dir_failure import LogDirFailureChannel, storage_error
from .partition_metadata import read_topic_id, write_topic_id
from ..periodic import items_from_thread

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
DELETE_DIR_SUFFIX = "-delete"
LOCK_FILE = ".lock"


class LogDirError(Exception):
    """A log directory problem (locked by another broker, inconsistent meta.properties...)."""


class LogManager:
    """Loads, creates, deletes and checkpoints the partition logs of a broker."""

    def __init__(self, log_dirs: list[str] | str, config: KafkaConfig,
                 time: Callable[[], float] = _time.time, *, broker_id: int | None = None,
                 cluster_id: str | None = None,
                 topic_config: Callable[[str], LogConfig] | None = None,
                 failure_channel: LogDirFailureChannel | None = None) -> None:
        if isinstance(log_dirs, str):
            log_dirs = [d for d in log_dirs.split(",") if d.strip()]
        self.log_dirs = [os.path.abspath(d.strip()) for d in log_dirs]
        if len(set(self.log_dirs)) != len(self.log_dirs):
            raise LogDirError(f"duplicate log directory in {','.join(self.log_dirs)}")
        self.config = config
        self._time = time
        self.syncs = LogSyncs(self._sync_failed)   # where the logs' fsyncs run: run_syncs_in
        self._topic_config = topic_config or (lambda topic: LogConfig.from_broker(config))
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, str] = {}
        self._future_logs: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, str] = {}
        # where a partition's log goes when it is created here (AlterReplicaLogDirs before the replica exists)
        self.preferred_log_dirs: dict[TopicPartition, str] = {}
        self._locks: dict[str, int] = {}
        self._checkpoint_lock = threading.Lock()   # held while any checkpoint file is written
        self._closed = False
        self.failure_channel = failure_channel or LogDirFailureChannel()
        try:
            for d in self.log_dirs:
                try:
                    os.makedirs(d, exist_ok=True)
                    self._lock(d)
                except OSError as e:   # Kafka's createAndValidateLogDirs: this dir starts offline
                    self.failure_channel.maybe_add_offline_log_dir(d, "cannot create or lock the log dir", e)
            self._require_live_dirs()
            if broker_id is not None or cluster_id is not None:
                self.check_and_write_meta_properties(broker_id, cluster_id)
            for d in self.live_log_dirs:
                try:
                    self._load_dir(d)
                except OSError as e:
                    self.failure_channel.maybe_add_offline_log_dir(d, "loading the logs failed", e)
                    self.handle_log_dir_failure(d)
            self._require_live_dirs()
            self._promote_orphan_futures()
        except BaseException:
            for log in [*self._logs.values(), *self._future_logs.values()]:
                log.close()
            self._unlock_all()
            raise

    # ---------------------------------------------------------------- log dir failure
    @property
    def live_log_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if not self.failure_channel.is_offline(d)]

    @property
    def all_offline(self) -> bool:
        return not self.live_log_dirs

    def is_log_dir_online(self, d: str) -> bool:
        return not self.failure_channel.is_offline(d)

    def _require_live_dirs(self) -> None:
        if self.all_offline:
            raise LogDirError(f"all log dirs in {','.join(self.log_dirs)} have failed")

    def handle_log_dir_failure(self, d: str) -> list[TopicPartition]:
        """Forget the logs of offline dir ``d`` (closed without writing) and release its lock;
        the partitions that were in it (Kafka's ``LogManager.handleLogDirFailure``)."""
        d = os.path.abspath(d)
        gone = sorted(tp for tp, ld in self._log_dir_of.items() if ld == d)
        dropped = [(tp, self._logs.pop(tp, None)) for tp in gone]
        for tp in [tp for tp, fd in self._future_dir_of.items() if fd == d or tp in gone]:
            self._future_dir_of.pop(tp, None)   # a move into or out of the failed dir ends
            dropped.append((tp, self._future_logs.pop(tp, None)))
        for tp, log in dropped:
            self._log_dir_of.pop(tp, None)
            if log is not None:
                for seg in log.segments:
                    try:
                        seg.close_handlers()
                    except OSError:
                        pass
        fd = self._locks.pop(d, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
        logger.error("logs of %d partitions are offline after the failure of log dir %s: %s", len(gone), d,
                     ", ".join(f"{t}-{p}" for t, p in gone))
        return gone

    def _io(self, d: str, what: str) -> ContextManager[None]:
        return self.failure_channel.guard(d, what, f"in {d}")

    def run_syncs_in(self, run_in_thread: Callable[..., Any]) -> None:
        """From now on the flush of a rolled segment, ``flush.messages``' and the ``flush.ms``
        flusher's run through ``run_in_thread`` (a Deferred of its call on the server's thread
        pool), as Kafka runs them on its scheduler's thread (``log_syncs.py``): the fsync of a 1 GB
        segment held the reactor, and every client, for up to a second. Until then (loading,
        tools, tests) they flush in place."""
        self.syncs.run_in(run_in_thread)

    def _sync_failed(self, log: Log, e: OSError) -> None:
        """A failed sync takes its log dir offline, as a failed flush on the reactor does."""
        try:
            with self._io(os.path.dirname(log.dir.rstrip("/")), f"flushing {log.topic}-{log.partition}"):
                raise e
        except KafkaError as k:
            logger.error("%s", k)

    # ---------------------------------------------------------------- startup
    def _lock(self, d: str) -> None:
        fd = os.open(os.path.join(d, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            self._unlock_all()
            raise LogDirError(f"Failed to acquire lock on file .lock in {d}. "
                              f"A Kafka instance in another process or thread is using this directory.") from None
        self._locks[d] = fd

    def _unlock_all(self) -> None:
        for fd in self._locks.values():
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self._locks.clear()

    def _read_offsets(self, d: str, name: str) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(os.path.join(d, name)).read()
        except CheckpointError as e:
            logger.warning("ignoring malformed checkpoint: %s", e)
            return {}

    def _load_dir(self, d: str) -> None:
        marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        recovery_points = self._read_offsets(d, RECOVERY_POINT_CHECKPOINT)
        start_offsets = self._read_offsets(d, LOG_START_OFFSET_CHECKPOINT)
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            try:
                tp = parse_topic_partition(name)
            except ValueError:
                continue
            future = name.endswith(FUTURE_DIR_SUFFIX)
            logs, dirs = (self._future_logs, self._future_dir_of) if future else (self._logs, self._log_dir_of)
            if tp in logs:
                raise LogDirError(f"Duplicate log directories for {tp[0]}-{tp[1]}: "
                                  f"{logs[tp].dir} and {path}")
            log = Log(path, self._topic_config(tp[0]), recovery_points.get(tp, 0), self._time,
                      start_offsets.get(tp, 0), had_clean_shutdown=clean,
                      producer_id_expiration_ms=self._producer_id_expiration_ms(), syncs=self.syncs)
            logs[tp] = log
            dirs[tp] = d
        if clean:
            os.remove(marker)
        logger.info("loaded %d logs from %s (%s shutdown)", sum(1 for v in self._log_dir_of.values() if v == d),
                    d, "clean" if clean else "unclean")

    def check_and_write_meta_properties(self, broker_id: int | None, cluster_id: str | None) -> None:
        """Check every dir's meta.properties against ``broker_id``/``cluster_id`` and
        write it where it is missing (``BrokerMetadataCheckpoint``)."""
        stored = self.stored_broker_metadata()
        if broker_id is not None and stored.get("broker.id") not in (None, str(broker_id)):
            raise LogDirError(f"Configured broker.id {broker_id} doesn't match stored broker.id "
                              f"{stored['broker.id']} in meta.properties")
        if cluster_id is not None and stored.get("cluster.id") not in (None, cluster_id):
            raise LogDirError(f"The Cluster ID {cluster_id} doesn't match stored clusterId "
                              f"{stored['cluster.id']} in meta.properties")
        props = {"version": "0"}
        if broker_id is not None:
            props["broker.id"] = str(broker_id)
        if cluster_id is not None:
            props["cluster.id"] = cluster_id
        for d in self.live_log_dirs:
            path = os.path.join(d, META_PROPERTIES)
            try:
                current = read_properties(path)
                if current != {**(current or {}), **props}:
                    write_properties(path, {**(current or {}), **props}, _time.strftime("%a %b %d %H:%M:%S %Z %Y"))
            except OSError as e:
                self.failure_channel.maybe_add_offline_log_dir(d, "writing meta.properties failed", e)
        self._require_live_dirs()

    def stored_broker_metadata(self) -> dict[str, str]:
        """The meta.properties shared by all log dirs ({} if none); LogDirError if they disagree."""
        seen: dict[str, str] = {}
        for d in self.live_log_dirs:
            props = read_properties(os.path.join(d, META_PROPERTIES))
            if not props:
                continue
            for key in ("broker.id", "cluster.id"):
                if key in props:
                    if key in seen and seen[key] != props[key]:
                        raise LogDirError(f"Inconsistent {key} in meta.properties across log dirs: "
                                          f"{seen[key]} and {props[key]}")
                    seen[key] = props[key]
        return seen

    # ---------------------------------------------------------------- logs
    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tuple(tp))  # type: ignore[arg-type]

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def log_dir_of(self, tp: TopicPartition) -> str | None:
        return self._log_dir_of.get(tuple(tp))  # type: ignore[arg-type]

    def _next_log_dir(self, tp: TopicPartition | None = None) -> str:
        """The live log dir holding the fewest partitions (the first such in ``log.dirs``)."""
        live = self.live_log_dirs
        if not live:
            raise storage_error("no live log dir left")
        preferred = self.preferred_log_dirs.pop(tp, None) if tp is not None else None
        if preferred in live:
            return preferred
        counts = {d: 0 for d in live}
        for d in self._log_dir_of.values():
            if d in counts:
                counts[d] += 1
        return min(live, key=lambda d: counts[d])

    def get_or_create_log(self, tp: TopicPartition, log_config: LogConfig | None = None,
                          is_new: bool = False) -> Log:
        """The partition's log, created in the live log dir with the fewest partitions if absent.

        While a log dir is offline only a replica new to this broker (LeaderAndIsr's ``is_new``)
        gets a log; any other may have its data in the offline dir (KAFKA_STORAGE_ERROR), and an
        empty log in its place could later lead and lose that data (Kafka's getOrCreateLog)."""
        tp = (tp[0], int(tp[1]))
        log = self._logs.get(tp)
        if log is not None:
            return log
        offline = self.failure_channel.offline_dirs
        if offline and not is_new:
            raise storage_error(f"cannot create the log of {tp[0]}-{tp[1]}: log dirs {','.join(offline)} are offline")
        d = self._next_log_dir(tp)
        config = log_config or self._topic_config(tp[0])
        with self._io(d, f"creating the log of {tp[0]}-{tp[1]}"):
            log = Log(os.path.join(d, f"{tp[0]}-{tp[1]}"), config, 0, self._time, 0, had_clean_shutdown=True,
                      producer_id_expiration_ms=self._producer_id_expiration_ms(), syncs=self.syncs)
        self._logs[tp] = log
        self._log_dir_of[tp] = d
        logger.info("created log for %s-%d in %s", tp[0], tp[1], d)
        return log

    def delete_log(self, tp: TopicPartition) -> bool:
        """Remove the log: rename its dir to ``<topic>-<p>.<uuid>-delete`` then delete it."""
        tp = (tp[0], int(tp[1]))
        self.remove_future_log(tp)
        self.preferred_log_dirs.pop(tp, None)
        log = self._logs.pop(tp, None)
        d = self._log_dir_of.pop(tp, None)
        if log is None or d is None:
            return False
        target = f"{log.dir}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        with self._io(d, f"deleting the log of {tp[0]}-{tp[1]}"):
            log.rename_dir(target)
            shutil.rmtree(target, ignore_errors=True)
            self._checkpoint_dir(d)
        return True

    # ---------------------------------------------------------------- future logs
    def get_future_log(self, tp: TopicPartition) -> Log | None:
        return self._future_logs.get(tuple(tp))  # type: ignore[arg-type]

    def future_logs(self) -> list[Log]:
        return list(self._future_logs.values())

    def future_log_dir_of(self, tp: TopicPartition) -> str | None:
        return self._future_dir_of.get(tuple(tp))  # type: ignore[arg-type]

    def check_log_dir(self, d: str) -> None:
        """LOG_DIR_NOT_FOUND unless ``d`` is a configured log dir (its absolute path, as Kafka
        compares), KAFKA_STORAGE_ERROR if it is offline (``LogManager.isLogDirOnline``)."""
        if d not in self.log_dirs:
            raise KafkaError(ErrorCode.LOG_DIR_NOT_FOUND, f"Log dir {d} is not found in the config.")
        if not self.is_log_dir_online(d):
            raise storage_error(f"Log directory {d} is offline")

    def maybe_update_preferred_log_dir(self, tp: TopicPartition, d: str) -> None:
        """Remember ``d`` for the partition's log unless its current or future log is there."""
        tp = (tp[0], int(tp[1]))
        if self._log_dir_of.get(tp) != d and self._future_dir_of.get(tp) != d:
            self.preferred_log_dirs[tp] = d

    def create_future_log(self, tp: TopicPartition, d: str, log_config: LogConfig | None = None) -> Log:
        """An empty future log of ``tp`` in ``d`` starting at the current log's start offset (not
        while any dir is offline, as Kafka: the future could otherwise exist in two dirs)."""
        tp = (tp[0], int(tp[1]))
        current = self._logs[tp]
        offline = self.failure_channel.offline_dirs
        if offline:
            raise storage_error(f"Can not create log for {tp[0]}-{tp[1]} because log directories "
                                f"{','.join(offline)} are offline")
        path = os.path.join(d, f"{tp[0]}-{tp[1]}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}")
        with self._io(d, f"creating the future log of {tp[0]}-{tp[1]}"):
            log = Log(path, log_config or current.config, 0, self._time, 0, had_clean_shutdown=True,
                      producer_id_expiration_ms=self._producer_id_expiration_ms(), syncs=self.syncs)
            if current.log_start_offset > 0:
                log.truncate_fully_and_start_at(current.log_start_offset)
            topic_id = read_topic_id(current.dir)
            if topic_id is not None:
                write_topic_id(log.dir, topic_id)
        self._future_logs[tp] = log
        self._future_dir_of[tp] = d
        self.preferred_log_dirs.pop(tp, None)
        logger.info("created future log for %s-%d in %s", tp[0], tp[1], d)
        return log

    def remove_future_log(self, tp: TopicPartition) -> bool:
        """Drop the partition's future log (a cancelled or replaced move, a deleted partition)."""
        tp = (tp[0], int(tp[1]))
        log = self._future_logs.pop(tp, None)
        d = self._future_dir_of.pop(tp, None)
        if log is None or d is None:
            return False
        target = log.dir[:-len(FUTURE_DIR_SUFFIX)] + DELETE_DIR_SUFFIX
        with self._io(d, f"deleting the future log of {tp[0]}-{tp[1]}"):
            log.rename_dir(target)
            shutil.rmtree(target, ignore_errors=True)
        logger.info("removed the future log of %s-%d from %s", tp[0], tp[1], d)
        return True

    def replace_current_with_future(self, tp: TopicPartition) -> tuple[Log, str]:
        """The future log becomes the partition's log (Kafka's replaceCurrentWithFutureLog):
        the current dir is renamed ``<topic>-<p>.<uuid>-delete`` first (its files closed, nothing
        written), then the future one ``<topic>-<p>`` (kept open; a crash between the two renames
        is completed by the next load). Returns the new log (the caller carries the in-memory
        state over) and the renamed old dir, for the caller to delete off the reactor."""
        tp = (tp[0], int(tp[1]))
        current = self._logs[tp]
        old_d, new_d = self._log_dir_of[tp], self._future_dir_of[tp]
        trash = f"{current.dir}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        with self._io(old_d, f"moving the log of {tp[0]}-{tp[1]} away"):
            for seg in current.segments:
                seg.close_handlers()
            os.replace(current.dir, trash)
        with self._io(new_d, f"renaming the future log of {tp[0]}-{tp[1]}"):
            log = self._promote(tp)
        # no checkpoint is written here (fsyncs on the reactor): the new dir's files already name the
        # partition (the future log was checkpointed there), the old dir's entry has no log any more
        logger.info("the log of %s-%d moved from %s to %s", tp[0], tp[1], old_d, new_d)
        return log, trash

    def _promote(self, tp: TopicPartition) -> Log:
        """Rename the future log's dir to ``<topic>-<p>``: it is the current log from now on."""
        future, d = self._future_logs.pop(tp), self._future_dir_of.pop(tp)
        future.rename_open(os.path.join(d, f"{tp[0]}-{tp[1]}"))
        self._logs[tp], self._log_dir_of[tp] = future, d
        return future

    def _promote_orphan_futures(self) -> None:
        """A future log without a current one was being swapped in when the broker stopped."""
        for tp in [tp for tp in self._future_logs if tp not in self._logs]:
            self._promote(tp)
            logger.warning("completed the interrupted move of %s-%d to %s", tp[0], tp[1], self._log_dir_of[tp])

    def _producer_id_expiration_ms(self) -> int:
        """Kafka expires idle producer ids after transactional.id.expiration.ms."""
        try:
            return int(self.config["transactional.id.expiration.ms"])
        except (KeyError, TypeError, ValueError):
            return DEFAULT_EXPIRATION_MS

    def logs_due_for_cleanup(self) -> list[TopicPartition]:
        """The logs ``cleanup_logs`` would change now (a segment past retention, an expired producer
        id): a read only, which the broker runs on a thread. A log whose check fails is listed too,
        for ``cleanup_logs`` to meet the error where it is reported."""
        due = []
        for tp, log in items_from_thread(self._logs):
            try:
                if log.retention_due() or log.has_expired_producers():
                    due.append(tp)
            except Exception:
                due.append(tp)
        return due

    def cleanup_logs(self, tps: Iterable[TopicPartition] | None = None) -> int:
        """Apply retention to the logs of ``tps`` (every log by default) and expire their idle
        producer ids; returns the number of segments deleted."""
        total = 0
        for tp in list(self._logs) if tps is None else tps:
            log = self._logs.get(tp)
            d = self._log_dir_of.get(tp)
            if log is None or d is None or not self.is_log_dir_online(d):
                continue
            try:
                with self._io(d, f"retention of {tp[0]}-{tp[1]}"):
                    total += log.delete_old_segments()
                    log.remove_expired_producers()
            except KafkaError as e:
                logger.warning("%s", e)
        return total

    def flush_dirty_logs(self) -> Any:
        """Flush every log not flushed for its ``flush.ms`` (Kafka's ``LogManager.flushDirtyLogs``,
        run every ``log.flush.scheduler.interval.ms``): the syncs prepared here and run on the
        thread once there is one (``run_syncs_in``), as Kafka's flusher runs on its scheduler's;
        a Deferred of them then."""
        now = int(self._time() * 1000)
        syncs = []
        for tp, log in list(self._logs.items()):
            d = self._log_dir_of.get(tp)
            if d is None or not self.is_log_dir_online(d) or now - log.last_flush_ms < log.config["flush.ms"]:
                continue
            try:
                with self._io(d, f"flushing {tp[0]}-{tp[1]}"):
                    sync = self.syncs.prepare(log, log.log_end_offset)
                    if sync is not None:
                        syncs.append((log, sync))
            except KafkaError as e:
                logger.warning("%s", e)
        return self.syncs.start(syncs) if syncs else None

    # ---------------------------------------------------------------- checkpoints
    def _logs_in(self, d: str) -> dict[TopicPartition, Log]:
        """The logs in ``d``, future ones included (their recovery points and log starts are
        checkpointed in their own dir, where a restart reads them)."""
        future_dirs, log_dirs = self._future_dir_of, self._log_dir_of   # (a thread may call)
        out = {tp: log for tp, log in items_from_thread(self._future_logs) if future_dirs.get(tp) == d}
        out.update({tp: log for tp, log in items_from_thread(self._logs) if log_dirs.get(tp) == d})
        return out

    def _checkpoint_dir(self, d: str) -> None:
        logs = self._logs_in(d)
        with self._checkpoint_lock:
            OffsetCheckpointFile(os.path.join(d, RECOVERY_POINT_CHECKPOINT)).write(
                {tp: log.recovery_point for tp, log in logs.items()})
            OffsetCheckpointFile(os.path.join(d, LOG_START_OFFSET_CHECKPOINT)).write(
                {tp: log.log_start_offset for tp, log in logs.items()})

    def _write_checkpoints(self, name: str, per_dir: Callable[[str], Mapping[TopicPartition, int]]) -> None:
        """Write checkpoint ``name`` in every live dir; a dir whose write fails goes offline
        (the others are still written)."""
        for d in self.live_log_dirs:
            try:
                with self._io(d, f"writing {name}"):
                    offsets = per_dir(d)
                    with self._checkpoint_lock:
                        OffsetCheckpointFile(os.path.join(d, name)).write(offsets)
            except KafkaError as e:
                logger.error("%s", e)

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoints(RECOVERY_POINT_CHECKPOINT,
                                lambda d: {tp: log.recovery_point for tp, log in self._logs_in(d).items()})

    def checkpoint_log_start_offsets(self) -> None:
        self._write_checkpoints(LOG_START_OFFSET_CHECKPOINT,
                                lambda d: {tp: log.log_start_offset for tp, log in self._logs_in(d).items()})

    def write_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """Write ``replication-offset-checkpoint`` in each live dir for the partitions it holds."""
        hws = {_as_tp(k): v for k, v in high_watermarks.items()}
        self._write_checkpoints(HIGH_WATERMARK_CHECKPOINT,
                                lambda d: {tp: hw for tp, hw in hws.items() if self._log_dir_of.get(tp) == d})

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for d in self.live_log_dirs:
            out.update(self._read_offsets(d, HIGH_WATERMARK_CHECKPOINT))
        return out

    # ---------------------------------------------------------------- shutdown
    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints and the clean-shutdown marker."""
        if self._closed:
            return
        self._closed = True
        logs = [*((tp, lg, self._log_dir_of[tp]) for tp, lg in self._logs.items()),
                *((tp, lg, self._future_dir_of[tp]) for tp, lg in self._future_logs.items())]
        # the leader-epoch checkpoints not yet written, synced together; one that fails here is
        # tried again alone as its log closes (where an error takes its log dir offline)
        live = [lg.leader_epoch_cache for _, lg, d in logs if not self.failure_channel.is_offline(d)]
        for path, e in flush_all(live):
            logger.warning("writing %s failed (%s); trying again as its log closes", path, e)
        for tp, log, d in logs:
            try:
                with self._io(d, f"closing the log of {tp[0]}-{tp[1]}"):
                    log.flush()
                    log.close()
            except KafkaError as e:
                logger.error("%s", e)
        for d in self.live_log_dirs:   # an offline dir gets no marker: its logs are recovered at restart
            try:
                with self._io(d, "writing the shutdown checkpoints"):
                    self._checkpoint_dir(d)
                    with open(os.path.join(d, CLEAN_SHUTDOWN_FILE), "w"):
                        pass
            except KafkaError as e:
                logger.error("%s", e)
        self._unlock_all()


def _as_tp(tp: TopicPartition) -> TopicPartition:
    """A (topic, partition) key as a plain tuple (callers may pass a NamedTuple)."""
    return (tp[0], tp[1])
