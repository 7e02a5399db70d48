"""Idempotent-producer bookkeeping, header-level only, in memory.

Invariant: for each producer id a partition leader remembers its epoch and the
last 5 appended batches (first/last sequence and offsets), read from the batch
header alone (never the records). A batch equal to a remembered one is a
duplicate and is answered with its original offsets; a sequence gap on a known
producer is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH.
An unknown producer id (e.g. after a broker restart: state is not persisted) is
accepted at any sequence. ``ProducerIdManager`` hands out ids from blocks of 1000
reserved in ZooKeeper.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import BatchHeader

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1


def _next_sequence(last_seq: int) -> int:
    return 0 if last_seq == INT32_MAX else last_seq + 1


def last_sequence(header: BatchHeader) -> int:
    """The batch's last sequence, wrapping at Int32.MaxValue like DefaultRecordBatch."""
    seq = header.base_sequence + header.last_offset_delta
    return seq - INT32_MAX - 1 if seq > INT32_MAX else seq


@dataclass
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    log_append_time: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))


class ProducerStateManager:
    """Per-partition producer state (leader side)."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def clear(self) -> None:
        self.producers.clear()

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate an incoming batch: the original batch if it is a duplicate, else None.

        Raises KafkaError for a fenced epoch or an out-of-order sequence.
        """
        if header.producer_id < 0 or header.is_control:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None
        first_seq, last_seq = header.base_sequence, last_sequence(header)
        if header.producer_epoch < entry.epoch:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                             f"epoch {header.producer_epoch} is older than {entry.epoch}")
        if header.producer_epoch > entry.epoch:
            if first_seq != 0:
                raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"new epoch {header.producer_epoch} must start at sequence 0, got {first_seq}")
            return None
        for b in entry.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        if entry.batches:
            expected = _next_sequence(entry.batches[-1].last_seq)
            if first_seq != expected:
                raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"expected sequence {expected}, got {first_seq}")
        return None

    def update(self, header: BatchHeader, first_offset: int, last_offset: int,
               log_append_time: int) -> None:
        """Record an appended batch."""
        if header.producer_id < 0 or header.is_control:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_epoch)
        entry.batches.append(BatchMetadata(header.base_sequence, last_sequence(header),
                                           first_offset, last_offset, log_append_time))


class ProducerIdManager:
    """Non-transactional producer ids, from ZooKeeper blocks (``allocate_block`` runs off-reactor)."""

    def __init__(self, allocate_block: Callable[[], Awaitable[tuple[int, int]]]):
        from twisted.internet.defer import DeferredLock

        self._allocate_block = allocate_block
        self._lock = DeferredLock()
        self._next = 0
        self._end = -1  # inclusive

    async def generate(self) -> int:
        await self._lock.acquire()
        try:
            if self._next > self._end:
                self._next, self._end = await self._allocate_block()
            pid = self._next
            self._next += 1
            return pid
        finally:
            self._lock.release()
