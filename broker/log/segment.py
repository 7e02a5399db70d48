"""One log segment: ``%020d.log`` plus its ``.index``, ``.timeindex`` and ``.txnindex``.

Invariant: the ``.log`` file is a sequence of complete, CRC-valid magic-2 batches
with strictly increasing offsets, all in ``[base_offset, next_offset)`` and
within int32 of ``base_offset``; ``size`` is its length. Appends reach the OS
with one ``os.write`` (no user-space buffer), so a kill -9 loses nothing that
was appended. Batches are handled through their headers, except in ``recover``,
which checks each batch as a follower does (``validator.check_stored_batch``). The ``.txnindex`` lists the aborted transactions whose markers
are in this segment; it is truncated and deleted with the segment. ``position_of`` remembers
the positions it found until a truncation or a recovery (nothing else moves a batch). The
partition directories' names are read here too (``parse_topic_partition``).
"""
from __future__ import annotations

import os
import random
import re
from typing import Callable, Iterator, Sequence

from odradek.protocol import record_batch as rb
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import decode_batch

from .index import CorruptIndexError, OffsetIndex, TimeIndex
from .read_buffers import ReadBuffers
from .txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from .validator import check_stored_batch

LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX = ".log", ".index", ".timeindex"
DELETED_SUFFIX = ".deleted"
INT32_MAX = 2**31 - 1
_SCAN_CHUNK = 32 * 1024
_RECOVER_CHUNK = 1 << 20
_POSITIONS_KEPT = 16   # position_of's memory: offsets a few parked fetches keep asking for
_MIN_BATCH_LENGTH = rb.HEADER_SIZE - rb.LOG_OVERHEAD

# (position within the appended buffer, last offset, max timestamp, size) of one batch
BatchInfo = tuple[int, int, int, int]


_SUFFIXED_DIR = re.compile(r"^(.+)\.[0-9a-f]{32}-(?:future|delete)$")
FUTURE_DIR_SUFFIX = "-future"


def parse_topic_partition(dirname: str) -> tuple[str, int]:
    """``my-topic-3`` -> ("my-topic", 3), also for a future or deleted replica's
    ``my-topic-3.<uuid hex>-future``; ValueError if it is not a partition directory."""
    name = os.path.basename(dirname.rstrip("/"))
    m = _SUFFIXED_DIR.match(name)
    topic, sep, part = (m.group(1) if m else name).rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise ValueError(f"not a partition directory: {dirname}")
    return topic, int(part)


def filename_prefix(offset: int) -> str:
    return "%020d" % offset


