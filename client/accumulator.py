"""The producer's RecordAccumulator: per-partition queues of open record batches.

Invariant: for every partition only the *last* batch of its deque is open for
appends; draining pops batches from the front under the same lock, so a batch
handed to the sender never changes again (its bytes are built once and reused
for retries). Every record's future shares its batch's ``ProduceResult``: one
Event per batch, no per-record synchronisation. ``buffer.memory`` bounds the
bytes of batches not yet completed; ``append`` blocks (up to max.block.ms) when
it is exhausted.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable, Iterable, Sequence

from odradek.protocol import record_batch
from odradek.protocol.errors import KafkaError
from odradek.protocol.records import BatchBuilder

from .structs import KafkaTimeoutError, RecordMetadata, TopicPartition

RECORD_OVERHEAD = 21  # DefaultRecord.MAX_RECORD_OVERHEAD


class ProduceResult:
    """The outcome of one batch, shared by the futures of its records."""

    __slots__ = ("topic", "partition", "event", "base_offset", "log_append_time", "error",
                 "_lock", "_waiting")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self.event = threading.Event()
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._waiting: "list[FutureRecordMetadata | _BatchCallback] | None" = None

    def complete(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        with self._lock:
            if self.event.is_set():
                return
            self.base_offset, self.log_append_time, self.error = base_offset, log_append_time, error
            self.event.set()
            waiting, self._waiting = self._waiting, None
        for fut in waiting or ():
            fut._fire()

    def add_done_callback(self, fn: Callable[["ProduceResult"], Any]) -> None:
        """``fn(result)`` once the batch completes (on the sender thread, or now if done)."""
        with self._lock:
            if not self.event.is_set():
                if self._waiting is None:
                    self._waiting = []
                self._waiting.append(_BatchCallback(fn, self))
                return
        fn(self)

    def _register(self, fut: "FutureRecordMetadata") -> bool:
        """Queue ``fut`` for callbacks; False if already complete (caller fires itself)."""
        with self._lock:
            if self.event.is_set():
                return False
            if self._waiting is None:
                self._waiting = []
            self._waiting.append(fut)
            return True


class _BatchCallback:
    __slots__ = ("fn", "result")

    def __init__(self, fn: Callable[[ProduceResult], Any], result: ProduceResult) -> None:
        self.fn, self.result = fn, result

    def _fire(self) -> None:
        try:
            self.fn(self.result)
        except Exception:
            import logging
            logging.getLogger(__name__).exception("producer batch callback raised")


class FutureRecordMetadata:
    """The future ``Producer.send`` returns: ``.get(timeout)`` -> RecordMetadata."""

    __slots__ = ("_result", "_delta", "_timestamp", "_ksize", "_vsize", "_callbacks", "_errbacks")

    def __init__(self, result: ProduceResult, delta: int, timestamp: int, ksize: int, vsize: int) -> None:
        self._result = result
        self._delta = delta
        self._timestamp = timestamp
        self._ksize = ksize
        self._vsize = vsize
        self._callbacks: list | None = None
        self._errbacks: list | None = None

    @property
    def batch(self) -> ProduceResult:
        """The batch-level result this record shares (``add_done_callback`` for cheap bulk tracking)."""
        return self._result

    def is_done(self) -> bool:
        return self._result.event.is_set()

    done = is_done

    def succeeded(self) -> bool:
        return self.is_done() and self._result.error is None

    def failed(self) -> bool:
        return self.is_done() and self._result.error is not None

    @property
    def exception(self) -> BaseException | None:
        return self._result.error if self.is_done() else None

    @property
    def value(self) -> RecordMetadata | None:
        return self._metadata() if self.succeeded() else None

    def _metadata(self) -> RecordMetadata:
        r = self._result
        offset = r.base_offset + self._delta if r.base_offset >= 0 else -1
        ts = r.log_append_time if r.log_append_time >= 0 else self._timestamp
        return RecordMetadata(r.topic, r.partition, offset, ts, self._ksize, self._vsize)

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Block until the batch completes; raise its error, or KafkaTimeoutError after ``timeout`` s."""
        if not self._result.event.wait(timeout):
            raise KafkaTimeoutError(f"record not acknowledged within {timeout} s")
        if self._result.error is not None:
            raise self._result.error
        return self._metadata()

    def add_callback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> "FutureRecordMetadata":
        """``fn(*args, record_metadata, **kwargs)`` on success."""
        if self._callbacks is None:
            self._callbacks = []
        self._callbacks.append((fn, args, kwargs))
        if not self._result._register(self):
            self._fire()
        return self

    def add_errback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> "FutureRecordMetadata":
        """``fn(*args, exception, **kwargs)`` on failure."""
        if self._errbacks is None:
            self._errbacks = []
        self._errbacks.append((fn, args, kwargs))
        if not self._result._register(self):
            self._fire()
        return self

    def _fire(self) -> None:
        err = self._result.error
        arg: Any
        if err is None:
            todo, arg = self._callbacks, None
            self._callbacks = None
            if todo:
                arg = self._metadata()
        else:
            todo, arg = self._errbacks, err
            self._errbacks = None
        for fn, args, kwargs in todo or ():
            try:
                fn(*args, arg, **kwargs)
            except Exception:  # a user callback must not kill the sender thread
                import logging
                logging.getLogger(__name__).exception("producer callback raised")


