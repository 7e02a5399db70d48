"""The log of one partition: an ordered list of segments in ``<log.dir>/<topic>-<p>``.

Invariants:
- segments are sorted by base offset and contiguous in offsets; the last one is
  the active segment and the only one appended to;
- ``log_start_offset ≤ log_end_offset``; offsets are assigned from the LEO and are
  never reused, even after retention deletes every segment;
- an append validates every batch (``validator``: header, sizes, CRC32C, codec, the
  records it holds) before writing a byte, so a rejected append leaves the log and
  the producer state untouched; batches are rewritten only in their header
  (baseOffset, partitionLeaderEpoch, LogAppendTime + CRC);
- after construction the files hold only complete valid batches: an unclean
  shutdown is recovered from the recovery point (``Log.loadSegments``/``recoverLog``),
  which moves only after everything below it was fsynced (a roll's flush, ``flush.messages``
  and the ``flush.ms`` flusher, on the manager's thread: ``log_syncs``; a clean shutdown);
- producer state, markers, the txn index and the LSO follow the log (``log_txn``): a
  duplicate idempotent batch is answered with its original offsets, not appended; only
  the coordinator origin may append control batches (only their one record is read);
- retention deletes whole segments below the high watermark and only moves the log
  start forward (``log_retention``).

Segment deletion renames the files to ``.deleted`` and removes them at once
(``file.delete.delay.ms`` is not waited for: reads are synchronous on the reactor
thread, so no reader can still hold a deleted segment).
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import time as _time
from bisect import bisect_right
from typing import Callable, NamedTuple

from odradek.protocol import record_batch as rb
from odradek.protocol.control_records import parse_control_record
from odradek.protocol.errors import ErrorCode, KafkaError

from ..config.kafka_config import LogConfig
from .producer_state import DEFAULT_EXPIRATION_MS, ORIGIN_CLIENT, ORIGIN_COORDINATOR, ProducerStateManager
from .checkpoint import CLEAN_SHUTDOWN_FILE
from .epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from .index import CorruptIndexError
from .log_syncs import LogSyncs
from .segment_sync import SegmentSync, fsync_path
from .segment import (DELETED_SUFFIX, FUTURE_DIR_SUFFIX, INDEX_SUFFIX, INT32_MAX, LOG_SUFFIX, TIME_INDEX_SUFFIX,
                      LogSegment, filename_prefix, parse_topic_partition)
from .log_retention import LogRetention
from .read_buffers import ReadBuffers
from .log_txn import TransactionalLog
from .txn_index import TXN_INDEX_SUFFIX, write_index_file
from .validator import MAGIC_OFFSET, LeaderChecks, up_convert, validate_leader, validate_replicated

logger = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex|snapshot)(\.deleted|\.cleaned|\.swap)?$")
CLEANED_SUFFIX, SWAP_SUFFIX = ".cleaned", ".swap"


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append whose first offset is below the LEO (``UnexpectedAppendOffsetException``)."""

    def __init__(self, first_offset: int, log_end_offset: int) -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR,
                         f"first offset {first_offset} is below the log end offset {log_end_offset}")
        self.first_offset = first_offset
        self.log_end_offset = log_end_offset


