"""Purgatory: requests parked until a condition holds or their timeout passes.

Invariant: an operation completes exactly once — when ``can_complete()`` first
returns True (checked at watch time, unless a caller that just found it incomplete parks it
with ``watch``, and on every ``check_and_complete(key)`` for one of its keys) or when its
timer fires (``expired`` is then True) — and on completion it is removed from every key it
watched and its timer is cancelled.
Keys are topic-partitions; the replica manager calls ``check_and_complete`` after
appends, high-watermark moves and leadership changes. A key's check asks each op
``can_complete_on(key)``: an op may re-check only that key's part of itself (a
``DelayedFetch`` keeps the bytes readable per partition from its last look, each
partition's figure refreshed when its own key fires), so an ISR change of one
partition costs one partition's check per waiting follower fetch, not a walk of
every partition each fetch names (Kafka's ``DelayedFetch.tryComplete`` walks them all).
Timeouts: the operations parked with one timeout are due in the order they were parked, so each
timeout has one queue (a dict in insertion order: an op leaves it in O(1) on completion) and one
scheduler timer, set for the queue's oldest op and moved on when it fires. Parking and completing
an op costs two dict operations, not a reactor timer set and cancelled (Kafka's purgatory puts
its ops on a timing wheel for the same reason). Sans-IO: the scheduler is anything with
``callLater`` and ``seconds`` (the reactor, or ``task.Clock`` in tests).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable

from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class DelayedOperation:
    """Base class: subclasses implement ``can_complete`` and ``on_complete``."""

    def __init__(self, timeout_ms: int):
        self.timeout_ms = timeout_ms
        self.completed = False
        self.expired = False
        self._queue = -1   # once parked: its timeout queue (the timeout in ms, at least 0) ...
        self._deadline = 0.0   # ... and the scheduler's seconds() when it is due
        self._keys: list[Hashable] = []

    def can_complete(self) -> bool:
        raise NotImplementedError

    def can_complete_on(self, key: Hashable) -> bool:
        """``key`` changed: can the operation complete now? (Default: the full check.)"""
        return self.can_complete()

    def on_complete(self) -> None:
        raise NotImplementedError


class Purgatory:
    """Watchers per key, plus a queue and a timer per timeout."""

    # an op due within this much of a timer's firing is due: the float rounding of
    # ``seconds() + delay`` may land the firing a hair before the op's deadline (never more)
    _SLACK_S = 1e-6

    def __init__(self, name: str, scheduler: Any):
        self.name = name
        self.scheduler = scheduler
        self._watchers: dict[Hashable, dict[DelayedOperation, None]] = {}
        self._queues: dict[int, dict[DelayedOperation, None]] = {}   # timeout ms -> its parked ops, oldest first
        self._timers: dict[int, Any] = {}   # timeout ms -> the scheduler's call for its oldest op

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if it can, else park it; True if it completed."""
        if op.can_complete():
            self._finish(op)
            return True
        self.watch(op, keys)
        return False

    def watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> None:
        """Park ``op`` unchecked: for a caller that found it incomplete in this reactor turn."""
        op._keys = list(keys)
        for key in op._keys:
            self._watchers.setdefault(key, {})[op] = None
        timeout = op._queue = max(op.timeout_ms, 0)
        op._deadline = self.scheduler.seconds() + timeout / 1000.0
        queue = self._queues.get(timeout)
        if queue is None:
            queue = self._queues[timeout] = {}
            self._timers[timeout] = self.scheduler.callLater(timeout / 1000.0, self._expire_due, timeout)
        queue[op] = None

    def check_and_complete(self, key: Hashable) -> int:
        """Re-check the operations watching ``key``; returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        done = 0
        for op in list(ops):
            if op.completed:
                continue
            try:
                ready = op.can_complete_on(key)
            except Exception:
                log.exception("%s: can_complete failed; completing the operation", self.name)
                ready = True
            if ready:
                self._finish(op)
                done += 1
        return done

    def watched(self) -> int:
        return sum(len(w) for w in self._watchers.values())

    def shutdown(self) -> None:
        """Expire everything still parked (responses go out with their timeout errors)."""
        for op in [op for queue in self._queues.values() for op in queue]:
            self._finish(op, expired=True)   # (the last op of a queue cancels its timer)

    def _expire_due(self, timeout: int) -> None:
        """The timer of ``timeout``'s queue fired: expire its ops that are due, oldest first,
        then set the timer again for the oldest op left. (An op parked meanwhile, by an expired
        op's completion, joins the queue; a queue emptied goes with its timer, in ``_finish``.)"""
        queue = self._queues.get(timeout)
        now = self.scheduler.seconds()
        while queue:
            op = next(iter(queue))
            if op._deadline > now + self._SLACK_S:
                self._timers[timeout] = self.scheduler.callLater(op._deadline - now, self._expire_due, timeout)
                return
            self._finish(op, expired=True)   # (takes it off the queue)

    def _finish(self, op: DelayedOperation, expired: bool = False) -> None:
        if op.completed:
            return
        op.completed = True
        op.expired = expired
        queue = self._queues.get(op._queue)
        if queue is not None and op in queue:
            del queue[op]
            if not queue:   # no op left to time out: neither queue nor timer
                del self._queues[op._queue]
                timer = self._timers.pop(op._queue)
                if timer.active():   # (not when it is the one firing)
                    timer.cancel()
        for key in op._keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.pop(op, None)
                if not watchers:
                    del self._watchers[key]
        try:
            op.on_complete()
        except Exception:
            log.exception("%s: completing a delayed operation failed", self.name)


# --------------------------------------------------------------------- produce

@dataclass
class ProducePartitionStatus:
    """One partition of an acks=all produce: the offset the HW must reach and the reply."""
    required_offset: int
    response: dict
    pending: bool = True


class DelayedProduce(DelayedOperation):
    """acks=-1: done when every appended partition's HW ≥ last offset + 1."""

    def __init__(self, timeout_ms: int, statuses: dict[tuple[str, int], ProducePartitionStatus],
                 check: Callable[[tuple[str, int], int], tuple[bool, ErrorCode]],
                 respond: Callable[[dict[tuple[str, int], dict]], None]):
        super().__init__(timeout_ms)
        self.statuses = statuses
        self._check = check
        self._respond = respond

    def can_complete(self) -> bool:
        for tp, st in self.statuses.items():
            if st.pending:
                done, code = self._check(tp, st.required_offset)
                if done:
                    st.pending = False
                    st.response["error_code"] = int(code)
        return not any(st.pending for st in self.statuses.values())

    def on_complete(self) -> None:
        for st in self.statuses.values():
            if st.pending:
                st.pending = False
                st.response["error_code"] = int(ErrorCode.REQUEST_TIMED_OUT)
        self._respond({tp: st.response for tp, st in self.statuses.items()})


def replicated_now(check: Callable[[tuple[str, int], int], tuple[bool, ErrorCode]],
                   results: dict[tuple[str, int], dict], required: dict[tuple[str, int], int]) -> bool:
    """acks=-1 before a DelayedProduce is made: does the ISR have each ``required`` offset already
    (``check``, as the DelayedProduce would ask it; the ISR is this broker alone)? Then each of
    ``results`` carries its partition's code, and nothing is parked."""
    codes = []
    for tp, offset in required.items():
        reached, code = check(tp, offset)
        if not reached:
            return False
        codes.append((tp, code))
    for tp, code in codes:
        results[tp]["error_code"] = int(code)
    return True


class DelayedDeleteRecords(DelayedOperation):
    """DeleteRecords: done when every partition's low watermark (the lowest log start offset of
    its live replicas) reached the offset asked for; ``low_watermark(tp)`` gives it and the
    partition's error (NOT_LEADER_OR_FOLLOWER once this broker no longer leads it)."""

    def __init__(self, timeout_ms: int, statuses: dict[tuple[str, int], ProducePartitionStatus],
                 low_watermark: Callable[[tuple[str, int]], tuple[int, ErrorCode]],
                 respond: Callable[[dict[tuple[str, int], dict]], None]):
        super().__init__(timeout_ms)
        self.statuses = statuses
        self._low_watermark = low_watermark
        self._respond = respond

    def can_complete(self) -> bool:
        for tp, st in self.statuses.items():
            if st.pending:
                low, code = self._low_watermark(tp)
                if code != ErrorCode.NONE or low >= st.required_offset:
                    st.pending = False
                    st.response.update(error_code=int(code), low_watermark=low if code == ErrorCode.NONE else -1)
        return not any(st.pending for st in self.statuses.values())

    def on_complete(self) -> None:
        for st in self.statuses.values():
            if st.pending:
                st.pending = False
                st.response.update(error_code=int(ErrorCode.REQUEST_TIMED_OUT), low_watermark=-1)
        self._respond({tp: st.response for tp, st in self.statuses.items()})


# ----------------------------------------------------------------------- fetch

@dataclass
class FetchPartition:
    """One partition of a fetch request."""
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    last_fetched_epoch: int = -1   # Fetch v12 (KIP-595); -1 = not sent
    tp: tuple[str, int] = field(init=False, repr=False, compare=False)   # (topic, partition), made once

    def __post_init__(self) -> None:
        self.tp = (self.topic, self.partition)


@dataclass
class FetchParams:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    partitions: list[FetchPartition] = field(default_factory=list)

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


class DelayedFetch(DelayedOperation):
    """A long poll: done when min_bytes are readable, a partition changed state, or max_wait passed.

    ``fetchable(params, partition, needed)`` returns the bytes now readable for a
    partition (capped near ``needed``: a lower bound), or None when the fetch must answer
    at once (leadership lost, offset no longer valid). ``read(params)`` builds the results.
    The full check records each partition's figure; a key's check refreshes that key's
    partitions only (every change of a partition fires its key), and the fetch completes
    when the recorded figures add up to min_bytes. (A partition held back by the leader's
    replication quota counts 0 until its key fires again or the fetch times out; Kafka's
    tryComplete would also notice the quota lifting on another partition's event.)

    ``empty_results``: the results of a read, in this reactor turn, that found nothing to send
    and no error. Each partition then counts 0 with no check, and if no key fires before the
    timeout, those results are the answer: nothing they report has changed, so the partitions
    are not read again (Kafka reads them all again on expiry). An idle follower's fetch thus
    reads its partitions once per round, not three times. The one thing that can move without a
    key firing is a log start offset raised by retention; a fetch answered from such results
    reports it one round later, as if retention had run a moment later.
    """

    def __init__(self, params: FetchParams,
                 fetchable: Callable[[FetchParams, FetchPartition, int], int | None],
                 read: Callable[[FetchParams], Any], respond: Callable[[Any], None],
                 empty_results: Any = None):
        super().__init__(params.max_wait_ms)
        self.params = params
        self._fetchable = fetchable
        self._read = read
        self._respond = respond
        self._empty_results = empty_results
        # per partition, from the last full check
        self._readable: list[int] | None = None if empty_results is None else [0] * len(params.partitions)
        self._total = 0
        self._index: dict[Hashable, list[int]] | None = None   # built at the first key's check

    def can_complete(self) -> bool:
        need = self.params.min_bytes
        got = 0
        readable = [0] * len(self.params.partitions)
        self._readable = None
        for i, fp in enumerate(self.params.partitions):
            n = self._fetchable(self.params, fp, need - got)
            if n is None:
                return True
            readable[i] = n
            got += n
            if got >= need:
                return True
        self._readable, self._total = readable, got
        return False

    def can_complete_on(self, key: Hashable) -> bool:
        self._empty_results = None   # something changed: the answer is read afresh
        if self._index is None:   # most parked fetches never see one (they time out idle)
            self._index = {}
            for i, fp in enumerate(self.params.partitions):
                self._index.setdefault(fp.tp, []).append(i)
        readable, indexes = self._readable, self._index.get(key)
        if readable is None or indexes is None:
            return self.can_complete()
        need = self.params.min_bytes
        for i in indexes:
            others = self._total - readable[i]
            n = self._fetchable(self.params, self.params.partitions[i], need - others)
            if n is None:
                return True
            readable[i] = n
            self._total = others + n
        return self._total >= need

    def on_complete(self) -> None:
        if self.expired and self._empty_results is not None:
            self._respond(self._empty_results)
        else:
            self._respond(self._read(self.params))
