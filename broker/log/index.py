"""Sparse offset index (``.index``) and time index (``.timeindex``) of one segment.

Invariant: entries live in memory, strictly increasing in offset (and, for the
time index, in timestamp); the file holds a prefix of them — entries are
appended to the file on ``flush()`` (the segment flushes at roll, flush and
close), so a crash can only lose trailing entries, which the log rebuilds or
does without (a sparser index is still correct). Nothing is preallocated.

``.index`` entry: relative offset int32 + file position int32 (8 bytes).
``.timeindex`` entry: timestamp int64 + relative offset int32 (12 bytes).
"""
from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right

from .segment_sync import fsync_path

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class CorruptIndexError(Exception):
    """An index file that fails its sanity check; the segment rebuilds it."""


class _Index:
    entry_size = 8
    _offsets: array[int]   # absolute offsets, ascending (filled by the subclass)

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        self._written = 0  # entries already in the file
        self._truncated = False  # the file may hold entries beyond _written

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    def _entry_bytes(self, i: int) -> bytes:
        raise NotImplementedError

    def flush(self) -> None:
        """Append the entries not yet in the file."""
        n = len(self._offsets)
        if self._written == n and not self._truncated and os.path.exists(self.path):
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, self._written * self.entry_size)
            os.lseek(fd, 0, os.SEEK_END)
            os.write(fd, b"".join(self._entry_bytes(i) for i in range(self._written, n)))
        finally:
            os.close(fd)
        self._written = n
        self._truncated = False

    def fsync(self) -> None:
        self.flush()
        fsync_path(self.path)

    def _read_file(self) -> bytes:
        with open(self.path, "rb") as f:
            data = f.read()
        if len(data) % self.entry_size:
            raise CorruptIndexError(f"{self.path}: size {len(data)} is not a multiple of {self.entry_size}")
        return data

    def delete(self) -> None:
        for p in (self.path, self.path + ".deleted"):
            try:
                os.remove(p)
            except FileNotFoundError:
                pass


class OffsetIndex(_Index):
    """Maps offsets to file positions: the last entry ≤ a target gives where to start scanning."""

    entry_size = 8

    def __init__(self, path: str, base_offset: int, max_index_size: int = 10485760) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._offsets = array("q")     # absolute offsets
        self._positions = array("q")

    def append(self, offset: int, position: int) -> None:
        if self._offsets and offset <= self._offsets[-1]:
            raise ValueError(f"index offset {offset} not above last entry {self._offsets[-1]}")
        self._offsets.append(offset)
        self._positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset ≤ ``offset``; (base, 0) if none."""
        i = bisect_right(self._offsets, offset)
        if i == 0:
            return self.base_offset, 0
        return self._offsets[i - 1], self._positions[i - 1]

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self._offsets:
            return self.base_offset, 0
        return self._offsets[-1], self._positions[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries with offset ≥ ``offset``."""
        i = bisect_left(self._offsets, offset)
        del self._offsets[i:], self._positions[i:]
        self._written = min(self._written, i)
        self._truncated = True

    def reset(self) -> None:
        self.truncate_to(self.base_offset)

    def _entry_bytes(self, i: int) -> bytes:
        return _OFFSET_ENTRY.pack(self._offsets[i] - self.base_offset, self._positions[i])

    def load(self, log_size: int) -> None:
        """Read the file; raise CorruptIndexError if it fails Kafka's sanity checks."""
        data = self._read_file()
        last_off, last_pos = -1, -1
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data):
            off = self.base_offset + rel
            if rel < 0 or off <= last_off or pos < last_pos or pos >= log_size:
                raise CorruptIndexError(f"{self.path}: entry ({rel}, {pos}) out of order or range")
            self._offsets.append(off)
            self._positions.append(pos)
            last_off, last_pos = off, pos
        if len(self._offsets) > self.max_entries:
            raise CorruptIndexError(f"{self.path}: more entries than segment.index.bytes allows")
        self._written = len(self._offsets)


class TimeIndex(_Index):
    """Maps timestamps to offsets; timestamps and offsets both strictly increase."""

    entry_size = 12

    def __init__(self, path: str, base_offset: int, max_index_size: int = 10485760) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._timestamps = array("q")
        self._offsets = array("q")

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is above the last entry's."""
        if self._timestamps and (timestamp <= self._timestamps[-1] or offset < self._offsets[-1]):
            return
        if timestamp < 0 or (self.is_full and not skip_full_check):
            return
        self._timestamps.append(timestamp)
        self._offsets.append(offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp < ``timestamp``; (-1, base) if none.

        Every record at or before that offset has a smaller timestamp, so a scan for the
        first timestamp ≥ ``timestamp`` can start at the batch holding the offset.
        """
        i = bisect_left(self._timestamps, timestamp)
        if i == 0:
            return -1, self.base_offset
        return self._timestamps[i - 1], self._offsets[i - 1]

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self._offsets[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries with offset ≥ ``offset``."""
        i = bisect_left(self._offsets, offset)
        del self._timestamps[i:], self._offsets[i:]
        self._written = min(self._written, i)
        self._truncated = True

    def reset(self) -> None:
        self.truncate_to(self.base_offset)

    def _entry_bytes(self, i: int) -> bytes:
        return _TIME_ENTRY.pack(self._timestamps[i], self._offsets[i] - self.base_offset)

    def load(self, next_offset: int) -> None:
        data = self._read_file()
        last_ts, last_off = -1, -1
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            off = self.base_offset + rel
            if rel < 0 or ts <= last_ts or off < last_off or off >= max(next_offset, self.base_offset + 1):
                raise CorruptIndexError(f"{self.path}: entry ({ts}, {rel}) out of order or range")
            self._timestamps.append(ts)
            self._offsets.append(off)
            last_ts, last_off = ts, off
        self._written = len(self._timestamps)
