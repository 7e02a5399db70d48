"""Idempotent and transactional producer state of one partition log, header-level only.

Invariants:
- the state is a pure function of the log: ``apply_batch`` is the only way it changes
  (besides truncation/expiry/snapshot load), and the leader, followers and recovery
  replay all call it with the same batch headers (plus, for a control batch, its
  marker type), so byte-identical logs give identical state;
- per producer id: its epoch, the last 5 data batches (sequences and offsets), the
  coordinator epoch of its last marker, the first offset of its ongoing transaction
  (-1 if none) and the timestamp of its last batch;
- ``first_unstable_offset`` is the smallest first offset of an ongoing transaction or
  of a completed one whose marker is not yet below the high watermark;
- a snapshot ``<offset 20 digits>.snapshot`` is Kafka's format (int16 version 1,
  uint32 CRC32C of everything after it, int32 count, fixed 46-byte entries) and holds
  the state of the log up to (excluding) ``offset``; it is written atomically.
A duplicate of a remembered batch is answered with its original offsets; a sequence
gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH. Sequence
rules are Kafka 2.8's ``checkSequence`` (``check_sequence``), for client appends only: a
new epoch starts at sequence 0, and so does an epoch with no remembered batch. ``check``
only reads the state, so an append that fails after it (e.g. ENOSPC) leaves nothing to undo.
``ProducerIdManager`` hands out ids from blocks of 1000 reserved in ZooKeeper.
"""
from __future__ import annotations

import logging
import os
import re
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Awaitable, Callable, NamedTuple

from crc32c import crc32c

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import BatchHeader

logger = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1
DEFAULT_EXPIRATION_MS = 604800000  # transactional.id.expiration.ms
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")
_SNAP_HEAD = struct.Struct(">hI")     # version, crc
_SNAP_COUNT = struct.Struct(">i")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")  # pid, epoch, last seq, last offset, offset delta, ts, coord epoch, txn first

ORIGIN_CLIENT, ORIGIN_COORDINATOR, ORIGIN_REPLICATION = "client", "coordinator", "replication"


class CorruptSnapshotError(Exception):
    """A producer snapshot that cannot be trusted (bad version, CRC or size)."""


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
    log_append_time: int = -1


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1


