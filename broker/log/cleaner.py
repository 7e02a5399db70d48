"""LogCleaner: key-based compaction of ``cleanup.policy=compact`` logs (``LogCleaner.scala``).

Invariants:
- offsets never change: a retained record keeps its original offset, a rewritten batch
  keeps its base offset, last offset delta, producer fields, codec and timestamp type;
  records disappear, leaving gaps;
- for every key, the record at its latest offset below the cleaned end is kept (a
  tombstone only until ``delete.retention.ms`` after its segment was last modified);
  records with null keys are dropped; control batches are copied as they are;
- records of aborted transactions (from the txn index) are dropped and never enter the
  offset map; the last data batch of each live producer is kept, emptied if none of its
  records survive (``RETAIN_EMPTY``), so producer state rebuilt from the log still dedups;
- only whole inactive segments entirely below the last stable offset (≤ the high
  watermark, and older than ``min.compaction.lag.ms``) are cleaned; the active segment is
  never touched; a log is cleaned when its dirty ratio is above ``min.cleanable.dirty.ratio``,
  or when a dirty inactive segment began more than ``max.compaction.lag.ms`` ago (KIP-354;
  the log rolls its active segment once that old, ``LogConfig.max_segment_ms``);
- cleaned segments reach the log only through ``Log.replace_segments`` (``.cleaned`` →
  ``.swap`` → final), so a crash at any point leaves the old or the new segments;
- ``cleaner-offset-checkpoint`` holds, per log, the end of the last cleaned section
  (the first dirty offset); it is written after the swap;
- an I/O error while choosing or cleaning a log (reading, writing the ``.cleaned`` files, the
  swap, the checkpoint) takes the log's dir offline through the ``LogDirFailureChannel``, as
  Kafka's cleaner does; a file gone meanwhile (retention, deletion) only ends this pass for the log;
  any other error marks the log uncleanable (skipped until the broker restarts).

This is a background job: unlike the produce/fetch hot path it decodes records.
"""
from __future__ import annotations

import hashlib
import logging
import os
import time as _time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from odradek.protocol import record_batch as rb
from odradek.protocol.compression import NONE, compress
from odradek.protocol.records import LOG_APPEND_TIME, Record, decode_batch, encode_varint
from odradek.protocol.record_batch import BatchHeader

from ..config.types import LONG_MAX
from .checkpoint import CheckpointError, OffsetCheckpointFile
from .index import OffsetIndex, TimeIndex
from .log import CLEANED_SUFFIX, Log
from .log_dir_failure import is_storage_error
from .segment import INDEX_SUFFIX, INT32_MAX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, filename_prefix

logger = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
_READ_CHUNK = 1 << 20
_ENTRY_COST = 150  # rough bytes per offset-map entry in CPython (key, int, dict slot)
TopicPartition = tuple[str, int]


class CleaningAborted(Exception):
    """The log changed under a pass (retention, truncation): nothing was swapped; retry later."""


class OffsetMap:
    """key → latest offset over a log's dirty section (Kafka's ``SkimpyOffsetMap``).

    Keys shorter than 16 bytes are stored as they are, longer ones as a 16-byte BLAKE2b
    digest, so an entry costs a bounded amount of memory and the two forms never collide.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    @staticmethod
    def _slot(key: bytes) -> bytes:
        return key if len(key) < 16 else hashlib.blake2b(key, digest_size=16).digest()

    def put(self, key: bytes, offset: int) -> None:
        self._map[self._slot(key)] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, or -1."""
        return self._map.get(self._slot(key), -1)

    def __len__(self) -> int:
        return len(self._map)

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1


@dataclass
class CleanerStats:
    """What one cleaning of one log did."""
    first_dirty_offset: int = 0
    end_offset: int = 0          # first offset not cleaned (the new checkpoint)
    map_entries: int = 0
    segments_read: int = 0
    segments_written: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    tombstones_removed: int = 0
    null_keys_removed: int = 0
    elapsed_ms: float = 0.0

    @property
    def cleaned(self) -> bool:
        return self.segments_written > 0


# ---------------------------------------------------------------- batches

