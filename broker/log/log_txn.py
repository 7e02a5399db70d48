"""The transactional half of a partition's Log: producer state kept with the log.

Invariants:
- ``Log.producer_state`` always equals the state obtained by replaying the log's batch
  headers (plus the marker of each control batch) from the newest snapshot at or below
  the LEO (from the log start without one): appends apply each batch as it is written,
  truncation and recovery reload a snapshot and replay;
- every abort marker in a segment has its AbortedTxn entry in that segment's ``.txnindex``
  (rebuilt from the log when the segment is recovered);
- the last stable offset is min(first offset of an ongoing transaction or of a completed
  one whose marker is not yet below the HW, HW).
"""
from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING, Callable

from odradek.protocol import record_batch as rb
from odradek.protocol.control_records import build_control_batch, parse_control_record
from odradek.protocol.errors import KafkaError

from .log_parts import LogParts
from .producer_state import ORIGIN_COORDINATOR, CompletedTxn, ProducerStateManager
from .segment import LogSegment
from .txn_index import AbortedTxn

if TYPE_CHECKING:
    from .log import LogAppendInfo


class TransactionalLog(LogParts):
    """Mixin of ``Log``: producer state, markers, txn index, LSO (see the module invariants)."""

    dir: str
    _bases: list[int]

    if TYPE_CHECKING:
        def append_as_leader(self, records: bytes | bytearray, leader_epoch: int,
                             origin: str = ...) -> LogAppendInfo: ...

    def _replay(self, state: ProducerStateManager, start: int, segments: list[LogSegment],
                on_complete: Callable[[LogSegment, CompletedTxn], None] | None = None) -> None:
        """Apply the batches of ``segments`` from offset ``start`` on to ``state`` (headers only,
        plus the marker of each control batch)."""
        for seg in segments:
            if seg.next_offset <= start or seg.size == 0:
                continue
            pos = seg.offset_index.lookup(start)[1] if start > seg.base_offset else 0
            for p, h in seg.iter_batch_headers(pos):
                if h.last_offset < start:
                    continue
                done = state.apply_batch(h, h.base_offset, h.last_offset, _append_time(h),
                                         self._marker_at(seg, p, h))
                if done is not None and on_complete is not None:
                    on_complete(seg, done)

    @staticmethod
    def _marker_at(seg: LogSegment, pos: int, h: rb.BatchHeader) -> tuple[bool, int] | None:
        if not h.is_control or h.producer_id < 0:
            return None
        return _marker_of(seg.read_batch(pos, h.size))

    def _state_before(self, offset: int) -> tuple[ProducerStateManager, int]:
        """A fresh producer state loaded from the newest snapshot at or below ``offset`` (or
        empty at the log start) and the offset from which batches must be replayed."""
        state = ProducerStateManager(self.dir, self.producer_state.expiration_ms)
        start = state.load_snapshot(offset, self._now_ms())
        if start is None:
            start = self.segments[0].base_offset if self.segments else 0
            state.clear(start)
        return state, start

    def _rebuild_txn_index(self, i: int) -> None:
        """Refill segment ``i``'s txn index from the producer state before it (after recovery)."""
        seg = self.segments[i]
        state, start = self._state_before(seg.base_offset)
        self._replay(state, start, [s for s in self.segments[:i] if s.next_offset > start])

        def on_complete(s: LogSegment, txn: CompletedTxn) -> None:
            if txn.is_aborted and s is seg:
                s.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                              txn.last_stable_offset))
        self._replay(state, max(start, seg.base_offset), [seg], on_complete)

    def _load_producer_state(self) -> None:
        """Load the newest snapshot at or below the LEO and replay the log from there (from the
        log start without one); snapshots above the LEO or below the first segment go."""
        leo = self.log_end_offset
        self.producer_state.delete_snapshots_above(leo)
        self.producer_state.delete_snapshots_below(self.segments[0].base_offset)
        state, start = self._state_before(leo)
        self._replay(state, start, [s for s in self.segments if s.next_offset > start])
        state.map_end_offset = leo
        self.producer_state = state

    def _apply_appended(self, batches: list[tuple[int, rb.BatchHeader]], buf: bytes | bytearray | memoryview,
                        markers: dict[int, tuple[bool, int]] | None = None) -> None:
        """Apply appended batches (final offsets in their headers) to the producer state and
        index the aborted transactions they end in the active segment."""
        state, seg = self.producer_state, self.active_segment
        for pos, h in batches:
            if h.producer_id < 0:   # no producer: only the state's end offset moves (apply_batch's first step)
                state.map_end_offset = max(state.map_end_offset, h.base_offset + h.last_offset_delta + 1)
                continue
            marker = None
            if h.is_control and h.producer_id >= 0:
                marker = markers.get(pos) if markers is not None else _marker_of(memoryview(buf)[pos:pos + h.size])
            done = state.apply_batch(h, h.base_offset, h.last_offset, _append_time(h), marker)
            if done is not None and done.is_aborted:
                seg.txn_index.append(AbortedTxn(done.producer_id, done.first_offset, done.last_offset,
                                                done.last_stable_offset))

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of an ongoing txn or of a completed one not yet below the HW, HW)."""
        hw = self.high_watermark
        state = self.producer_state
        state.on_high_watermark(hw)
        first = state.first_unstable_offset()
        return hw if first is None else min(first, hw)

    def collect_aborted_transactions(self, start: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, upper_bound) (for read_committed fetches)."""
        i = max(bisect_right(self._bases, start) - 1, 0)
        out: list[AbortedTxn] = []
        for seg in self.segments[i:]:
            out.extend(seg.txn_index.collect(start, upper_bound))
            if any(e.last_stable_offset >= upper_bound for e in seg.txn_index.entries):
                break   # later markers end transactions that began at or after the upper bound
        return out

    def remove_expired_producers(self) -> int:
        return self.producer_state.remove_expired(self._now_ms())

    def has_expired_producers(self) -> bool:
        return self.producer_state.has_expired(self._now_ms())

    def append_marker_as_leader(self, producer_id: int, producer_epoch: int, commit: bool,
                                coordinator_epoch: int, leader_epoch: int):
        """Append an end-transaction marker (WriteTxnMarkers); INVALID_PRODUCER_EPOCH /
        TRANSACTION_COORDINATOR_FENCED for a stale one."""
        batch = build_control_batch(producer_id, producer_epoch, commit, coordinator_epoch, self._now_ms())
        return self.append_as_leader(batch, leader_epoch, ORIGIN_COORDINATOR)


def _append_time(h: rb.BatchHeader) -> int:
    return h.max_timestamp if h.timestamp_type == 1 else -1


def _marker_of(data: bytes | memoryview) -> tuple[bool, int] | None:
    try:
        return parse_control_record(data)
    except KafkaError:
        return None   # a control batch that is not a well-formed marker changes no transaction
