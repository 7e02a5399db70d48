"""Transaction states and the metadata of one transactional id (Kafka 2.8's TransactionMetadata).

Invariant: ``TRANSITIONS`` is the only table of legal state moves. A change is two-step:
``prepare_*`` checks the move against the table, records it as ``pending_state`` and
returns an immutable ``TxnTransit`` (what will be written to the log); only after that
record is durably appended does ``complete_transition`` apply it (and it re-checks the
transit against the current values). At most one transition is pending at a time; a
pending transition blocks others (clients get CONCURRENT_TRANSACTIONS).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from odradek.protocol.errors import ErrorCode
from odradek.protocol.txn_records import TxnValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
INT16_MAX = 2**15 - 1
TopicPartition = tuple[str, int]


class TxnState(Enum):
    """Kafka's TransactionState; the value is the status byte stored in the log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(w.capitalize() for w in self.name.split("_"))


S = TxnState

# from-state -> the states it may move to (Kafka's validPreviousStates, inverted)
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.ONGOING, S.DEAD}),
    S.ONGOING: frozenset({S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE}),
    S.PREPARE_COMMIT: frozenset({S.COMPLETE_COMMIT}),
    S.PREPARE_ABORT: frozenset({S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.EMPTY, S.ONGOING, S.DEAD}),
    S.COMPLETE_ABORT: frozenset({S.EMPTY, S.ONGOING, S.DEAD}),
    S.DEAD: frozenset(),
    S.PREPARE_EPOCH_FENCE: frozenset({S.PREPARE_ABORT}),
}

EXPIRABLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


class IllegalTxnTransition(RuntimeError):
    """A move the table forbids, or a transit that does not fit the metadata: a bug."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps Short.MaxValue free so the coordinator can always fence once more."""
    return epoch >= INT16_MAX - 1