def iter_segment_batches(seg: LogSegment, chunk: int = _READ_CHUNK) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """(buffer, position in buffer, header) of each complete batch of ``seg``, read in chunks."""
    size = seg.size
    pos = 0
    with open(seg.log_path, "rb") as f:
        while pos < size:
            f.seek(pos)
            buf = f.read(min(chunk, size - pos))
            if len(buf) < rb.HEADER_SIZE:
                return
            first = rb.parse_header(buf, 0)
            if first.size > len(buf):  # a batch bigger than the chunk
                f.seek(pos)
                buf = f.read(first.size)
                if len(buf) < first.size:
                    return
            consumed = 0
            for p, h in rb.iter_headers(buf):
                yield buf, p, h
                consumed = p + h.size
            if consumed == 0:
                return
            pos += consumed


def _encode_record(rec: Record, base_offset: int, base_ts: int) -> bytes:
    """DefaultRecord bytes for ``rec`` keeping its offset delta within the batch."""
    parts = [b"\x00", encode_varint(rec.timestamp - base_ts), encode_varint(rec.offset - base_offset)]
    for field in (rec.key, rec.value):
        if field is None:
            parts.append(b"\x01")
        else:
            parts.append(encode_varint(len(field)))
            parts.append(field)
    parts.append(encode_varint(len(rec.headers)))
    for hkey, hvalue in rec.headers:
        kb = hkey.encode()
        parts.append(encode_varint(len(kb)))
        parts.append(kb)
        if hvalue is None:
            parts.append(b"\x01")
        else:
            parts.append(encode_varint(len(hvalue)))
            parts.append(hvalue)
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def rebuild_batch(h: BatchHeader, kept: list[Record]) -> bytes:
    """A batch like ``h`` holding only ``kept`` (non-empty, original offsets), as Kafka's
    ``MemoryRecords.filterTo`` writes it: same base offset, last offset delta, producer
    id/epoch/base sequence, attributes (codec, timestamp type, transactional) and epoch."""
    log_append = h.timestamp_type == LOG_APPEND_TIME
    base_ts = h.base_timestamp if log_append else kept[0].timestamp
    max_ts = h.max_timestamp if log_append else max(r.timestamp for r in kept)
    raw = b"".join(_encode_record(r if not log_append else r._replace(timestamp=base_ts), h.base_offset, base_ts)
                   for r in kept)
    records = compress(h.compression, raw) if h.compression != NONE else raw
    header = h._replace(batch_length=rb.HEADER_SIZE - rb.LOG_OVERHEAD + len(records), crc=0,
                        base_timestamp=base_ts, max_timestamp=max_ts, records_count=len(kept))
    return rb.seal(header, records)


def empty_batch(h: BatchHeader) -> bytes:
    """The header of ``h`` with no records (Kafka's ``writeEmptyHeader``): offsets, producer
    id/epoch/sequence and attributes kept (uncompressed), both timestamps the max one."""
    header = h._replace(batch_length=rb.HEADER_SIZE - rb.LOG_OVERHEAD, crc=0,
                        attributes=h.attributes & ~rb.COMPRESSION_MASK, base_timestamp=h.max_timestamp,
                        records_count=0)
    return rb.seal(header, b"")


class AbortedRanges:
    """Which transactional batches belong to aborted transactions: per producer id, the
    [first offset, marker offset) ranges of its aborted transactions."""

    def __init__(self, txns) -> None:
        self._ranges: dict[int, list[tuple[int, int]]] = {}
        for t in txns:
            self._ranges.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))

    def contains(self, h: BatchHeader) -> bool:
        if not h.is_transactional or h.is_control:
            return False
        return any(first <= h.base_offset < last for first, last in self._ranges.get(h.producer_id, ()))


