"""The transaction metadata cache of the ``__transaction_state`` partitions this broker leads
(Kafka 2.8's TransactionStateManager): lookup, loading, appends, timed-out and expired ids.

Invariant: a transactional id is served only while its partition (``partition_for(id)``)
is owned: a loading partition answers COORDINATOR_LOAD_IN_PROGRESS, an unknown one
NOT_COORDINATOR. Each owned partition carries its coordinator epoch (the partition's
leader epoch); a transition is applied to the cache only after its record was appended
AND the partition is still owned at the same coordinator epoch. A failed append clears
the pending state (unless the caller retries), so the id is never left blocked.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from odradek.broker.completion import Completion
from odradek.broker.group.offsets import partition_for
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import batch_of, iter_batches
from odradek.protocol.txn_records import TxnRecordError, decode_txn_record, encode_txn_record

from . import Timer, TxnConfig
from .metadata import EXPIRABLE, TransactionMetadata, TxnState, TxnTransit

log = logging.getLogger(__name__)

E = ErrorCode
AppendFn = Callable[[int, bytes], Completion[ErrorCode]]

# Kafka's mapping of produce errors for transaction log writes (appendTransactionToLog)
_WRITE_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
}


def txn_write_error(code: int) -> ErrorCode:
    code = ErrorCode(code)
    return _WRITE_ERRORS.get(code, code)


@dataclass
class _Partition:
    coordinator_epoch: int
    loading: bool = True
    txns: dict[str, TransactionMetadata] = field(default_factory=dict)


class TransactionStateManager:
    """Metadata per ``__transaction_state`` partition; builds and replays records."""

    def __init__(self, config: TxnConfig, timer: Timer, append: AppendFn):
        self.config = config
        self.timer = timer
        self._append_fn = append
        self._partitions: dict[int, _Partition] = {}

    # --- ownership -----------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    @property
    def owned_partitions(self) -> set[int]:
        return {p for p, e in self._partitions.items() if not e.loading}

    @property
    def loading_partitions(self) -> set[int]:
        return {p for p, e in self._partitions.items() if e.loading}

    def coordinator_epoch(self, partition: int) -> int | None:
        entry = self._partitions.get(partition)
        return None if entry is None else entry.coordinator_epoch

    def get(self, transactional_id: str
            ) -> tuple[ErrorCode, int, TransactionMetadata | None]:
        """(error, coordinator epoch, metadata or None if unknown); error NONE if served here."""
        entry = self._partitions.get(self.partition_for(transactional_id))
        if entry is None:
            return E.NOT_COORDINATOR, -1, None
        if entry.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, -1, None
        return E.NONE, entry.coordinator_epoch, entry.txns.get(transactional_id)

    def put_if_absent(self, metadata: TransactionMetadata
                      ) -> tuple[ErrorCode, int, TransactionMetadata | None]:
        error, epoch, existing = self.get(metadata.transactional_id)
        if error != E.NONE or existing is not None:
            return error, epoch, existing
        self._partitions[self.partition_for(metadata.transactional_id)].txns[
            metadata.transactional_id] = metadata
        return E.NONE, epoch, metadata

    def all_owned(self) -> Iterator[tuple[int, int, TransactionMetadata]]:
        """(partition, coordinator epoch, metadata) of every id this broker serves."""
        for p, entry in list(self._partitions.items()):
            if not entry.loading:
                for md in list(entry.txns.values()):
                    yield p, entry.coordinator_epoch, md

    # --- appends -------------------------------------------------------------------
    def _batch(self, records: Iterable[tuple[bytes, bytes | None]]) -> bytes:
        return batch_of(self.timer.now_ms(), records)   # the transaction log is never compressed

    def _write(self, partition: int, batch: bytes) -> Completion[ErrorCode]:
        try:
            return self._append_fn(partition, batch)
        except Exception as exc:  # noqa: BLE001 - a failing append is an error code, not a crash
            code = getattr(exc, "code", E.UNKNOWN_SERVER_ERROR)
            log.warning("appending to %s failed: %s", partition, exc)
            return Completion.completed(ErrorCode(code))

    def append_transit(self, transactional_id: str, coordinator_epoch: int, transit: TxnTransit,
                       retry_on_error: Callable[[ErrorCode], bool] = lambda e: False
                       ) -> Completion[ErrorCode]:
        """Write ``transit`` for the id; completes with the coordinator error once the
        record is durable (acks=-1) and the cache updated, or with why it was not."""
        done: Completion[ErrorCode] = Completion()
        error, epoch, md = self.get(transactional_id)
        if error != E.NONE:
            return Completion.completed(error)
        if md is None or epoch != coordinator_epoch:
            return Completion.completed(E.NOT_COORDINATOR)
        record = encode_txn_record(transactional_id, transit.to_value())

        def appended(raw: ErrorCode) -> None:
            code = txn_write_error(raw)
            err, now_epoch, current = self.get(transactional_id)
            if code == E.NONE:
                if err != E.NONE:
                    code = err
                elif current is None or now_epoch != coordinator_epoch:
                    code = E.NOT_COORDINATOR
                else:
                    current.complete_transition(transit)
            elif err == E.NONE and current is not None and now_epoch == coordinator_epoch:
                if not retry_on_error(code):
                    current.pending_state = None
            if code != E.NONE:
                log.info("writing %s of %s to the transaction log failed: %s",
                         transit.state.kafka_name, transactional_id, code.name)
            done.complete(code)

        self._write(self.partition_for(transactional_id), self._batch([record])).add_callback(appended)
        return done

    # --- loading -------------------------------------------------------------------
    def begin_load(self, partition: int, coordinator_epoch: int) -> bool:
        """Start loading (dropping anything cached); False if ``coordinator_epoch`` is stale."""
        current = self._partitions.get(partition)
        if current is not None and coordinator_epoch < current.coordinator_epoch:
            return False
        self._partitions[partition] = _Partition(coordinator_epoch)
        return True

    def is_loading(self, partition: int, coordinator_epoch: int | None = None) -> bool:
        entry = self._partitions.get(partition)
        return (entry is not None and entry.loading
                and (coordinator_epoch is None or entry.coordinator_epoch == coordinator_epoch))

    def load_records(self, partition: int,
                     records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        """Replay (key, value) pairs in log order; the last record of an id wins."""
        entry = self._partitions.get(partition)
        if entry is None or not entry.loading:
            return
        for key, value in records:
            if key is None:
                continue
            try:
                txn_id, v = decode_txn_record(key, value)
            except TxnRecordError as exc:
                log.warning("skipping __transaction_state-%d record: %s", partition, exc)
                continue
            if v is None:
                entry.txns.pop(txn_id, None)
            else:
                entry.txns[txn_id] = TransactionMetadata.from_value(txn_id, v)

    def load_batches(self, partition: int, blob: bytes) -> None:
        self.load_records(partition, _pairs(blob))

    def finish_load(self, partition: int) -> list[TransactionMetadata]:
        """Own the loaded partition; returns its PrepareCommit/PrepareAbort transactions."""
        entry = self._partitions.get(partition)
        if entry is None or not entry.loading:
            return []
        entry.loading = False
        return [md for md in entry.txns.values()
                if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)]

    def remove_partition(self, partition: int, coordinator_epoch: int | None = None) -> bool:
        """Forget a partition we no longer lead; False (kept) if ``coordinator_epoch`` is stale."""
        current = self._partitions.get(partition)
        if current is None:
            return True
        if coordinator_epoch is not None and coordinator_epoch < current.coordinator_epoch:
            return False
        del self._partitions[partition]
        return True

    def clear(self) -> None:
        self._partitions.clear()

    # --- timeouts and expiry -------------------------------------------------------
    def timed_out(self, now: int) -> list[tuple[str, int, int]]:
        """(id, producer id, epoch) of Ongoing transactions open longer than their timeout."""
        return [(md.transactional_id, md.producer_id, md.producer_epoch)
                for _, _, md in self.all_owned()
                if not md.pending and md.state is TxnState.ONGOING
                and md.start_timestamp + md.timeout_ms < now]

    def expire_transactional_ids(self, now: int) -> dict[int, Completion[ErrorCode]]:
        """Tombstone ids idle longer than transactional.id.expiration.ms; they leave the
        cache once the tombstones are durable. Returns the appends per partition."""
        by_partition: dict[int, list[tuple[TransactionMetadata, TxnTransit, int]]] = {}
        for partition, epoch, md in self.all_owned():
            if (md.state in EXPIRABLE and not md.pending
                    and md.last_update_timestamp <= now - self.config.transactional_id_expiration_ms):
                by_partition.setdefault(partition, []).append((md, md.prepare_dead(), epoch))
        out: dict[int, Completion[ErrorCode]] = {}
        for partition, expiring in by_partition.items():
            batch = self._batch([encode_txn_record(md.transactional_id, None) for md, _, _ in expiring])

            def appended(raw: ErrorCode, expiring: list[tuple[TransactionMetadata, TxnTransit, int]] = expiring,
                         partition: int = partition) -> None:
                entry = self._partitions.get(partition)
                for md, transit, epoch in expiring:
                    current = entry.txns.get(md.transactional_id) if entry is not None else None
                    if current is not md:
                        continue
                    if (raw == E.NONE and entry is not None and entry.coordinator_epoch == epoch
                            and md.pending_state is TxnState.DEAD
                            and md.producer_epoch == transit.producer_epoch):
                        del entry.txns[md.transactional_id]
                        log.info("expired transactional id %s", md.transactional_id)
                    else:
                        md.pending_state = None
            out[partition] = self._write(partition, batch)
            out[partition].add_callback(appended)
        return out


def _pairs(blob: bytes) -> Iterator[tuple[bytes | None, bytes | None]]:
    for header, records in iter_batches(blob):
        if header.is_control:
            continue
        for record in records:
            yield record.key, record.value
