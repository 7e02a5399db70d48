"""Leader epoch cache of one partition, persisted as ``leader-epoch-checkpoint``.

Invariant: entries (epoch, start_offset) are strictly increasing in both fields, and the file
(rewritten atomically: temp file, fsync, rename) holds every entry that starts below the log's
recovery point. A truncation rewrites it at once (but the one at load, ``loaded``). A new epoch
(``assign``: a LeaderAndIsr making this broker leader, a follower's first batch of a newer epoch,
recovery) is only kept in memory (``unwritten``) until ``flush``: the Log calls it before its recovery point moves and when it
closes, and ``flush_all`` writes many at once at shutdown. Kafka 2.8 fsyncs the file at every
new epoch; at 10,000 partitions that is one fsync per partition on every leader change, on the
broker's only reactor thread here. Nothing is lost by waiting: an entry not yet written starts
at or after the recovery point, and after a crash the log recovers every batch from the recovery
point on, assigning their leader epochs again (``Log._recover_segment``). What recovery cannot
rebuild is an epoch that started without any batch before the crash; no replica holds a record
of it, and the end offset answered for the epoch before it is then the log end offset, which
is where that epoch started.
File: ``0``, count, then ``epoch startOffset`` lines (``LeaderEpochCheckpointFile``).
"""
from __future__ import annotations

import logging
from bisect import bisect_right
from typing import Iterable, NamedTuple

from .checkpoint import CheckpointError, entries_text, read_entries, write_all_atomically, write_entries

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    """``LeaderEpochFileCache``: which offset each leader epoch started at."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._entries = [EpochEntry(int(e), int(o)) for e, o in read_entries(path, 2)]
        except (CheckpointError, ValueError) as e:
            log.warning("ignoring malformed leader epoch checkpoint %s: %s", path, e)
            self._entries = []
        self.unwritten = False   # an assign since the file was last written

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (no-op unless it is a new latest epoch)."""
        if epoch < 0 or (self._entries and epoch <= self._entries[-1].epoch):
            if self._entries and epoch < self._entries[-1].epoch:
                log.debug("%s: not assigning stale epoch %d at %d", self.path, epoch, start_offset)
            return
        # drop entries that would break monotonicity (Kafka: maybeTruncateNonMonotonicEntries)
        while self._entries and self._entries[-1].start_offset >= start_offset:
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        self.unwritten = True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch: the largest epoch ≤ the requested
        one and the start offset of the next epoch (or the LEO for the latest epoch)."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        i = bisect_right(epochs, requested_epoch)  # first entry with epoch > requested
        if i == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher = self._entries[i]
        if i == 0:
            return requested_epoch, higher.start_offset
        return self._entries[i - 1].epoch, higher.start_offset

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range holds ``offset`` (UNDEFINED_EPOCH if before the first)."""
        starts = [e.start_offset for e in self._entries]
        i = bisect_right(starts, offset)
        return self._entries[i - 1].epoch if i else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int, write: bool = True) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncated to it); ``write``
        False: only in memory (see ``loaded``)."""
        if end_offset >= 0 and self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries = [e for e in self._entries if e.start_offset < end_offset]
            self._written(write)

    def truncate_from_start(self, start_offset: int, write: bool = True) -> None:
        """Log start moved to ``start_offset``: drop earlier entries but keep the epoch
        covering it, moved to start there."""
        if not self._entries or self._entries[0].start_offset >= start_offset:
            return
        keep = [e for e in self._entries if e.start_offset > start_offset]
        covering = [e for e in self._entries if e.start_offset <= start_offset][-1]
        self._entries = [EpochEntry(covering.epoch, start_offset)] + keep
        self._written(write)

    def loaded(self, log_start_offset: int, log_end_offset: int) -> None:
        """The log finished loading: drop the entries past its end (an epoch that began without a
        record, as Kafka's load does) or before its start, in memory only. Every load does the
        same again, so the file keeping them until the next write loses nothing; writing them here
        would be one fsync per log at every broker start."""
        self.truncate_from_end(log_end_offset, write=False)
        self.truncate_from_start(log_start_offset, write=False)

    def _written(self, write: bool) -> None:
        if write:
            self._flush()
        else:
            self.unwritten = True

    def move_to(self, path: str) -> None:
        """Keep these entries in ``path`` from now on (a replica moved to another log dir)."""
        self.path = path
        self._flush()

    def clear_and_flush(self) -> None:
        self._entries = []
        self._flush()

    def flush(self) -> None:
        """Write the file if an assign is not in it yet (before the recovery point moves past it)."""
        if self.unwritten:
            self._flush()

    def _flush(self) -> None:
        write_entries(self.path, self._entries)
        self.unwritten = False


def flush_all(caches: Iterable[LeaderEpochFileCache]) -> list[tuple[str, OSError]]:
    """``flush`` many caches, their files synced together (``checkpoint.write_all_atomically``);
    (path, error) for the files that could not be written (those caches stay unwritten)."""
    unwritten = {c.path: c for c in caches if c.unwritten}
    failed = write_all_atomically((path, entries_text(c._entries)) for path, c in unwritten.items())
    for c in unwritten.values():
        c.unwritten = False
    for path, _ in failed:
        unwritten[path].unwritten = True
    return failed