class _CleanedSegmentWriter:
    """Writes ``<base>.log.cleaned`` and its indexes with LogSegment's indexing rule."""

    def __init__(self, dir: str, base: int, index_interval: int, max_index_size: int) -> None:
        prefix = os.path.join(dir, filename_prefix(base))
        self.log_path = prefix + LOG_SUFFIX + CLEANED_SUFFIX
        self.offset_index = OffsetIndex(prefix + INDEX_SUFFIX + CLEANED_SUFFIX, base, max_index_size)
        self.time_index = TimeIndex(prefix + TIME_INDEX_SUFFIX + CLEANED_SUFFIX, base, max_index_size)
        for p in (self.log_path, self.offset_index.path, self.time_index.path):
            if os.path.exists(p):
                os.remove(p)
        self._f = open(self.log_path, "wb")
        self.size = 0
        self.index_interval = index_interval
        self._since_index = 0
        self.max_ts, self.offset_of_max_ts = -1, -1
        self._pending: list[bytes] = []
        self._pending_size = 0

    def append(self, batch: bytes | memoryview, last_offset: int, max_ts: int) -> None:
        if max_ts > self.max_ts:
            self.max_ts, self.offset_of_max_ts = max_ts, last_offset
        if self._since_index > self.index_interval:
            self.offset_index.append(last_offset, self.size)
            self.time_index.maybe_append(self.max_ts, self.offset_of_max_ts)
            self._since_index = 0
        self._since_index += len(batch)
        self._pending.append(bytes(batch))
        self._pending_size += len(batch)
        self.size += len(batch)
        if self._pending_size >= _READ_CHUNK:
            self._write_pending()

    def _write_pending(self) -> None:
        self._f.write(b"".join(self._pending))
        self._pending.clear()
        self._pending_size = 0

    def finish(self, mtime: float) -> None:
        """Write everything, fsync, and give the log file ``mtime`` (the old segments')."""
        self._write_pending()
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()
        self.time_index.maybe_append(self.max_ts, self.offset_of_max_ts, skip_full_check=True)
        self.offset_index.fsync()
        self.time_index.fsync()
        os.utime(self.log_path, (mtime, mtime))

    def abort(self) -> None:
        if not self._f.closed:
            self._f.close()
        for p in (self.log_path, self.offset_index.path, self.time_index.path):
            if os.path.exists(p):
                os.remove(p)


# ---------------------------------------------------------------- the cleaner

def dirty_segments(segments: list[LogSegment], first_dirty: int) -> list[LogSegment]:
    """Those of ``segments`` holding offsets at or above ``first_dirty`` (an empty one holds none)."""
    return [s for s in segments if s.next_offset > first_dirty and s.size]