class ProducerBatch:
    """One batch for one partition, from first append to completion."""

    __slots__ = ("tp", "builder", "records", "room", "result", "created", "attempts", "retry_at", "built",
                 "reserved", "size_limit", "closed")

    def __init__(self, tp: TopicPartition, compression: int, size_limit: int, reserved: int) -> None:
        self.tp = tp
        self.builder = BatchBuilder(compression)
        self.records = self.builder.records                    # read by has_room's inline copy in append
        self.room = size_limit - record_batch.HEADER_SIZE      # bytes of records that fit
        self.result = ProduceResult(tp.topic, tp.partition)
        self.created = time.monotonic()
        self.attempts = 0
        self.retry_at = 0.0
        self.built: bytes | None = None
        self.reserved = reserved
        self.size_limit = size_limit
        self.closed = False  # drained once: no more appends

    @property
    def record_count(self) -> int:
        return self.builder.record_count

    def has_room(self, size: int) -> bool:
        if self.closed:
            return False
        return len(self.records) + size <= self.room or not self.records

    def is_full(self) -> bool:
        return self.builder.estimated_size() + RECORD_OVERHEAD >= self.size_limit

    def build(self) -> bytes:
        if self.built is None:
            self.built = self.builder.build()
        return self.built


class RecordAccumulator:
    """Per-partition batch queues shared by ``Producer.send`` (appends) and the sender (drains)."""

    def __init__(self, *, batch_size: int, compression: int, linger_ms: int, buffer_memory: int,
                 max_block_ms: int, retry_backoff_ms: int, guarantee_order: bool = False) -> None:
        self.batch_size = max(batch_size, 1)
        self.compression = compression
        self.linger = linger_ms / 1000.0
        self.buffer_memory = buffer_memory
        self.max_block = max_block_ms / 1000.0
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.guarantee_order = guarantee_order
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._batches: dict[TopicPartition, collections.deque[ProducerBatch]] = {}
        self._incomplete: set[ProduceResult] = set()
        self._used = 0
        self._waiters = 0
        self.muted: set[TopicPartition] = set()
        self.flushing = 0
        self.closing = False
        self.appends = 0  # bumped on every append: lets the sender notice new work
        self._drain_index = 0

    # -- producer side ------------------------------------------------------------

    def append(self, tp: TopicPartition, timestamp: int, key: bytes | None, value: bytes | None,
               headers: Sequence[tuple[str, bytes | None]], size: int, abort_on_new_batch: bool = False
               ) -> tuple[FutureRecordMetadata | None, bool]:
        """Append a record: (future, created a new batch); (None, True) if aborted for a new batch."""
        ksize = -1 if key is None else len(key)
        vsize = -1 if value is None else len(value)
        with self._lock:
            if self.closing:
                raise KafkaError(-1, "producer is closed")
            dq = self._batches.get(tp)
            if dq is None:
                dq = self._batches[tp] = collections.deque()
            elif dq:
                last = dq[-1]
                if not last.closed and (len(last.records) + size <= last.room or not last.records):   # has_room
                    delta = last.builder.append(timestamp, key, value, headers)
                    self.appends += 1
                    return FutureRecordMetadata(last.result, delta, timestamp, ksize, vsize), False
            if abort_on_new_batch:
                return None, True
            reserve = max(self.batch_size, size + 61)
            deadline = None
            while self._used + reserve > self.buffer_memory and self._used > 0:
                if deadline is None:
                    deadline = time.monotonic() + self.max_block
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaTimeoutError(f"failed to allocate memory within max.block.ms "
                                            f"({self.max_block * 1000:.0f} ms)")
                self._waiters += 1
                try:
                    self._room.wait(remaining)
                finally:
                    self._waiters -= 1
                if dq and dq[-1].has_room(size):  # somebody else opened a batch meanwhile
                    last = dq[-1]
                    delta = last.builder.append(timestamp, key, value, headers)
                    self.appends += 1
                    return FutureRecordMetadata(last.result, delta, timestamp, ksize, vsize), False
            batch = ProducerBatch(tp, self.compression, max(self.batch_size, size + 61), reserve)
            self._used += reserve
            self._incomplete.add(batch.result)
            delta = batch.builder.append(timestamp, key, value, headers)
            dq.append(batch)
            self.appends += 1
            return FutureRecordMetadata(batch.result, delta, timestamp, ksize, vsize), True

    def queued_batches(self, tp: TopicPartition) -> int:
        """Batches of ``tp`` not yet taken by the sender (the last one still open to appends)."""
        dq = self._batches.get(tp)
        return len(dq) if dq else 0

    def incomplete(self) -> list[ProduceResult]:
        with self._lock:
            return list(self._incomplete)

    def has_incomplete(self) -> bool:
        return bool(self._incomplete)

    # -- sender side ---------------------------------------------------------------

    def ready(self, now: float, leader_for: Callable[[str, int], int],
              blocked: Callable[[TopicPartition], bool] | None = None) -> tuple[set[int], float, set[str]]:
        """(nodes with a sendable batch, seconds until the next batch may be ready, topics lacking a leader).

        ``blocked(tp)`` true hides a partition (a transaction that has not added it yet)."""
        nodes: set[int] = set()
        unknown: set[str] = set()
        next_delay = 1.0
        force = self.flushing > 0 or self.closing or self._waiters > 0
        linger = self.linger
        with self._lock:
            for tp, dq in self._batches.items():
                if not dq or tp in self.muted or blocked is not None and blocked(tp):
                    continue
                batch = dq[0]
                leader = leader_for(tp.topic, tp.partition)
                if leader < 0:
                    unknown.add(tp.topic)
                    continue
                if batch.attempts and batch.retry_at > now:
                    next_delay = min(next_delay, batch.retry_at - now)
                    continue
                if force or len(dq) > 1 or batch.is_full():
                    nodes.add(leader)
                    continue
                waited = now - batch.created
                if waited >= linger:
                    nodes.add(leader)
                else:
                    next_delay = min(next_delay, linger - waited)
        return nodes, max(next_delay, 0.0), unknown

    def drain(self, nodes: Iterable[int], leader_for: Callable[[str, int], int], max_request_size: int,
              now: float, hold: Callable[[ProducerBatch], bool] | None = None,
              blocked: Callable[[TopicPartition], bool] | None = None) -> dict[int, list[ProducerBatch]]:
        """Pop at most one batch per partition for each node, up to ``max_request_size`` bytes per node.

        ``hold(batch)`` true keeps a partition's first batch queued (the idempotent producer
        resends a retried batch only once every earlier sequence is resolved); ``blocked(tp)``
        true keeps the whole partition queued (not yet added to the transaction)."""
        out: dict[int, list[ProducerBatch]] = {}
        nodes = set(nodes)
        if not nodes:
            return out
        with self._lock:
            tps = list(self._batches)
            if not tps:
                return out
            start = self._drain_index % len(tps)
            self._drain_index += 1
            sizes: dict[int, int] = {}
            for tp in tps[start:] + tps[:start]:
                dq = self._batches[tp]
                if not dq or tp in self.muted or blocked is not None and blocked(tp):
                    continue
                leader = leader_for(tp.topic, tp.partition)
                if leader not in nodes:
                    continue
                batch = dq[0]
                if batch.attempts and batch.retry_at > now:
                    continue
                if hold is not None and hold(batch):
                    continue
                size = batch.builder.estimated_size()
                used = sizes.get(leader, 0)
                if used and used + size > max_request_size:
                    continue
                dq.popleft()
                batch.closed = True
                sizes[leader] = used + size
                out.setdefault(leader, []).append(batch)
                if self.guarantee_order:
                    self.muted.add(tp)
        return out

    def reenqueue(self, batch: ProducerBatch, now: float) -> None:
        """Put a batch that failed retriably back at the front of its queue (batches that carry
        an idempotent sequence are kept in sequence order, ahead of unsequenced ones)."""
        batch.attempts += 1
        batch.retry_at = now + self.retry_backoff
        seq = batch.builder.base_sequence
        with self._lock:
            dq = self._batches.setdefault(batch.tp, collections.deque())
            if batch.built is None or seq < 0:
                dq.appendleft(batch)
                return
            i = 0
            for other in dq:
                if other.built is None or other.builder.base_sequence < 0 or other.builder.base_sequence > seq:
                    break
                i += 1
            dq.insert(i, batch)

    def complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int,
                 error: BaseException | None) -> None:
        """Finish a batch (success or final failure) and release its memory."""
        with self._lock:
            self._incomplete.discard(batch.result)
            self._used -= batch.reserved
            self.muted.discard(batch.tp)
            if self._waiters:
                self._room.notify_all()
        batch.result.complete(base_offset, log_append_time, error)

    def unmute(self, tp: TopicPartition) -> None:
        with self._lock:
            self.muted.discard(tp)

    def expired(self, now: float, delivery_timeout: float) -> list[ProducerBatch]:
        """Remove and return queued batches older than delivery.timeout.ms."""
        out: list[ProducerBatch] = []
        with self._lock:
            for dq in self._batches.values():
                while dq and now - dq[0].created > delivery_timeout:
                    out.append(dq.popleft())
        return out

    def abort_all(self, error: BaseException) -> None:
        """Fail every queued batch (forced close)."""
        with self._lock:
            batches = [b for dq in self._batches.values() for b in dq]
            for dq in self._batches.values():
                dq.clear()
        for b in batches:
            self.complete(b, -1, -1, error)

    def abort_undrained(self, error: BaseException) -> int:
        """Fail every queued batch that was never sent (a transaction is aborting); returns how many.

        Batches queued for a retry keep their sequence and stay: they must still be resolved."""
        with self._lock:
            batches: list[ProducerBatch] = []
            for dq in self._batches.values():
                if any(b.built is None for b in dq):
                    keep = [b for b in dq if b.built is not None]
                    batches.extend(b for b in dq if b.built is None)
                    dq.clear()
                    dq.extend(keep)
        for b in batches:
            b.closed = True
            self.complete(b, -1, -1, error)
        return len(batches)

    def has_queued(self) -> bool:
        with self._lock:
            return any(self._batches.values())
