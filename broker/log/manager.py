"""LogManager: every partition log of this broker, across its log directories.

Invariants:
- each log dir is locked (``.lock``, flock) while the manager owns it;
- ``.kafka_cleanshutdown`` exists in a log dir only between ``shutdown()`` and the
  next load: it is removed as soon as the logs are loaded, so a later crash is
  seen as unclean and the logs are recovered from their checkpointed recovery points;
- checkpoint files name only partitions present in their log dir;
- an I/O error under a log dir (loading, creating a log, retention, any checkpoint)
  goes to the ``LogDirFailureChannel``: the dir is offline until restart, its logs are
  closed and forgotten (``handle_log_dir_failure``), nothing is written there again, and
  new logs go only to live dirs. With every dir offline the broker must stop
  (``LogDirError`` at load; ``all_offline`` afterwards).
All methods are short blocking file operations (called from the reactor thread).
"""
from __future__ import annotations

import fcntl
import logging
import os
import shutil
import time as _time
import uuid
from typing import Callable, ContextManager, Mapping

from odradek.protocol.errors import KafkaError

from ..config.kafka_config import KafkaConfig, LogConfig
from .checkpoint import (CLEAN_SHUTDOWN_FILE, HIGH_WATERMARK_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                         META_PROPERTIES, RECOVERY_POINT_CHECKPOINT, CheckpointError,
                         OffsetCheckpointFile, read_properties, write_properties)
from .producer_state import DEFAULT_EXPIRATION_MS
from .log import Log, parse_topic_partition
from .log_dir_failure import LogDirFailureChannel, storage_error

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
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
        self._topic_config = topic_config or (lambda topic: LogConfig.from_broker(config))
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, str] = {}
        self._locks: dict[str, int] = {}
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
        except BaseException:
            for log in self._logs.values():
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
        for tp in gone:
            self._log_dir_of.pop(tp, None)
            log = self._logs.pop(tp, None)
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
        return self.failure_channel.guard(d, f"{what} in {d}")

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
            if name.endswith(FUTURE_DIR_SUFFIX):
                logger.warning("ignoring future replica directory %s", path)
                continue
            try:
                tp = parse_topic_partition(name)
            except ValueError:
                continue
            if tp in self._logs:
                raise LogDirError(f"Duplicate log directories for {tp[0]}-{tp[1]}: "
                                  f"{self._logs[tp].dir} and {path}")
            log = Log(path, self._topic_config(tp[0]), recovery_points.get(tp, 0), self._time,
                      start_offsets.get(tp, 0), had_clean_shutdown=clean,
                      producer_id_expiration_ms=self._producer_id_expiration_ms())
            self._logs[tp] = log
            self._log_dir_of[tp] = d
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

    def _next_log_dir(self) -> str:
        """The live log dir holding the fewest partitions (the first such in ``log.dirs``)."""
        live = self.live_log_dirs
        if not live:
            raise storage_error("no live log dir left")
        counts = {d: 0 for d in live}
        for d in self._log_dir_of.values():
            if d in counts:
                counts[d] += 1
        return min(live, key=lambda d: counts[d])

    def get_or_create_log(self, tp: TopicPartition, log_config: LogConfig | None = None) -> Log:
        """The partition's log, created in the live log dir with the fewest partitions if absent.

        While a log dir is offline no log is created (KAFKA_STORAGE_ERROR): the partition's data
        may be in the offline dir (Kafka allows it for a brand-new partition, which
        LeaderAndIsr's ``is_new`` tells; odradek's handler does not pass it on)."""
        tp = (tp[0], int(tp[1]))
        log = self._logs.get(tp)
        if log is not None:
            return log
        offline = self.failure_channel.offline_dirs
        if offline:
            raise storage_error(f"cannot create the log of {tp[0]}-{tp[1]}: log dirs {','.join(offline)} are offline")
        d = self._next_log_dir()
        config = log_config or self._topic_config(tp[0])
        with self._io(d, f"creating the log of {tp[0]}-{tp[1]}"):
            log = Log(os.path.join(d, f"{tp[0]}-{tp[1]}"), config, 0, self._time, 0, had_clean_shutdown=True,
                      producer_id_expiration_ms=self._producer_id_expiration_ms())
        self._logs[tp] = log
        self._log_dir_of[tp] = d
        logger.info("created log for %s-%d in %s", tp[0], tp[1], d)
        return log

    def delete_log(self, tp: TopicPartition) -> bool:
        """Remove the log: rename its dir to ``<topic>-<p>.<uuid>-delete`` then delete it."""
        tp = (tp[0], int(tp[1]))
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

    def _producer_id_expiration_ms(self) -> int:
        """Kafka expires idle producer ids after transactional.id.expiration.ms."""
        try:
            return int(self.config["transactional.id.expiration.ms"])
        except (KeyError, TypeError, ValueError):
            return DEFAULT_EXPIRATION_MS

    def cleanup_logs(self) -> int:
        """Apply retention to every log (and expire idle producer ids); returns the number of
        segments deleted."""
        total = 0
        for tp, log in list(self._logs.items()):
            d = self._log_dir_of.get(tp)
            if d is None or not self.is_log_dir_online(d):
                continue
            try:
                with self._io(d, f"retention of {tp[0]}-{tp[1]}"):
                    total += log.delete_old_segments()
                    log.remove_expired_producers()
            except KafkaError as e:
                logger.warning("%s", e)
        return total

    # ---------------------------------------------------------------- checkpoints
    def _logs_in(self, d: str) -> dict[TopicPartition, Log]:
        return {tp: self._logs[tp] for tp, ld in self._log_dir_of.items() if ld == d}

    def _checkpoint_dir(self, d: str) -> None:
        logs = self._logs_in(d)
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
                    OffsetCheckpointFile(os.path.join(d, name)).write(per_dir(d))
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
        for tp, log in list(self._logs.items()):
            d = self._log_dir_of[tp]
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