@dataclass
class TxnMetadata:
    producer_id: int
    first_offset: int
    last_offset: int = -1   # the marker's offset once completed


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker at ``last_offset``."""
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int   # the LSO right after the marker (what the txn index records)


def check_sequence(entry: ProducerEntry, header: BatchHeader) -> BatchMetadata | None:
    """Kafka 2.8's ``ProducerAppendInfo.checkSequence`` (plus ``findDuplicateBatch``) for a client's
    batch of an epoch not older than ``entry.epoch``: the remembered batch it duplicates, or None
    if it may be appended; OUT_OF_ORDER_SEQUENCE_NUMBER otherwise.

    - a new epoch starts at sequence 0 (any sequence if the entry has no epoch yet);
    - within the epoch the batch follows the last remembered one (sequence 0 when none is
      remembered, e.g. after a marker that bumped the epoch).
    The check reads the entry only: an append that fails afterwards leaves nothing to undo."""
    first_seq = header.base_sequence
    if header.producer_epoch != entry.epoch:
        if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
            raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                             f"new epoch {header.producer_epoch} of producer {header.producer_id} must start at "
                             f"sequence 0, got {first_seq} (current epoch {entry.epoch})")
        return None
    last_seq = last_sequence(header)
    for b in entry.batches:
        if b.first_seq == first_seq and b.last_seq == last_seq:
            return b
    expected = _next_sequence(entry.batches[-1].last_seq if entry.batches else NO_SEQUENCE)
    if first_seq != expected:
        raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                         f"producer {header.producer_id} epoch {entry.epoch}: expected sequence {expected}, "
                         f"got {first_seq}")
    return None


class ProducerStateManager:
    """Per-partition producer state; see the module invariants. ``dir`` holds its snapshots."""

    def __init__(self, dir: str | None = None, expiration_ms: int = DEFAULT_EXPIRATION_MS) -> None:
        self.dir = dir
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, TxnMetadata] = {}        # first offset -> txn
        self.unreplicated: dict[int, TxnMetadata] = {}   # completed, marker not yet below the HW
        self.map_end_offset = 0                          # the state covers offsets below this

    def clear(self, offset: int = 0) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()
        self.map_end_offset = offset

    # ---------------------------------------------------------------- validation (leader)
    def check(self, header: BatchHeader, origin: str = ORIGIN_CLIENT) -> BatchMetadata | None:
        """Validate an incoming data batch: the original batch if it is a duplicate, else None.

        Raises KafkaError for a fenced epoch, an out-of-order sequence, or a
        non-transactional batch in the middle of the producer's transaction.
        """
        if header.producer_id < 0 or header.is_control:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None
        if header.producer_epoch < entry.epoch:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                             f"epoch {header.producer_epoch} is older than {entry.epoch}")
        if entry.current_txn_first_offset >= 0 and not header.is_transactional \
                and header.producer_epoch == entry.epoch:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                             f"non-transactional batch from producer {header.producer_id} inside a transaction")
        if origin != ORIGIN_CLIENT:   # Kafka checks sequences of client appends only
            return None
        return check_sequence(entry, header)

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Kafka's marker checks: an older producer epoch is INVALID_PRODUCER_EPOCH, an older
        coordinator epoch TRANSACTION_COORDINATOR_FENCED."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                             f"marker epoch {producer_epoch} is older than {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                             f"coordinator epoch {coordinator_epoch} is older than {entry.coordinator_epoch}")

    # ---------------------------------------------------------------- the one update
    def apply_batch(self, header: BatchHeader, first_offset: int, last_offset: int,
                    log_append_time: int = -1, marker: tuple[bool, int] | None = None) -> CompletedTxn | None:
        """Record an appended batch (``marker`` = (commit, coordinator_epoch) for a control
        batch); returns the transaction a marker completed, if any."""
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)
        pid = header.producer_id
        if pid < 0:
            return None
        timestamp = header.max_timestamp
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(header.producer_epoch)
        elif header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        if header.is_control:
            if marker is None:
                return None   # a control batch that is not a transaction marker
            commit, coordinator_epoch = marker
            entry.coordinator_epoch = coordinator_epoch
            first = entry.current_txn_first_offset
            entry.current_txn_first_offset = -1
            if first < 0:
                return None
            txn = self.ongoing.pop(first, None) or TxnMetadata(pid, first)
            txn.last_offset = first_offset
            others = [t.first_offset for t in self.ongoing.values() if t.producer_id != pid]
            lso = min(others) if others else first_offset + 1
            self.unreplicated[first] = txn
            return CompletedTxn(pid, first, first_offset, not commit, lso)
        if header.base_sequence >= 0:
            entry.batches.append(BatchMetadata(header.base_sequence, last_sequence(header),
                                               first_offset, last_offset, log_append_time))
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing[first_offset] = TxnMetadata(pid, first_offset)
        return None

    # ---------------------------------------------------------------- LSO
    def first_unstable_offset(self) -> int | None:
        if not self.ongoing and not self.unreplicated:   # asked per partition of every fetch
            return None
        return min([*self.ongoing, *self.unreplicated])

    def on_high_watermark(self, hw: int) -> None:
        """Completed transactions whose marker is below ``hw`` are stable."""
        if not self.unreplicated:   # the common case, asked per partition of every fetch
            return
        for first, txn in list(self.unreplicated.items()):
            if txn.last_offset < hw:
                del self.unreplicated[first]

    def ongoing_first_offset(self, producer_id: int) -> int:
        entry = self.producers.get(producer_id)
        return entry.current_txn_first_offset if entry is not None else -1

    # ---------------------------------------------------------------- expiry
    def active_producers(self) -> list[dict]:
        """DescribeProducers' ProducerState of every producer (Kafka's Log.activeProducers)."""
        return [{"producer_id": pid, "producer_epoch": e.epoch,
                 "last_sequence": e.batches[-1].last_seq if e.batches else NO_SEQUENCE,
                 "last_timestamp": e.last_timestamp, "coordinator_epoch": e.coordinator_epoch,
                 "current_txn_start_offset": e.current_txn_first_offset}
                for pid, e in self.producers.items()]

    def is_expired(self, entry: ProducerEntry, now_ms: int) -> bool:
        return entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= self.expiration_ms

    def has_expired(self, now_ms: int) -> bool:
        """Whether ``remove_expired`` would forget a producer; safe on a thread (the values are
        listed in one C call: a few entries)."""
        return any(self.is_expired(e, now_ms) for e in list(self.producers.values()))

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers without an ongoing transaction idle for transactional.id.expiration.ms."""
        gone = [pid for pid, e in self.producers.items() if self.is_expired(e, now_ms)]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    # ---------------------------------------------------------------- snapshots
    def snapshot_offsets(self) -> list[int]:
        if self.dir is None or not os.path.isdir(self.dir):
            return []
        return sorted(int(m.group(1)) for m in map(_SNAPSHOT_FILE.match, os.listdir(self.dir)) if m)

    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir or ".", "%020d%s" % (offset, SNAPSHOT_SUFFIX))

    def take_snapshot(self, offset: int | None = None, sync: bool = True) -> str | None:
        """Write the state atomically as ``<offset>.snapshot`` (default: the map end offset);
        without ``sync`` the caller fsyncs it (a crash before leaves it corrupt: deleted at load)."""
        if self.dir is None:
            return None
        offset = self.map_end_offset if offset is None else offset
        path = self.snapshot_path(offset)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(encode_snapshot(self.producers))
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
        return path

    def load_snapshot(self, max_offset: int, now_ms: int) -> int | None:
        """Load the newest valid snapshot at or below ``max_offset`` (corrupt ones are deleted);
        returns its offset, or None (state cleared) if there is none."""
        for offset in reversed([o for o in self.snapshot_offsets() if o <= max_offset]):
            path = self.snapshot_path(offset)
            try:
                with open(path, "rb") as f:
                    producers = decode_snapshot(f.read())
            except (OSError, CorruptSnapshotError) as e:
                logger.warning("deleting corrupt producer snapshot %s: %s", path, e)
                _remove(path)
                continue
            self.clear(offset)
            for pid, entry in producers.items():
                if self.is_expired(entry, now_ms):
                    continue
                self.producers[pid] = entry
                if entry.current_txn_first_offset >= 0:
                    first = entry.current_txn_first_offset
                    self.ongoing[first] = TxnMetadata(pid, first)
            return offset
        self.clear(0)
        return None

    def delete_snapshots_above(self, offset: int) -> None:
        for o in self.snapshot_offsets():
            if o > offset:
                _remove(self.snapshot_path(o))

    def delete_snapshots_below(self, offset: int) -> None:
        for o in self.snapshot_offsets():
            if o < offset:
                _remove(self.snapshot_path(o))

    def delete_all_snapshots(self) -> None:
        for o in self.snapshot_offsets():
            _remove(self.snapshot_path(o))


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def encode_snapshot(producers: dict[int, ProducerEntry]) -> bytes:
    """Kafka's producer snapshot v1: the last batch of each producer (or none: seq -1)."""
    body = bytearray(_SNAP_COUNT.pack(len(producers)))
    for pid, e in producers.items():
        if e.batches:
            b = e.batches[-1]
            last_seq, last_offset, delta = b.last_seq, b.last_offset, b.last_offset - b.first_offset
        else:
            last_seq, last_offset, delta = -1, -1, 0
        body += _SNAP_ENTRY.pack(pid, e.epoch, last_seq, last_offset, delta, e.last_timestamp,
                                 e.coordinator_epoch, e.current_txn_first_offset)
    return _SNAP_HEAD.pack(SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> dict[int, ProducerEntry]:
    """Producers of a snapshot file; CorruptSnapshotError if it fails any check."""
    if len(data) < _SNAP_HEAD.size + _SNAP_COUNT.size:
        raise CorruptSnapshotError("snapshot shorter than its header")
    version, crc = _SNAP_HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot version {version}")
    body = memoryview(data)[_SNAP_HEAD.size:]
    if crc32c(body) != crc:
        raise CorruptSnapshotError("snapshot CRC32C mismatch")
    (count,) = _SNAP_COUNT.unpack_from(body, 0)
    if count < 0 or len(body) != _SNAP_COUNT.size + count * _SNAP_ENTRY.size:
        raise CorruptSnapshotError("snapshot size does not match its entry count")
    out: dict[int, ProducerEntry] = {}
    for pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first in _SNAP_ENTRY.iter_unpack(
            body[_SNAP_COUNT.size:]):
        entry = ProducerEntry(epoch, coordinator_epoch=coord, current_txn_first_offset=txn_first,
                              last_timestamp=ts)
        if last_offset >= 0 and last_seq >= 0:
            first_seq = last_seq - delta if last_seq >= delta else last_seq - delta + INT32_MAX + 1
            entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset))
        out[pid] = entry
    return out


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
