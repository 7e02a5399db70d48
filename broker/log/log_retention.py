"""Retention of a partition's Log: which segments go, and moving the log start forward.

Invariants:
- only whole segments are deleted, oldest first, and only while every offset in them is
  below the high watermark (retention never deletes what a consumer cannot yet read);
- the active segment is deleted only when everything goes, and then an empty one is
  rolled at the LEO first, so offsets keep counting from the LEO;
- ``log_start_offset`` only moves forward, never past the HW, and the leader-epoch cache,
  recovery point and producer snapshots follow it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from odradek.protocol.errors import ErrorCode, KafkaError

from ..config.kafka_config import LogConfig
from .epoch_cache import LeaderEpochFileCache
from .log_parts import LogParts
from .segment import LogSegment


class LogRetention(LogParts):
    """Mixin of ``Log``: retention.ms / retention.bytes / log-start deletion (see the module
    invariants)."""

    config: LogConfig
    log_start_offset: int
    recovery_point: int
    leader_epoch_cache: LeaderEpochFileCache

    if TYPE_CHECKING:
        @property
        def size(self) -> int: ...
        def roll(self, new_base: int | None = None) -> LogSegment: ...
        def _remove_segments(self, segs: list[LogSegment]) -> None: ...

    def delete_old_segments(self) -> int:
        """Delete segments beyond retention.ms / retention.bytes or below the log start;
        returns how many were deleted. Never past the high watermark."""
        if self.config.delete_enabled:
            return (self._delete_segments(self._retention_ms_breached())
                    + self._delete_segments(self._retention_size_breached())
                    + self._delete_segments(self._log_start_offset_breached()))
        return self._delete_segments(self._log_start_offset_breached())

    def retention_due(self) -> bool:
        """Whether ``delete_old_segments`` would delete a segment now: the same rules, read only
        (the broker asks on a thread, then deletes on the reactor)."""
        return bool((self.config.delete_enabled and (self._retention_ms_breached() or self._retention_size_breached()))
                    or self._log_start_offset_breached())

    def _deletable(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> list[LogSegment]:
        hw = self.high_watermark
        out = []
        for i, seg in enumerate(self.segments):
            nxt = self.segments[i + 1] if i + 1 < len(self.segments) else None
            upper = nxt.base_offset if nxt else self.log_end_offset
            if nxt is None and seg.size == 0:
                break
            if hw >= upper and predicate(seg, nxt):
                out.append(seg)
            else:
                break
        return out

    def _delete_segments(self, deletable: list[LogSegment]) -> int:
        if not deletable:
            return 0
        if deletable[-1] is self.active_segment:
            self.roll()  # deleting everything: keep an empty active segment at the LEO
        self._remove_segments(deletable)
        self.maybe_increment_log_start_offset(self.segments[0].base_offset)
        self.producer_state.delete_snapshots_below(self.segments[0].base_offset)
        return len(deletable)

    def _retention_ms_breached(self) -> list[LogSegment]:
        retention = self.config["retention.ms"]
        if retention < 0:
            return []
        now = self._now_ms()
        return self._deletable(lambda s, _: now - s.largest_timestamp > retention)

    def _retention_size_breached(self) -> list[LogSegment]:
        limit = self.config["retention.bytes"]
        size = self.size
        if limit < 0 or size < limit:
            return []
        diff = [size - limit]

        def predicate(seg: LogSegment, _: LogSegment | None) -> bool:
            if diff[0] - seg.size >= 0:
                diff[0] -= seg.size
                return True
            return False
        return self._deletable(predicate)

    def _log_start_offset_breached(self) -> list[LogSegment]:
        start = self.log_start_offset
        return self._deletable(lambda s, n: n is not None and n.base_offset <= start)

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start forward (retention, DeleteRecords); never beyond the HW/LEO."""
        if offset <= self.log_start_offset:
            return False
        if offset > self.high_watermark:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"log start {offset} beyond the high watermark")
        self.log_start_offset = offset
        self.leader_epoch_cache.truncate_from_start(offset)
        self.recovery_point = max(self.recovery_point, offset)
        return True