@dataclass(frozen=True)
class TxnTransit:
    """The target of one prepared transition (Kafka's TxnTransitMetadata)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_timestamp: int
    last_update_timestamp: int

    def to_value(self) -> TxnValue:
        return TxnValue(producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                        timeout_ms=self.timeout_ms, status=self.state.value,
                        partitions=self.partitions,
                        last_update_timestamp_ms=self.last_update_timestamp,
                        start_timestamp_ms=self.start_timestamp)


@dataclass(eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60_000
    state: TxnState = S.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_timestamp: int = -1
    last_update_timestamp: int = -1
    pending_state: TxnState | None = None
    has_failed_epoch_fence: bool = False

    @classmethod
    def from_value(cls, transactional_id: str, value: TxnValue) -> "TransactionMetadata":
        """Metadata as loaded from the log (2.8 does not store the last id/epoch)."""
        state = TxnState(value.status)
        return cls(transactional_id, value.producer_id, NO_PRODUCER_ID, value.producer_epoch,
                   NO_PRODUCER_EPOCH, value.timeout_ms, state,
                   set() if state is S.EMPTY else set(value.partitions),
                   value.start_timestamp_ms, value.last_update_timestamp_ms)

    # --- queries -------------------------------------------------------------------
    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    # --- prepare (step 1) ----------------------------------------------------------
    def _prepare(self, state: TxnState, producer_id: int, epoch: int, last_epoch: int,
                 timeout_ms: int, partitions: frozenset[TopicPartition] | set[TopicPartition],
                 start_ts: int, update_ts: int) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTxnTransition(f"{self.transactional_id}: preparing {state.kafka_name} while "
                                       f"{self.pending_state.kafka_name} is pending")
        if producer_id < 0:
            raise IllegalTxnTransition(f"illegal producer id {producer_id}")
        if state is not S.DEAD and epoch < 0:
            raise IllegalTxnTransition(f"illegal producer epoch {epoch}")
        if state not in TRANSITIONS[self.state]:
            raise IllegalTxnTransition(f"{self.transactional_id}: {self.state.kafka_name} -> "
                                       f"{state.kafka_name} is not a legal transition")
        self.pending_state = state
        return TxnTransit(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state,
                          frozenset(partitions), start_ts, update_ts)

    def prepare_fence_epoch(self) -> TxnTransit:
        """Bump the epoch to fence the current producer (not bumped again after a failed fence)."""
        if self.producer_epoch >= INT16_MAX:
            raise IllegalTxnTransition("cannot fence a producer at epoch Short.MaxValue")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, self.producer_id, epoch, NO_PRODUCER_EPOCH,
                             self.timeout_ms, self.partitions, self.start_timestamp,
                             self.last_update_timestamp)

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                now: int) -> TxnTransit | ErrorCode:
        """InitProducerId on a completed/empty txn: the next epoch (KIP-360 retries keep it)."""
        if self.epoch_exhausted:
            raise IllegalTxnTransition(f"no more epochs for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch   # a retry of a bump
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._prepare(S.EMPTY, self.producer_id, epoch, last, timeout_ms, frozenset(), -1, now)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now: int,
                                     record_last_epoch: bool) -> TxnTransit:
        if self.has_pending_transaction:
            raise IllegalTxnTransition("cannot rotate the producer id while a transaction is pending")
        return self._prepare(S.EMPTY, new_producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             timeout_ms, frozenset(), -1, now)

    def prepare_add_partitions(self, added: set[TopicPartition], now: int) -> TxnTransit:
        start = now if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) else self.start_timestamp
        return self._prepare(S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, self.partitions | added, start, now)

    def prepare_abort_or_commit(self, state: TxnState, now: int) -> TxnTransit:
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, self.partitions, self.start_timestamp, now)

    def prepare_complete(self, now: int) -> TxnTransit:
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, frozenset(), self.start_timestamp, now)

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, frozenset(), self.start_timestamp,
                             self.last_update_timestamp)

    # --- complete (step 2) ---------------------------------------------------------
    def _same_producer(self, t: TxnTransit) -> bool:
        return t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id

    def complete_transition(self, t: TxnTransit) -> None:
        """Apply ``t`` after its record was appended; raises IllegalTxnTransition on a mismatch."""
        if self.pending_state is None or self.pending_state is not t.state:
            raise IllegalTxnTransition(f"{self.transactional_id}: completing {t.state.kafka_name} but "
                                       f"pending is {self.pending_state}")
        if t.state is S.EMPTY:
            bump_ok = (t.producer_epoch == self.producer_epoch + 1
                       or (t.producer_epoch == 0 and t.producer_id != self.producer_id))
            if ((t.producer_epoch != self.producer_epoch and not bump_ok) or t.partitions
                    or t.start_timestamp != -1):
                self._mismatch(t)
            self.timeout_ms = t.timeout_ms
            self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
            self.producer_id, self.last_producer_id = t.producer_id, t.last_producer_id
        elif t.state is S.ONGOING:
            if (not self._same_producer(t) or not self.partitions <= t.partitions
                    or self.timeout_ms != t.timeout_ms):
                self._mismatch(t)
            self.start_timestamp = t.start_timestamp
            self.partitions |= t.partitions
        elif t.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            if (not self._same_producer(t) or set(t.partitions) != self.partitions
                    or self.timeout_ms != t.timeout_ms or self.start_timestamp != t.start_timestamp):
                self._mismatch(t)
        elif t.state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            if not self._same_producer(t) or self.timeout_ms != t.timeout_ms or t.start_timestamp == -1:
                self._mismatch(t)
            self.start_timestamp = t.start_timestamp
            self.partitions.clear()
        else:   # PrepareEpochFence is never written; Dead only leaves the cache
            self._mismatch(t)
        self.last_update_timestamp = t.last_update_timestamp
        self.pending_state = None
        self.state = t.state

    def _mismatch(self, t: TxnTransit) -> None:
        raise IllegalTxnTransition(f"{self.transactional_id}: transit {t} does not fit {self}")

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker was written to ``tp`` (or its topic is gone)."""
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTxnTransition(f"removing {tp} from {self.transactional_id} in state "
                                       f"{self.state.kafka_name}")
        self.partitions.discard(tp)