class Log(LogRetention, TransactionalLog):
    """A partition's log; see the module invariants."""

    def __init__(self, dir: str, config: LogConfig, recovery_point: int = 0,
                 time: Callable[[], float] = _time.time, log_start_offset: int = 0,
                 had_clean_shutdown: bool | None = None,
                 producer_id_expiration_ms: int = DEFAULT_EXPIRATION_MS, syncs: LogSyncs | None = None) -> None:
        self.dir = dir
        self.topic, self.partition = parse_topic_partition(dir)
        self._name = f"{self.topic}-{self.partition}"
        # a future replica (AlterReplicaLogDirs) fills ``<topic>-<p>.<uuid>-future`` until it replaces the current one
        self.is_future = dir.rstrip("/").endswith(FUTURE_DIR_SUFFIX)
        self.config = config
        self._leader_checks = (config, LeaderChecks.of(config))
        self._append_limits: tuple = (None,)   # (config, segment.bytes, max segment age, flush.messages): _append
        self._time = time
        os.makedirs(dir, exist_ok=True)
        if had_clean_shutdown is None:
            had_clean_shutdown = os.path.exists(os.path.join(os.path.dirname(dir.rstrip("/")),
                                                             CLEAN_SHUTDOWN_FILE))
        self.leader_epoch_cache = LeaderEpochFileCache(os.path.join(dir, LEADER_EPOCH_CHECKPOINT))
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.recovery_point = recovery_point
        self._truncations = 0   # a SegmentSync made before a truncation moves no recovery point
        self.syncs = syncs or LogSyncs()   # the LogManager's: where a roll's and flush.messages' syncs run
        self.sync_wanted_to = 0   # the log end offset the newest flush made due by flush.messages covers
        self.last_flush_ms = self._now_ms()   # flush.ms counts from here (Kafka: the log's creation)
        self._high_watermark: int | None = None
        self.producer_state = ProducerStateManager(dir, producer_id_expiration_ms)
        self._load_segments(had_clean_shutdown)
        first = self.segments[0].base_offset
        self.log_start_offset = min(max(log_start_offset, first), self.log_end_offset)
        self.recovery_point = min(max(self.recovery_point, 0), self.log_end_offset)
        self.leader_epoch_cache.loaded(self.log_start_offset, self.log_end_offset)
        self._load_producer_state()

    # ---------------------------------------------------------------- loading
    def _now_ms(self) -> int:
        return int(self._time() * 1000)

    def _new_segment(self, base_offset: int) -> LogSegment:
        c = self.config
        return LogSegment.create(self.dir, base_offset, c["index.interval.bytes"], c["segment.index.bytes"],
                                 c["segment.jitter.ms"], c["segment.ms"], self._now_ms)

    def _load_segments(self, had_clean_shutdown: bool) -> None:
        bases = set()
        names = os.listdir(self.dir)
        # a ``<base>.log.swap`` is a committed compaction swap (see replace_segments): complete it
        # with indexes rebuilt from the log; any other ``.swap`` belongs to an uncommitted one
        swapped = {int(n[:20]) for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX) and _SEGMENT_FILE.match(n)}
        for name in names:
            path = os.path.join(self.dir, name)
            m = _SEGMENT_FILE.match(name)
            if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp")) or (
                    m and m.group(2) not in ("log", "snapshot") and int(m.group(1)) in swapped):
                os.remove(path)  # interrupted deletion / cleaning / checkpoint; stale index of a swap
                continue
            if name.endswith(SWAP_SUFFIX):
                if not (m and m.group(2) == "log"):
                    os.remove(path)
                    continue
                os.replace(path, path[:-len(SWAP_SUFFIX)])
                name = name[:-len(SWAP_SUFFIX)]
                m = _SEGMENT_FILE.match(name)
            if m and m.group(2) == "log":
                bases.add(int(m.group(1)))
        for name in os.listdir(self.dir):  # indexes without a log file
            m = _SEGMENT_FILE.match(name)
            if m and m.group(2) in ("index", "timeindex", "txnindex") and int(m.group(1)) not in bases:
                os.remove(os.path.join(self.dir, name))
        c = self.config
        for base in sorted(bases):
            seg = LogSegment(self.dir, base, c["index.interval.bytes"], c["segment.index.bytes"],
                             now_ms=self._now_ms)
            self.segments.append(seg)
        self._bases = [s.base_offset for s in self.segments]
        swapped_segs = [s for s in self.segments if s.base_offset in swapped]
        for seg in swapped_segs:
            seg.recover()  # the swapped-in segment replaces every old one it overlaps
            self._remove_segments([s for s in self.segments
                                   if seg.base_offset < s.base_offset < seg.next_offset])
        for i, seg in enumerate(self.segments):
            needs_recovery = not had_clean_shutdown and (
                i + 1 == len(self.segments) or self.segments[i + 1].base_offset > self.recovery_point)
            if not needs_recovery:
                try:
                    seg.load()
                    continue
                except (CorruptIndexError, OSError, KafkaError) as e:
                    logger.warning("%s: rebuilding indexes of %s (%s)", self.dir, seg.log_path, e)
            if self._recover_segment(i):
                break
        for seg in swapped_segs:  # their txn indexes were not swapped in: rebuild them from the log
            if seg in self.segments:
                self._rebuild_txn_index(self.segments.index(seg))
        if not self.segments:
            seg = self._new_segment(max(self.recovery_point, 0))
            self.segments.append(seg)
            self._bases = [seg.base_offset]

    def _recover_segment(self, i: int) -> bool:
        """Recover segment ``i``; if it had a corrupt tail, delete all later segments (True)."""
        seg = self.segments[i]
        cache = self.leader_epoch_cache

        def on_batch(h: rb.BatchHeader, _data: memoryview) -> None:
            if h.partition_leader_epoch > cache.latest_epoch:
                cache.assign(h.partition_leader_epoch, h.base_offset)

        truncated = seg.recover(on_batch)
        self._rebuild_txn_index(i)
        if truncated:
            logger.warning("%s: truncated %d invalid bytes at the end of %s", self.dir, truncated, seg.log_path)
        later = self.segments[i + 1:]
        prev_end = seg.next_offset
        if not truncated and later and later[0].base_offset >= prev_end:
            return False
        if later:
            logger.warning("%s: deleting %d segments after the recovered corruption", self.dir, len(later))
            self._remove_segments(later)
        return True

    # ---------------------------------------------------------------- state
    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def topic_partition(self) -> tuple[str, int]:
        return self.topic, self.partition

    @property
    def high_watermark(self) -> int:
        """The HW set by the replica manager (the LEO until it sets one)."""
        hw = self._high_watermark
        return self.log_end_offset if hw is None else hw

    def update_high_watermark(self, hw: int) -> int:
        """Set the HW, clamped to [log start, LEO]; returns the value kept."""
        self._high_watermark = min(max(hw, self.log_start_offset), self.log_end_offset)
        self.producer_state.on_high_watermark(self._high_watermark)
        return self._high_watermark

    @property
    def latest_epoch(self) -> int:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers it."""
        return self.leader_epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)

    # ---------------------------------------------------------------- append
    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int,
                         origin: str = ORIGIN_CLIENT) -> LogAppendInfo:
        """Validate (``validator.validate_leader``, then producer state), assign offsets from the
        LEO, stamp the epoch (and LogAppendTime), append. A duplicate idempotent batch is not
        appended: its original offsets come back. Control batches only from the coordinator
        (``origin``); a client's records are one batch, with a key on every record of a
        compacted log (INVALID_RECORD); an old client's magic 0/1 message set becomes one
        magic-2 batch first (``validator.up_convert``). A writable memoryview is a lent request
        frame's records (``protocol/connection.py:FrameReader``), handed over: it is stamped in
        place; anything else is copied first."""
        config = self.config
        buf = records if type(records) is memoryview and not records.readonly else bytearray(records)
        now = self._now_ms()
        cached = self._leader_checks
        if cached[0] is not config:   # one LeaderChecks per config object, not per append
            cached = self._leader_checks = (config, LeaderChecks.of(config))
        checks = cached[1]
        log_append_time = checks.log_append_time
        if len(buf) > MAGIC_OFFSET and buf[MAGIC_OFFSET] < rb.MAGIC and origin == ORIGIN_CLIENT:
            buf = up_convert(buf, checks, config["compression.type"], self._name)   # Produce v0-2
        batches = validate_leader(buf, checks, now, origin == ORIGIN_CLIENT, self._name)
        state = self.producer_state
        markers: dict[int, tuple[bool, int]] = {}
        for pos, h in batches:
            if h.producer_id < 0:
                continue   # no producer: nothing to check (a control batch without one was refused)
            if h.is_control:
                if origin != ORIGIN_COORDINATOR:
                    raise KafkaError(ErrorCode.INVALID_RECORD, "clients may not write control batches")
                markers[pos] = marker = parse_control_record(buf, pos)
                state.check_marker(h.producer_id, h.producer_epoch, marker[1])
            else:
                dup = state.check(h, origin)
                if dup is not None:
                    return LogAppendInfo(dup.first_offset, dup.last_offset, dup.log_append_time,
                                         self.log_start_offset)
        first = offset = self.log_end_offset
        infos = []
        final = []   # the batches with a producer, as appended (offsets and epoch stamped)
        stamp, set_lat = rb.stamp_offset_and_epoch, rb.set_log_append_time
        for pos, h in batches:
            stamp(buf, pos, offset, leader_epoch)
            max_ts, size = h.max_timestamp, rb.LOG_OVERHEAD + h.batch_length   # h.size, without its property
            if log_append_time:
                set_lat(buf, pos, size, now)
                max_ts = now
            if h.producer_id >= 0:
                final.append((pos, rb.parse_header(buf, pos)))
            offset += h.last_offset_delta + 1
            infos.append((pos, offset - 1, max_ts, size))
        self._append(buf, infos, first, now)
        if final:
            self._apply_appended(final, buf, markers)
        if offset > state.map_end_offset:   # what _apply_appended does for a batch without a producer
            state.map_end_offset = offset
        if leader_epoch >= 0 and leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(leader_epoch, first)
        self._maybe_flush()
        return LogAppendInfo(first, offset - 1, now if log_append_time else -1, self.log_start_offset)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append the leader's batches as they are (offsets and epochs kept)."""
        if not records:
            return LogAppendInfo(-1, -1, -1, self.log_start_offset)
        # offsets as the leader set them: compacted batches have gaps
        batches = validate_replicated(records, self._name)
        leo = self.log_end_offset
        first = batches[0][1].base_offset
        if first < leo:
            raise UnexpectedAppendOffsetError(first, leo)
        infos = []
        expected = first
        for pos, h in batches:
            if h.base_offset < expected:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"out of order offset {h.base_offset}")
            expected = h.next_offset
            infos.append((pos, h.last_offset, h.max_timestamp, h.size))
        now = self._now_ms()
        self._append(records, infos, first, now)
        self._apply_appended(batches, records)
        cache = self.leader_epoch_cache
        for _, h in batches:
            if h.partition_leader_epoch > cache.latest_epoch:
                cache.assign(h.partition_leader_epoch, h.base_offset)
        self._maybe_flush()
        return LogAppendInfo(first, expected - 1, -1, self.log_start_offset)

    def _append(self, buf: bytes | bytearray | memoryview, infos: list, first_offset: int, now: int) -> None:
        seg = self.segments[-1]
        last_offset = infos[-1][1]
        limits = self._append_limits
        if limits[0] is not self.config:   # read once per config object, not per append
            c = self.config
            limits = self._append_limits = (c, c["segment.bytes"], c.max_segment_ms, c["flush.messages"])
        if seg.should_roll(len(buf), last_offset, now, limits[1], limits[2]):
            seg = self.roll(first_offset)
        if seg.size == 0 and seg.base_offset != first_offset and first_offset > seg.base_offset:
            # an empty active segment must start at its first batch (follower gaps, reused names)
            seg = self._replace_empty_active(first_offset)
        seg.append(buf, infos, now)

    def _maybe_flush(self) -> None:
        """As Kafka's ``Log.append`` ends: a flush once ``flush.messages`` offsets are unflushed."""
        if self.log_end_offset - self.recovery_point >= self._append_limits[3]:
            self.sync_wanted_to = self.log_end_offset
            self.syncs.flush_due(self)

    def awaits_sync(self, offset: int) -> bool:
        """Whether the offsets below ``offset`` (an append's last + 1) wait for a due group commit."""
        return self.recovery_point < offset <= self.sync_wanted_to

    def _replace_empty_active(self, base: int) -> LogSegment:
        old = self.segments.pop()
        self._bases.pop()
        old.delete_files()
        seg = self._new_segment(base)
        self.segments.append(seg)
        self._bases.append(base)
        return seg

    def roll(self, new_base: int | None = None) -> LogSegment:
        """Start a new active segment at ``new_base`` (default: the LEO)."""
        base = self.log_end_offset if new_base is None else new_base
        old = self.active_segment
        if old.size == 0:
            return self._replace_empty_active(base) if base != old.base_offset else old
        old.on_become_inactive()
        seg = self._new_segment(base)
        self.segments.append(seg)
        self._bases.append(base)
        self.producer_state.remove_expired(self._now_ms())
        # Kafka flushes a rolled segment on its scheduler's thread; the snapshot is synced with it
        # (one a crash left corrupt is deleted at load)
        snapshot = self.producer_state.take_snapshot(base, sync=False)
        self.syncs.rolled(self, base, *([snapshot] if snapshot else []))
        return seg

    # ---------------------------------------------------------------- read
    def offset_in_range(self, offset: int) -> bool:
        """Whether a fetch may start at ``offset``: from the log start to the log end offset."""
        return self.log_start_offset <= offset <= self.log_end_offset

    def bytes_between(self, start: int, end: int) -> int | None:
        """The bytes from the batch holding ``start`` to the one holding ``end`` (to the log end
        when ``end`` is the LEO), from their positions alone, as Kafka's DelayedFetch counts:
        nothing is read, and each segment remembers the positions it found. None when the two
        are not in one segment, or when ``start`` is in a gap a compaction left at the end of its
        segment (what follows it is in the next one)."""
        bases = self._bases
        i = bisect_right(bases, start) - 1
        if i < 0 or i != bisect_right(bases, end) - 1:
            return None
        seg = self.segments[i]
        first = seg.position_of(start)
        if first is None:
            return None
        stop = seg.position_of(end) if end < self.log_end_offset else None
        return (seg.size if stop is None else stop) - first

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True, buffers: ReadBuffers | None = None) -> bytes | memoryview:
        """Whole batches from ``offset`` (see LogSegment.read, and its ``buffers``);
        KafkaError(OFFSET_OUT_OF_RANGE) below the log start or beyond the LEO."""
        leo = self.log_end_offset
        if offset == leo:
            return b""
        if offset < self.log_start_offset or offset > leo:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} not in [{self.log_start_offset}, {leo}] of {self.topic}-{self.partition}")
        if max_offset is not None and offset >= max_offset:
            return b""
        i = bisect_right(self._bases, offset) - 1
        for seg in self.segments[max(i, 0):]:
            data = seg.read(offset, max_bytes, max_offset, min_one_batch, buffers)
            if data is not None:
                return data
        return b""

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first batch with a timestamp ≥ ``timestamp`` (its base
        offset and max timestamp); -2 gives the log start, -1 the LEO (timestamp -1)."""
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self.log_end_offset, -1
        for seg in self.segments:
            if seg.next_offset > self.log_start_offset and seg.max_timestamp >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def latest_offset(self) -> int:
        return self.log_end_offset

    def _remove_segments(self, segs: list[LogSegment]) -> None:
        ids = {id(s) for s in segs}
        self.segments = [s for s in self.segments if id(s) not in ids]
        self._bases = [s.base_offset for s in self.segments]
        for s in segs:
            s.rename_to_deleted()
        for s in segs:
            s.delete_files()

    # ---------------------------------------------------------------- compaction swap
    def replace_segments(self, base: int, old: list[LogSegment]) -> LogSegment:
        """Swap ``<base>.{index,timeindex,log}.cleaned`` in for ``old`` (adjacent inactive
        segments, the first at ``base``) and return the new segment (``Log.replaceSegments``).

        Crash-safe: ``.cleaned`` → ``.swap`` with the log renamed last (the commit point),
        then the other old segments are deleted, then ``.swap`` → final with the log last.
        ``_load_segments`` drops an uncommitted swap and completes a committed one.
        """
        i = next((j for j, s in enumerate(self.segments) if s is old[0]), -1)
        if (i < 0 or old[0].base_offset != base or self.segments[i:i + len(old)] != old
                or i + len(old) >= len(self.segments)):
            raise ValueError(f"{self.dir}: segments to replace are not adjacent inactive ones at {base}")
        prefix = os.path.join(self.dir, filename_prefix(base))
        paths = [prefix + INDEX_SUFFIX, prefix + TIME_INDEX_SUFFIX, prefix + LOG_SUFFIX]
        aborted = [e for s in old for e in s.txn_index.entries]
        if aborted or os.path.exists(prefix + TXN_INDEX_SUFFIX):
            # the aborted transactions of every replaced segment move to the new one
            write_index_file(prefix + TXN_INDEX_SUFFIX + CLEANED_SUFFIX, aborted)
            paths.insert(2, prefix + TXN_INDEX_SUFFIX)
        for p in paths:
            os.replace(p + CLEANED_SUFFIX, p + SWAP_SUFFIX)
        fsync_path(self.dir)
        old[0].close_handlers()  # its files are overwritten by the renames below
        self._remove_segments(old[1:])
        for p in paths:
            os.replace(p + SWAP_SUFFIX, p)
        fsync_path(self.dir)
        c = self.config
        seg = LogSegment(self.dir, base, c["index.interval.bytes"], c["segment.index.bytes"], now_ms=self._now_ms)
        self.segments[i] = seg
        self._bases = [s.base_offset for s in self.segments]
        try:
            seg.load()
        except (CorruptIndexError, KafkaError) as e:
            logger.warning("%s: rebuilding indexes of cleaned %s (%s)", self.dir, seg.log_path, e)
            seg.recover()
            self._rebuild_txn_index(i)
        return seg

    # ---------------------------------------------------------------- truncation
    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and after ``offset`` (follower truncation); False if ≥ LEO."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            return False
        if self.segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset)
            return True
        self._truncations += 1
        self._remove_segments([s for s in self.segments if s.base_offset > offset])
        self.active_segment.truncate_to(offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)  # ≤ offset: whole batches go
        self.log_start_offset = min(offset, self.log_start_offset)
        self.recovery_point = min(offset, self.recovery_point)
        self.sync_wanted_to = min(offset, self.sync_wanted_to)   # nothing above the log end waits
        if self._high_watermark is not None:
            self._high_watermark = min(self._high_watermark, self.log_end_offset)
        self._load_producer_state()  # from the newest snapshot at or below the new LEO
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset``."""
        if offset < 0:
            raise ValueError(f"cannot start at negative offset {offset}")
        self._truncations += 1
        old = self.segments
        self.segments = []
        self._bases = []
        for s in old:
            s.rename_to_deleted()
        for s in old:
            s.delete_files()
        seg = self._new_segment(offset)
        self.segments = [seg]
        self._bases = [offset]
        self.leader_epoch_cache.clear_and_flush()
        self.log_start_offset = self.recovery_point = self.sync_wanted_to = offset
        if self._high_watermark is not None:
            self._high_watermark = offset
        self.producer_state.delete_all_snapshots()
        self.producer_state.clear(offset)

    # ---------------------------------------------------------------- lifecycle
    def flush(self, offset: int | None = None, *files: str) -> None:
        """fsync the segments below ``offset`` (default LEO) not yet synced, and ``files``; the
        recovery point follows."""
        sync = self.sync_below(self.log_end_offset if offset is None else offset, *files)
        if sync is not None:
            sync.run()
            self.synced(sync)

    def sync_below(self, offset: int, *files: str) -> SegmentSync | None:
        """``flush``'s fsync, prepared to run anywhere (None: nothing to sync); then ``synced``."""
        segments = []
        if offset > self.recovery_point:
            self.leader_epoch_cache.flush()   # no epoch entry may start below the recovery point unwritten
            segments = [s for s in self.segments if s.next_offset > self.recovery_point and s.base_offset < offset]
        return SegmentSync(offset, self._truncations, segments, files) if segments or files else None

    def synced(self, sync: SegmentSync) -> None:
        """``sync`` ran: the recovery point moves to its offset unless a truncation came between."""
        if sync.truncations == self._truncations and sync.offset > self.recovery_point:
            self.recovery_point = sync.offset
            self.last_flush_ms = self._now_ms()

    def close(self) -> None:
        if os.path.isdir(self.dir) and self.segments and self.segments[-1]._fd >= 0:
            self.leader_epoch_cache.flush()
            # as Kafka: a snapshot only if offsets were added since the newest one (none: 0), and
            # an empty log's snapshots are not even listed
            try:
                leo = self.log_end_offset
                if leo > 0 and leo > max(self.producer_state.snapshot_offsets(), default=0):
                    self.producer_state.take_snapshot(leo)
            except OSError as e:
                logger.warning("%s: producer snapshot on close failed: %s", self.dir, e)
        for seg in self.segments:
            seg.close()

    def delete(self) -> None:
        """Remove every file of this log and its directory."""
        for seg in self.segments:
            seg.close_handlers()
        shutil.rmtree(self.dir, ignore_errors=True)

    def rename_dir(self, new_dir: str) -> None:
        """Move the partition directory (topic deletion); the log must not be used afterwards."""
        self.close()
        os.replace(self.dir, new_dir)
        self.dir = new_dir

    def rename_open(self, new_dir: str) -> None:
        """Rename the partition directory and keep using the log (a future log becoming the
        current one): nothing is closed, flushed or reloaded."""
        os.replace(self.dir, new_dir)
        self.dir = new_dir
        self.is_future = new_dir.rstrip("/").endswith(FUTURE_DIR_SUFFIX)
        for seg in self.segments:
            seg.moved_to(new_dir)
        self.producer_state.dir = new_dir
        self.leader_epoch_cache.path = os.path.join(new_dir, LEADER_EPOCH_CHECKPOINT)

    def __repr__(self) -> str:
        return (f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, segments={len(self.segments)})")


__all__ = ["Log", "LogAppendInfo", "FUTURE_DIR_SUFFIX", "UnexpectedAppendOffsetError", "parse_topic_partition",
           "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "INT32_MAX"]