class LogCleaner:
    """Cleans the compacted logs of a LogManager; ``clean_once()`` is one bounded pass.

    Reading and rewriting only touch inactive segments; each swap goes through
    ``swap_runner`` (default: called directly). To run passes off the reactor thread, pass
    ``swap_runner=lambda f: threads.blockingCallFromThread(reactor, f)`` so that the segment
    list only changes on the reactor thread.
    """

    def __init__(self, log_manager, time: Callable[[], float] = _time.time, *,
                 max_map_entries: int | None = None, max_logs_per_pass: int = 1,
                 swap_runner: Callable[[Callable[[], Any]], Any] | None = None) -> None:
        self.log_manager = log_manager
        self._time = time
        self._swap_runner = swap_runner or (lambda f: f())
        if max_map_entries is None:
            try:
                buffer = int(log_manager.config["log.cleaner.dedupe.buffer.size"])
            except (KeyError, TypeError, AttributeError):
                buffer = 134217728
            max_map_entries = max(1000, buffer // _ENTRY_COST)
        self.max_map_entries = max_map_entries
        self.max_logs_per_pass = max_logs_per_pass
        self._checkpoints: dict[str, dict[TopicPartition, int]] = {}
        self._owner: dict[TopicPartition, Log] = {}  # the Log object a checkpoint entry belongs to
        self.uncleanable: dict[TopicPartition, Log] = {}  # failed once: skipped (Kafka's uncleanable)
        self.paused: frozenset[TopicPartition] = frozenset()   # moving between log dirs: not cleaned meanwhile
        self.failure_channel = getattr(log_manager, "failure_channel", None)   # a LogDirFailureChannel

    # ------------------------------------------------------------ checkpoints
    def _dir_of(self, log: Log) -> str:
        d = getattr(self.log_manager, "log_dir_of", lambda tp: None)(log.topic_partition)
        return d or os.path.dirname(log.dir.rstrip("/"))

    def _dir_checkpoints(self, d: str) -> dict[TopicPartition, int]:
        cps = self._checkpoints.get(d)
        if cps is None:
            try:
                cps = OffsetCheckpointFile(os.path.join(d, CLEANER_OFFSET_CHECKPOINT)).read()
            except CheckpointError as e:
                logger.warning("ignoring malformed cleaner checkpoint: %s", e)
                cps = {}
            self._checkpoints[d] = cps
        return cps

    def checkpoint_of(self, log: Log) -> int | None:
        """The stored first dirty offset of ``log`` (None if never cleaned)."""
        tp = log.topic_partition
        cps = self._dir_checkpoints(self._dir_of(log))
        owner = self._owner.get(tp)
        if owner is not None and owner is not log:  # deleted and re-created in this process
            cps.pop(tp, None)
        self._owner[tp] = log
        return cps.get(tp)

    def _write_checkpoint(self, log: Log, offset: int) -> None:
        d = self._dir_of(log)
        cps = self._dir_checkpoints(d)
        cps[log.topic_partition] = offset
        live = {other.topic_partition for other in self._all_logs()}
        for tp in [tp for tp in cps if tp not in live]:
            del cps[tp]
        OffsetCheckpointFile(os.path.join(d, CLEANER_OFFSET_CHECKPOINT)).write(cps)

    def maybe_truncate_checkpoint(self, tp: TopicPartition, offset: int) -> None:
        """Call after truncating a log to ``offset``: cleaning restarts from there at most."""
        for d, cps in self._checkpoints.items():
            if tp in cps and cps[tp] > offset:
                cps[tp] = offset
                OffsetCheckpointFile(os.path.join(d, CLEANER_OFFSET_CHECKPOINT)).write(cps)

    def _all_logs(self) -> list[Log]:
        return list(self.log_manager.all_logs())

    # ------------------------------------------------------------ sections
    def first_dirty_offset(self, log: Log) -> int:
        """The checkpoint, clamped into [log start, LEO] (Kafka resets it to the log start)."""
        cp = self.checkpoint_of(log)
        if cp is None or cp < log.log_start_offset or cp > log.log_end_offset:
            return log.log_start_offset
        return cp

    def cleanable_segments(self, log: Log) -> list[LogSegment]:
        """The inactive segments wholly below the LSO and older than min.compaction.lag.ms."""
        hw = log.last_stable_offset
        lag = log.config["min.compaction.lag.ms"]
        now = int(self._time() * 1000)
        segs = log.segments
        out = []
        for i, seg in enumerate(segs[:-1]):
            if segs[i + 1].base_offset > hw or (lag > 0 and seg.largest_timestamp > now - lag):
                break
            out.append(seg)
        return out

    def compaction_overdue(self, log: Log) -> bool:
        """Whether ``max.compaction.lag.ms`` has passed since the first batch of a dirty inactive
        segment (KIP-354, Kafka's ``LogCleanerManager.maxCompactionDelay``): the log is then cleaned
        whatever its dirty ratio."""
        lag = log.config["max.compaction.lag.ms"]
        if lag >= LONG_MAX:
            return False
        first_dirty = self.first_dirty_offset(log)
        clean_until = int(self._time() * 1000) - lag
        for seg in dirty_segments(log.segments[:-1], first_dirty):
            first = next(seg.iter_batch_headers(), None)
            if first is not None and 0 < first[1].max_timestamp < clean_until:
                return True
        return False

    def dirty_ratio(self, log: Log) -> tuple[float, int]:
        """(dirty bytes / cleanable bytes, dirty bytes) of ``log``."""
        first_dirty = self.first_dirty_offset(log)
        segs = self.cleanable_segments(log)
        total = sum(s.size for s in segs)
        dirty = sum(s.size for s in dirty_segments(segs, first_dirty))
        return (dirty / total if total else 0.0), dirty

    # ------------------------------------------------------------ passes
    def clean_once(self) -> list[tuple[str, int, CleanerStats]]:
        """Clean the dirtiest compacted logs whose dirty ratio is at least
        ``min.cleanable.dirty.ratio`` (at most ``max_logs_per_pass`` of them)."""
        candidates = []
        for log in self._all_logs():
            if (not log.config.compact or self.uncleanable.get(log.topic_partition) is log
                    or log.topic_partition in self.paused):
                continue
            try:
                ratio, dirty = self.dirty_ratio(log)
                # as Kafka: a ratio above the minimum (not at it), or any dirty bytes once overdue
                if dirty > 0 and (ratio > log.config["min.cleanable.dirty.ratio"] or self.compaction_overdue(log)):
                    candidates.append((ratio, log))
            except FileNotFoundError:   # a segment went meanwhile (retention, deletion): the next pass
                continue
            except OSError as e:
                self._storage_failed(log, "checking", e)
        candidates.sort(key=lambda c: -c[0])
        out = []
        for _, log in candidates[:self.max_logs_per_pass]:
            try:
                stats = self.clean_log(log)
            except (CleaningAborted, FileNotFoundError) as e:   # the log changed, or a file of it went
                logger.info("%s: cleaning aborted (%s); will retry", log.dir, e)
                continue
            except Exception as e:  # one broken log must not stop the cleaner
                if is_storage_error(e) and self._storage_failed(log, "cleaning", e):
                    continue
                logger.exception("%s: cleaning failed; marking the partition uncleanable", log.dir)
                self.uncleanable[log.topic_partition] = log
                continue
            out.append((log.topic, log.partition, stats))
        return out

    def _storage_failed(self, log: Log, what: str, exc: BaseException) -> bool:
        """Report an I/O error of ``log``'s dir to the ``LogDirFailureChannel`` (which takes the dir
        offline); False if there is no channel (a cleaner without a broker's log manager)."""
        if self.failure_channel is None:
            return False
        message = f"{what} {log.topic}-{log.partition} failed"
        self.failure_channel.maybe_add_offline_log_dir(self._dir_of(log), message, exc)
        return True

    def clean_log(self, log: Log) -> CleanerStats:
        """Compact ``log`` once (whatever its dirty ratio); a no-op if nothing is dirty."""
        start = _time.monotonic()
        first_dirty = self.first_dirty_offset(log)
        stats = CleanerStats(first_dirty_offset=first_dirty, end_offset=first_dirty)
        dirty = dirty_segments(self.cleanable_segments(log), first_dirty)
        if not dirty:
            return stats
        offset_map = OffsetMap(self.max_map_entries)
        aborted = AbortedRanges(log.collect_aborted_transactions(log.log_start_offset, log.last_stable_offset))
        end = self._build_offset_map(dirty, first_dirty, offset_map, stats, aborted)
        stats.end_offset = end
        stats.map_entries = len(offset_map)
        to_clean = [s for s in log.segments[:-1] if s.base_offset < end]
        now_ms = int(self._time() * 1000)
        delete_horizon_ms = now_ms - log.config["delete.retention.ms"]
        last_batches = {pid: e.batches[-1].last_offset for pid, e in log.producer_state.producers.items()
                        if e.batches}
        for group in self.group_segments_by_size(log, to_clean):
            self._clean_group(log, group, offset_map, delete_horizon_ms, stats, aborted, last_batches)
        self._write_checkpoint(log, end)
        stats.elapsed_ms = (_time.monotonic() - start) * 1000
        logger.info("%s: cleaned [%d, %d): %d→%d bytes, %d→%d records in %.0f ms", log.dir,
                    first_dirty, end, stats.bytes_read, stats.bytes_written, stats.records_read,
                    stats.records_retained, stats.elapsed_ms)
        return stats

    def _build_offset_map(self, dirty: list[LogSegment], first_dirty: int, offset_map: OffsetMap,
                          stats: CleanerStats, aborted: "AbortedRanges | None" = None) -> int:
        """Fill the map from whole dirty segments while they fit; returns the end offset."""
        end = first_dirty
        for seg in dirty:
            span = seg.next_offset - max(seg.base_offset, first_dirty)
            if len(offset_map) and len(offset_map) + span > offset_map.capacity:
                break  # the next segment might not fit: stop at a segment boundary
            for buf, pos, h in iter_segment_batches(seg):
                if h.is_control or h.last_offset < first_dirty:
                    continue
                if aborted is not None and aborted.contains(h):
                    continue
                _, recs = decode_batch(buf, pos)
                for r in recs:
                    if r.key is not None and r.offset >= first_dirty:
                        offset_map.put(r.key, r.offset)
            end = seg.next_offset
        return end

    @staticmethod
    def group_segments_by_size(log: Log, segs: list[LogSegment]) -> list[list[LogSegment]]:
        """Adjacent segments grouped while the sum of their sizes (and index sizes) stays
        within segment.bytes and their offsets within int32 of the group's base."""
        max_size, max_index = log.config["segment.bytes"], log.config["segment.index.bytes"]
        groups: list[list[LogSegment]] = []
        i = 0
        while i < len(segs):
            group = [segs[i]]
            size, idx, tidx = segs[i].size, len(segs[i].offset_index) * 8, len(segs[i].time_index) * 12
            i += 1
            while i < len(segs):
                s = segs[i]
                if (size + s.size > max_size or idx + len(s.offset_index) * 8 > max_index
                        or tidx + len(s.time_index) * 12 > max_index
                        or s.next_offset - 1 - group[0].base_offset > INT32_MAX):
                    break
                group.append(s)
                size, idx, tidx = size + s.size, idx + len(s.offset_index) * 8, tidx + len(s.time_index) * 12
                i += 1
            groups.append(group)
        return groups

    def _clean_group(self, log: Log, group: list[LogSegment], offset_map: OffsetMap,
                     delete_horizon_ms: int, stats: CleanerStats, aborted: "AbortedRanges | None" = None,
                     last_batches: dict[int, int] | None = None) -> None:
        c = log.config
        base = group[0].base_offset
        writer = _CleanedSegmentWriter(log.dir, base, c["index.interval.bytes"], c["segment.index.bytes"])
        try:
            mtime = 0.0
            for seg in group:
                seg_mtime = os.stat(seg.log_path).st_mtime
                mtime = max(mtime, seg_mtime)
                retain_deletes = seg_mtime * 1000 > delete_horizon_ms
                stats.segments_read += 1
                stats.bytes_read += seg.size
                for buf, pos, h in iter_segment_batches(seg):
                    self._clean_batch(buf, pos, h, offset_map, retain_deletes, writer, stats, aborted,
                                      last_batches)
            writer.finish(mtime)
        except BaseException:   # a segment deleted meanwhile (FileNotFoundError) included
            writer.abort()
            raise
        try:
            self._swap_runner(lambda: log.replace_segments(base, group))
        except ValueError as e:  # the segments changed meanwhile: nothing was renamed
            writer.abort()
            raise CleaningAborted(str(e)) from None
        stats.segments_written += 1
        stats.bytes_written += writer.size

    @staticmethod
    def _clean_batch(buf: bytes, pos: int, h: BatchHeader, offset_map: OffsetMap, retain_deletes: bool,
                     writer: _CleanedSegmentWriter, stats: CleanerStats, aborted: "AbortedRanges | None" = None,
                     last_batches: dict[int, int] | None = None) -> None:
        view = memoryview(buf)[pos:pos + h.size]
        if h.is_control:
            writer.append(view, h.last_offset, h.max_timestamp)
            return
        _, recs = decode_batch(buf, pos)
        stats.records_read += len(recs)
        is_last_of_producer = (h.producer_id >= 0 and last_batches is not None
                               and last_batches.get(h.producer_id) == h.last_offset)
        if aborted is not None and aborted.contains(h):
            if is_last_of_producer:
                writer.append(empty_batch(h), h.last_offset, h.max_timestamp)
            return
        kept = []
        for r in recs:
            if r.key is None:
                stats.null_keys_removed += 1
                continue
            latest = offset_map.get(r.key)
            if latest > r.offset:
                continue  # superseded
            if r.value is None and not retain_deletes:
                stats.tombstones_removed += 1
                continue
            kept.append(r)
        if not kept:
            if is_last_of_producer:
                writer.append(empty_batch(h), h.last_offset, h.max_timestamp)
            return
        stats.records_retained += len(kept)
        if len(kept) == len(recs):
            writer.append(view, h.last_offset, h.max_timestamp)  # unchanged: copied as it is
        else:
            new = rebuild_batch(h, kept)
            writer.append(new, h.last_offset, rb.parse_header(new).max_timestamp)


__all__ = ["CLEANER_OFFSET_CHECKPOINT", "AbortedRanges", "CleanerStats", "CleaningAborted", "LogCleaner", "OffsetMap",
           "empty_batch", "rebuild_batch",
           "iter_segment_batches"]