class LogSegment:
    """A segment of a partition's log; see the module invariant."""

    def __init__(self, dir: str, base_offset: int, index_interval_bytes: int = 4096,
                 max_index_size: int = 10485760, roll_jitter_ms: int = 0,
                 now_ms: Callable[[], int] | None = None) -> None:
        self.dir = dir
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        prefix = os.path.join(dir, filename_prefix(base_offset))
        self.log_path = prefix + LOG_SUFFIX
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.offset_index = OffsetIndex(prefix + INDEX_SUFFIX, base_offset, max_index_size)
        self.time_index = TimeIndex(prefix + TIME_INDEX_SUFFIX, base_offset, max_index_size)
        self.txn_index = TransactionIndex(prefix + TXN_INDEX_SUFFIX)
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.bytes_since_last_index_entry = 0
        self.rolling_base_ms: int | None = None
        self._now_ms = now_ms or (lambda: 0)
        self._positions: dict[int, int] = {}   # position_of's: offset -> position of its batch

    # ---------------------------------------------------------------- creation / loading
    @classmethod
    def create(cls, dir: str, base_offset: int, index_interval_bytes: int, max_index_size: int,
               segment_jitter_ms: int, segment_ms: int, now_ms: Callable[[], int]) -> "LogSegment":
        """A new empty segment (any stale files with its name are emptied)."""
        jitter = random.randrange(min(segment_jitter_ms, segment_ms)) if segment_jitter_ms > 0 else 0
        seg = cls(dir, base_offset, index_interval_bytes, max_index_size, jitter, now_ms)
        if seg.size:
            os.ftruncate(seg._fd, 0)
            seg.size = 0
        seg.offset_index._truncated = seg.time_index._truncated = True
        seg.flush_indexes()
        seg.txn_index.reset()
        return seg

    def load(self) -> None:
        """Load the indexes and the tail state of a cleanly written segment.

        Raises CorruptIndexError if an index is missing or inconsistent with the log;
        the caller then calls ``recover()``.
        """
        if not (os.path.exists(self.offset_index.path) and os.path.exists(self.time_index.path)):
            raise CorruptIndexError(f"{self.log_path}: index files missing")
        self.offset_index.load(self.size)
        self.txn_index.load()
        self._load_tail_state()
        self.time_index.load(self.next_offset)
        ts, off = self.time_index.last_entry
        if ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = ts, off
        self._init_rolling_base()

    def _load_tail_state(self) -> None:
        """next_offset and max timestamp from the batches after the last offset index entry."""
        idx_offset, pos = self.offset_index.last_entry
        end = pos
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        if self.max_timestamp < 0:
            self.offset_of_max_timestamp = -1
        first = True
        for p, h in self._headers(pos):
            if first and self.offset_index and h.last_offset != idx_offset:
                raise CorruptIndexError(f"{self.log_path}: index entry {idx_offset} does not match the log")
            first = False
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, h.last_offset
            self.next_offset = h.next_offset
            end = p + h.size
        if end != self.size or (first and self.offset_index):
            raise CorruptIndexError(f"{self.log_path}: log does not end on a batch boundary")
        self.bytes_since_last_index_entry = 0

    def _init_rolling_base(self) -> None:
        self.rolling_base_ms = None
        if self.size:
            for _, h in self._headers(0):
                ts = h.max_timestamp
                now = self._now_ms()
                self.rolling_base_ms = min(ts, now) if ts >= 0 else now
                break

    def recover(self, on_batch: Callable[[rb.BatchHeader, memoryview], None] | None = None) -> int:
        """Re-validate every batch (``validator.check_stored_batch``: the checks a follower
        makes), rebuild both indexes and truncate at the first corrupt or partial batch; ``on_batch`` sees each valid batch (header, bytes). The
        txn index is emptied (the log rebuilds it). Returns the number of bytes truncated."""
        self._positions.clear()
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp = self.offset_of_max_timestamp = -1
        self.bytes_since_last_index_entry = 0
        pos, size = 0, self.size
        buf, buf_start = b"", 0
        while pos < size:
            rel = pos - buf_start
            if len(buf) - rel < rb.LOG_OVERHEAD:
                buf, buf_start, rel = os.pread(self._fd, _RECOVER_CHUNK, pos), pos, 0
                if len(buf) < rb.LOG_OVERHEAD:
                    break
            _, length = rb.peek_offset_and_length(buf, rel)
            total = rb.LOG_OVERHEAD + length
            if length < _MIN_BATCH_LENGTH or pos + total > size:
                break
            if len(buf) - rel < total:
                buf, buf_start, rel = os.pread(self._fd, max(_RECOVER_CHUNK, total), pos), pos, 0
                if len(buf) < total:
                    break
            view = memoryview(buf)[rel:rel + total]
            try:
                h = check_stored_batch(view, self.log_path)
            except KafkaError:
                break
            if h.base_offset < max(self.next_offset, self.base_offset) \
                    or h.last_offset - self.base_offset > INT32_MAX:
                break
            if on_batch is not None:
                on_batch(h, view)
            self._index_batch(pos, h.last_offset, h.max_timestamp, total)
            self.next_offset = h.next_offset
            pos += total
        truncated = size - pos
        if truncated:
            os.ftruncate(self._fd, pos)
            self.size = pos
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True)
        self.offset_index._truncated = self.time_index._truncated = True
        self.flush_indexes()
        self._init_rolling_base()
        return truncated

    # ---------------------------------------------------------------- append
    def _index_batch(self, position: int, last_offset: int, max_ts: int, size: int) -> None:
        if max_ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_ts, last_offset
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    def append(self, buf: bytes | bytearray | memoryview, batches: Sequence[BatchInfo], now_ms: int) -> None:
        """Write ``buf`` (complete batches described by ``batches``) at the end."""
        pos0 = self.size
        total = len(buf)
        try:
            written = os.write(self._fd, buf)
            while written < total:   # a short write (rare): the rest, from where it stopped
                written += os.write(self._fd, memoryview(buf)[written:])
        except OSError as e:
            os.ftruncate(self._fd, pos0)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self.log_path}: {e.strerror}") from None
        if self.rolling_base_ms is None:
            self.rolling_base_ms = now_ms
        for rel, last_offset, max_ts, size in batches:
            self._index_batch(pos0 + rel, last_offset, max_ts, size)
        self.size = pos0 + total
        self.next_offset = batches[-1][1] + 1

    def should_roll(self, append_size: int, last_offset: int, now_ms: int,
                    segment_bytes: int, segment_ms: int) -> bool:
        """``LogSegment.shouldRoll``: size, age, full index or relative offset overflow."""
        if self.size == 0:
            return False
        return (self.size + append_size > segment_bytes
                or (self.rolling_base_ms is not None
                    and now_ms - self.rolling_base_ms > segment_ms - self.roll_jitter_ms)
                or self.offset_index.is_full or self.time_index.is_full
                or last_offset - self.base_offset > INT32_MAX)

    # ---------------------------------------------------------------- read
    def _headers(self, pos: int, end: int | None = None) -> Iterator[tuple[int, rb.BatchHeader]]:
        """(position, header) of each complete batch from ``pos``; reads only headers' chunks."""
        end = self.size if end is None else end
        buf, buf_start = b"", pos
        while end - pos >= rb.HEADER_SIZE:
            rel = pos - buf_start
            if len(buf) - rel < rb.HEADER_SIZE:
                buf, buf_start, rel = os.pread(self._fd, min(_SCAN_CHUNK, end - pos), pos), pos, 0
                if len(buf) < rb.HEADER_SIZE:
                    return
            h = rb.parse_header(buf, rel)
            if h.batch_length < _MIN_BATCH_LENGTH or pos + h.size > end:
                return
            yield pos, h
            pos += h.size

    def translate_offset(self, offset: int, start_position: int = 0) -> tuple[int, rb.BatchHeader] | None:
        """(position, header) of the first batch whose last offset is ≥ ``offset``."""
        _, pos = self.offset_index.lookup(offset)
        for p, h in self._headers(max(pos, start_position)):
            if h.last_offset >= offset:
                return p, h
        return None

    def position_of(self, offset: int) -> int | None:
        """The position of the batch holding ``offset`` (``translate_offset``'s), found once:
        a fetch parked at an offset asks on every append to its partition."""
        pos = self._positions.get(offset)
        if pos is None:
            found = self.translate_offset(offset)
            if found is None:
                return None
            if len(self._positions) >= _POSITIONS_KEPT:
                self._positions.clear()
            pos = self._positions[offset] = found[0]
        return pos

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True, buffers: ReadBuffers | None = None) -> bytes | memoryview | None:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` (or the
        first batch alone when ``min_one_batch``), none with base offset ≥ ``max_offset``.
        None if no batch of this segment reaches ``offset``. A read cut short of ``max_bytes``
        (at the last whole batch) is a view of what was read: a fetch's megabyte is not copied
        again to drop a partial batch's tail. With ``buffers`` (the fetch path's), a large read
        goes into one of its reused buffers."""
        found = self.translate_offset(offset)
        if found is None:
            return None
        pos, h = found
        if max_offset is not None and h.base_offset >= max_offset:
            return b""
        if h.size > max_bytes:
            return os.pread(self._fd, h.size, pos) if min_one_batch else b""
        n = min(max_bytes, self.size - pos)
        data = os.pread(self._fd, n, pos) if buffers is None else buffers.pread(self._fd, n, pos)
        cut, n = h.size, len(data)
        peek = rb.peek_offset_and_length
        while cut + rb.LOG_OVERHEAD <= n:
            base, length = peek(data, cut)
            size = rb.LOG_OVERHEAD + length
            if cut + size > n or (max_offset is not None and base >= max_offset):
                break
            cut += size
        return data if cut == n else memoryview(data)[:cut]

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at/after ``start_offset`` whose timestamp
        is ≥ ``timestamp``. Batch headers narrow it to one batch; only that batch's records
        are decoded (ListOffsets, not the produce/fetch path), as Kafka does."""
        _, ts_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(ts_offset, start_offset))
        for batch_pos, h in self._headers(pos):
            if h.max_timestamp >= timestamp and h.last_offset >= start_offset:
                _, records = decode_batch(os.pread(self._fd, h.size, batch_pos))
                for r in records:
                    if r.offset >= start_offset and r.timestamp >= timestamp:
                        return r.offset, r.timestamp
        return None

    def iter_batch_headers(self, position: int = 0) -> Iterator[tuple[int, rb.BatchHeader]]:
        return self._headers(position)

    def read_batch(self, position: int, size: int) -> bytes:
        """The bytes of one batch (control batches, to read their marker)."""
        return os.pread(self._fd, size, position)

    @property
    def largest_timestamp(self) -> int:
        """Max batch timestamp, or the file's mtime if no batch has one (Kafka's rule)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    # ---------------------------------------------------------------- truncation / lifecycle
    def truncate_to(self, offset: int) -> int:
        """Remove batches whose last offset is ≥ ``offset``; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        pos = found[0]
        removed = self.size - pos
        self._positions.clear()
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        os.ftruncate(self._fd, pos)
        self.size = pos
        self._load_tail_state()
        self.flush_indexes()
        if self.size == 0:
            self.rolling_base_ms = None
        return removed

    def on_become_inactive(self) -> None:
        """The segment stops being active: add the final time index entry, write indexes."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True)
        self.flush_indexes()

    def flush_indexes(self) -> None:
        self.offset_index.flush()
        self.time_index.flush()

    @property
    def fd(self) -> int:
        """The log file's descriptor (``segment_sync.py`` syncs a copy of it)."""
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            self.on_become_inactive()
            os.close(self._fd)
            self._fd = -1

    def moved_to(self, dir: str) -> None:
        """Its directory was renamed to ``dir`` (the open log file stays valid; the indexes are
        opened by path)."""
        prefix = os.path.join(dir, filename_prefix(self.base_offset))
        self.dir = dir
        self.log_path = prefix + LOG_SUFFIX
        self.offset_index.path = prefix + INDEX_SUFFIX
        self.time_index.path = prefix + TIME_INDEX_SUFFIX
        self.txn_index.path = prefix + TXN_INDEX_SUFFIX

    def close_handlers(self) -> None:
        """Close the file without touching the indexes (for deletion)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def paths(self) -> list[str]:
        return [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def rename_to_deleted(self) -> None:
        """Mark the files ``.deleted`` (``LogSegment.changeFileSuffixes``)."""
        self.close_handlers()
        for p in self.paths():
            if os.path.exists(p):
                os.replace(p, p + DELETED_SUFFIX)

    def delete_files(self) -> None:
        self.close_handlers()
        for p in self.paths():
            for q in (p, p + DELETED_SUFFIX):
                try:
                    os.remove(q)
                except FileNotFoundError:
                    pass

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"
