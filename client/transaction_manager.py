"""The transactional producer's state machine and its queue of coordinator requests (sans-IO).

Invariant: ``state`` only moves along ``TRANSITIONS`` (one table, Kafka's
TransactionManager rules) through ``_transition``; every user-facing operation
returns a ``TxnResult`` that completes exactly once. Requests to the
transaction coordinator (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn) and to the group coordinator (TxnOffsetCommit) wait in one priority
queue; the sender thread takes one at a time (``next_request``), does the I/O
and hands the answer back (``on_response`` / ``on_find_coordinator`` /
``on_network_error``). A partition receives no batch before the coordinator
acknowledged its AddPartitionsToTxn (``send_blocked``); EndTxn leaves only once
no batch is incomplete. Thread-safe: one lock guards everything here.

Errors: PRODUCER_FENCED / INVALID_PRODUCER_EPOCH are fatal (``ProducerFencedError``,
every later call raises it); other failures of a transaction are abortable
(commit raises, ``abort_transaction`` recovers), except those Kafka treats as
fatal (INVALID_TXN_STATE, authorization, unsupported versions).
"""
from __future__ import annotations

import enum
import heapq
import itertools
import logging
import threading
import time
from types import ModuleType
from typing import Any, Callable, Mapping

from odradek.protocol.errors import ErrorCode, KafkaError

from .structs import (
    CommitFailedError,
    ConsumerGroupMetadata,
    IllegalStateError,
    ProducerFencedError,
    TopicPartition,
    TransactionAbortedError,
)
from .txn_requests import P_ADD, P_BUMP, P_END, P_INIT, TxnRequest, TxnResult, build_request, normalize_offsets

log = logging.getLogger(__name__)

GROUP, TRANSACTION = 0, 1  # FindCoordinator key_type
ADD_PARTITIONS_RETRY_BACKOFF = 0.02  # Kafka's short backoff for the first AddPartitions of a txn


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState
# source -> legal targets. FATAL_ERROR is reachable from anywhere and is never left;
# ABORTING -> INITIALIZING bumps the epoch after an abort that left a sequence gap.
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset({S.INITIALIZING, S.FATAL_ERROR}),
    S.INITIALIZING: frozenset({S.READY, S.FATAL_ERROR}),
    S.READY: frozenset({S.IN_TRANSACTION, S.FATAL_ERROR}),
    S.IN_TRANSACTION: frozenset({S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION, S.ABORTABLE_ERROR,
                                 S.FATAL_ERROR}),
    S.COMMITTING_TRANSACTION: frozenset({S.READY, S.ABORTABLE_ERROR, S.FATAL_ERROR}),
    S.ABORTING_TRANSACTION: frozenset({S.READY, S.INITIALIZING, S.FATAL_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.ABORTING_TRANSACTION, S.ABORTABLE_ERROR, S.FATAL_ERROR}),
    S.FATAL_ERROR: frozenset({S.FATAL_ERROR}),
}

_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
_FATAL = frozenset({ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    ErrorCode.INVALID_TXN_STATE, ErrorCode.UNSUPPORTED_VERSION,
                    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.INVALID_TRANSACTION_TIMEOUT})
_LOOKUP = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS})


class TransactionManager:
    """State of one ``transactional.id``: producer id/epoch, partitions in the txn, pending requests."""

    def __init__(self, transactional_id: str, transaction_timeout_ms: int, retry_backoff_ms: int) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff = retry_backoff_ms / 1000.0
        self._lock = threading.RLock()
        self.state = TxnState.UNINITIALIZED
        self.last_error: BaseException | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.epoch_generation = 0  # bumped on every new producer id/epoch (the sender resets sequences)
        self.partitions: set[TopicPartition] = set()        # acknowledged by the coordinator
        self.pending_partitions: set[TopicPartition] = set()  # AddPartitionsToTxn sent, not answered
        self.new_partitions: set[TopicPartition] = set()    # not requested yet
        self.transaction_started = False  # a partition or offsets were added to the current txn
        self.epoch_bump_required = False
        self._queue: list[tuple[int, int, TxnRequest]] = []
        self._seq = itertools.count()
        self._coordinators: dict[tuple[int, str], int] = {}
        self._pending: tuple[str, TxnResult] | None = None  # an operation whose result may be awaited again

    # -- the state table -------------------------------------------------------------------

    def _transition(self, target: TxnState, error: BaseException | None = None) -> None:
        if target not in TRANSITIONS[self.state]:
            raise IllegalStateError(f"transactional producer {self.transactional_id!r}: invalid transition "
                                    f"from {self.state.name} to {target.name}")
        if target in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
            if error is not None:
                self.last_error = error
            log.info("transactional id %r: %s (%s)", self.transactional_id, target.name, self.last_error)
        else:
            self.last_error = None
        self.state = target

    def _fatal(self, error: BaseException) -> None:
        if self.state is not TxnState.FATAL_ERROR:
            self._transition(TxnState.FATAL_ERROR, error)
        self._fail_queued(error)

    def _abortable(self, error: BaseException) -> None:
        if TxnState.ABORTABLE_ERROR in TRANSITIONS[self.state]:
            self._transition(TxnState.ABORTABLE_ERROR, error)
        else:  # already aborting (or fatal): the failure changes nothing
            log.info("transactional id %r: %s while %s", self.transactional_id, error, self.state.name)

    def _fail_queued(self, error: BaseException) -> None:
        queued, self._queue = self._queue, []
        for _, _, req in queued:
            req.result.done(error)

    def _check_not_failed(self) -> None:
        if self.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
            raise self.last_error or IllegalStateError(f"the producer is in state {self.state.name}")

    def _check_not_fatal(self) -> None:
        if self.state is TxnState.FATAL_ERROR:
            raise self.last_error or IllegalStateError("the producer is in a fatal error state")

    # -- user operations (any thread) ---------------------------------------------------------

    def _cached(self, op: str) -> TxnResult | None:
        """The result of the last ``op`` when the caller retries it (e.g. after a timeout), as Kafka does."""
        self._check_not_fatal()
        if self._pending is None:
            return None
        pending_op, result = self._pending
        if pending_op == op:
            return result
        if not result.is_done:
            raise IllegalStateError(f"cannot {op}() while {pending_op}() is still in progress")
        return None

    def _remember(self, op: str, result: TxnResult) -> TxnResult:
        self._pending = (op, result)
        return result

    def initialize(self) -> TxnResult:
        """Start InitProducerId (``init_transactions``)."""
        with self._lock:
            cached = self._cached("init_transactions")
            if cached is not None:
                return cached
            self._check_not_failed()
            if self.state is not TxnState.UNINITIALIZED:
                raise IllegalStateError(f"init_transactions() called in state {self.state.name} "
                                        "(it must be called once, first)")
            self._transition(TxnState.INITIALIZING)
            result = TxnResult("InitProducerId")
            self._enqueue(self._init_request(result, bump=False))
            return self._remember("init_transactions", result)

    def begin(self) -> None:
        with self._lock:
            self._check_not_failed()
            if self.state is not TxnState.READY:
                raise IllegalStateError(self._not_ready_message("begin_transaction()"))
            self._transition(TxnState.IN_TRANSACTION)
            self._pending = None

    def _not_ready_message(self, what: str) -> str:
        if self.state in (TxnState.UNINITIALIZED, TxnState.INITIALIZING):
            return f"cannot call {what} before init_transactions() completed"
        if self.state is TxnState.IN_TRANSACTION:
            return f"cannot call {what}: a transaction is already in progress"
        if self.state is TxnState.READY:
            return f"cannot call {what}: no transaction in progress (call begin_transaction() first)"
        return f"cannot call {what} in state {self.state.name}"

    def send_offsets(self, offsets: Mapping[TopicPartition, Any], group: ConsumerGroupMetadata) -> TxnResult:
        """AddOffsetsToTxn then TxnOffsetCommit (``send_offsets_to_transaction``)."""
        with self._lock:
            self._check_not_failed()
            if self.state is not TxnState.IN_TRANSACTION:
                raise IllegalStateError(self._not_ready_message("send_offsets_to_transaction()"))
            result = TxnResult(f"AddOffsetsToTxn/TxnOffsetCommit for group {group.group_id!r}")
            self._enqueue(TxnRequest("add_offsets", P_ADD, result, TRANSACTION, self.transactional_id,
                                     offsets=normalize_offsets(offsets), group=group))
            return result

    def begin_commit(self) -> TxnResult:
        with self._lock:
            cached = self._cached("commit_transaction")
            if cached is not None:
                return cached
            self._check_not_failed()
            if self.state is not TxnState.IN_TRANSACTION:
                raise IllegalStateError(self._not_ready_message("commit_transaction()"))
            self._transition(TxnState.COMMITTING_TRANSACTION)
            return self._remember("commit_transaction", self._begin_completing(True))

    def begin_abort(self) -> TxnResult:
        with self._lock:
            cached = self._cached("abort_transaction")
            if cached is not None:
                return cached
            if self.state not in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR):
                raise IllegalStateError(self._not_ready_message("abort_transaction()"))
            self._transition(TxnState.ABORTING_TRANSACTION)
            self.new_partitions.clear()  # never sent: nothing to add, their batches are dropped
            return self._remember("abort_transaction", self._begin_completing(False))

    def _begin_completing(self, commit: bool) -> TxnResult:
        result = TxnResult(f"EndTxn({'commit' if commit else 'abort'})")
        self._enqueue(TxnRequest("end_txn", P_END, result, TRANSACTION, self.transactional_id, committed=commit))
        return result

    def _init_request(self, result: TxnResult, bump: bool) -> TxnRequest:
        return TxnRequest("init", P_BUMP if bump else P_INIT, result, TRANSACTION, self.transactional_id,
                          epoch_bump=bump)

    def abort_on_close(self) -> bool:
        """Closing mid-transaction aborts it (Kafka's Sender does the same); True if an abort started."""
        with self._lock:
            if self.state in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR) and self._cached_idle():
                log.info("transactional id %r: aborting the incomplete transaction on close", self.transactional_id)
                self.begin_abort()
                return True
            return False

    def _cached_idle(self) -> bool:
        return self._pending is None or self._pending[1].is_done

    # -- producer.send hooks (any thread) -------------------------------------------------------

    def fail_if_not_ready_for_send(self) -> None:
        with self._lock:
            if self.state is TxnState.IN_TRANSACTION:
                return
            err = self.last_error
            if self.state is TxnState.FATAL_ERROR and err is not None:
                raise err
            if self.state is TxnState.ABORTABLE_ERROR and err is not None:
                raise KafkaError(getattr(err, "code", ErrorCode.UNKNOWN_SERVER_ERROR),
                                 f"cannot send: an earlier transactional request failed ({err}); "
                                 "abort the transaction") from err
            raise IllegalStateError(self._not_ready_message("send()"))

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        with self._lock:
            if tp not in self.partitions and tp not in self.pending_partitions:
                self.new_partitions.add(tp)

    def send_blocked(self, tp: TopicPartition) -> bool:
        """True while batches for ``tp`` must wait (not yet added to the transaction, or fatal)."""
        return tp not in self.partitions or self.state is TxnState.FATAL_ERROR

    def undrained_error(self) -> BaseException | None:
        """The error to fail never-sent batches with (aborting or failed), else None."""
        state = self.state
        if state is TxnState.ABORTING_TRANSACTION:
            return TransactionAbortedError()
        if state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
            return self.last_error or TransactionAbortedError()
        return None

    def handle_failed_batch(self, tp: TopicPartition, error: BaseException, sent: bool) -> BaseException:
        """A produce batch failed for good; returns the error its records report."""
        with self._lock:
            code = getattr(error, "code", None)
            if code in _FENCED:
                error = ProducerFencedError()
                self._fatal(error)
            elif code in _FATAL:
                self._fatal(error)
            elif isinstance(error, TransactionAbortedError):
                pass
            elif self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION,
                                TxnState.ABORTABLE_ERROR):
                if sent:
                    self.epoch_bump_required = True  # its sequence may leave a gap on the partition
                self._abortable(error)
            elif sent and self.state is TxnState.ABORTING_TRANSACTION:
                self.epoch_bump_required = True
            return error

    # -- the sender's side ------------------------------------------------------------------------

    def _enqueue(self, req: TxnRequest) -> None:
        heapq.heappush(self._queue, (req.priority, next(self._seq), req))

    def has_pending_requests(self) -> bool:
        """Requests still to send for an ongoing transaction (what a graceful close waits for;
        a pending InitProducerId does not hold a close up, as in Kafka)."""
        with self._lock:
            ongoing = self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION,
                                     TxnState.ABORTING_TRANSACTION, TxnState.ABORTABLE_ERROR)
            return ongoing and (bool(self._queue) or bool(self.new_partitions))

    def next_request(self, now: float, has_incomplete_batches: bool) -> TxnRequest | None:
        """The next request to send now (popped), or None."""
        with self._lock:
            if self.new_partitions and self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
                parts = sorted(self.new_partitions)
                self.pending_partitions.update(parts)
                self.new_partitions.clear()
                self._enqueue(TxnRequest("add_partitions", P_ADD, TxnResult("AddPartitionsToTxn"), TRANSACTION,
                                         self.transactional_id, partitions=parts))
            while self._queue:
                _, _, req = self._queue[0]
                if req.kind == "end_txn" and has_incomplete_batches:
                    return None  # every batch must be resolved before the transaction ends
                if req.not_before > now:
                    return None
                heapq.heappop(self._queue)
                if self._terminated(req):
                    continue
                if req.kind == "end_txn" and not self.transaction_started:
                    # nothing reached the coordinator: the transaction ends without a request
                    self._finish_end_txn(req)
                    continue
                return req
            return None

    def _terminated(self, req: TxnRequest) -> bool:
        """Fail a request that must not go out in an error state."""
        if self.state is TxnState.FATAL_ERROR:
            req.result.done(self.last_error)
            return True
        if self.state is TxnState.ABORTABLE_ERROR and req.kind != "init":
            req.result.done(self.last_error)
            if req.kind == "add_partitions":
                self.pending_partitions.difference_update(req.partitions)
            return True
        return False

    def next_delay(self, now: float) -> float:
        """Seconds until the head of the queue may go (1.0 when nothing is queued)."""
        with self._lock:
            if not self._queue:
                return 1.0
            return max(0.0, self._queue[0][2].not_before - now)

    def coordinator(self, req: TxnRequest) -> int | None:
        return self._coordinators.get((req.coordinator_type, req.coordinator_key))

    def _lookup(self, req: TxnRequest) -> None:
        self._coordinators.pop((req.coordinator_type, req.coordinator_key), None)

    def _retry(self, req: TxnRequest, backoff: float | None = None) -> None:
        req.not_before = time.monotonic() + (self.retry_backoff if backoff is None else backoff)
        self._enqueue(req)

    def build(self, req: TxnRequest, version_for: Callable[[ModuleType, int], int]
              ) -> tuple[ModuleType, dict[str, Any], int]:
        """(api, body, version) of ``req`` with the current producer id/epoch."""
        return build_request(req, self.transactional_id, self.producer_id, self.producer_epoch,
                             self.transaction_timeout_ms, version_for)

    # -- answers (sender thread) -------------------------------------------------------------------

    def on_network_error(self, req: TxnRequest, error: KafkaError) -> None:
        """The request could not be sent or its connection failed."""
        with self._lock:
            if error.retriable:
                self._lookup(req)
                self._retry(req)
            else:
                self._request_fatal(req, error)

    def on_find_coordinator(self, req: TxnRequest, resp: Any) -> None:
        with self._lock:
            if self.state is TxnState.FATAL_ERROR:
                req.result.done(self.last_error)
                return
            code = ErrorCode(resp.error_code)
            if code == ErrorCode.NONE:
                self._coordinators[(req.coordinator_type, req.coordinator_key)] = resp.node_id
                log.debug("%s coordinator for %r is node %s", "transaction" if req.coordinator_type else "group",
                          req.coordinator_key, resp.node_id)
                self._enqueue(req)
            elif code.retriable:
                self._retry(req)
            elif code == ErrorCode.GROUP_AUTHORIZATION_FAILED:
                req.result.done(KafkaError(code, f"group {req.coordinator_key!r}"))
                self._abortable(req.result.error)  # type: ignore[arg-type]
            else:
                self._request_fatal(req, KafkaError(code, f"FindCoordinator for {req.coordinator_key!r}"))

    def _request_fatal(self, req: TxnRequest, error: BaseException) -> None:
        if getattr(error, "code", None) in _FENCED:
            error = ProducerFencedError()
        req.result.done(error)
        self._fatal(error)

    def _request_abortable(self, req: TxnRequest, error: BaseException) -> None:
        req.result.done(error)
        self._abortable(error)

    def on_response(self, req: TxnRequest, resp: Any) -> None:
        with self._lock:
            if self.state is TxnState.FATAL_ERROR:  # fenced meanwhile (e.g. by a produce answer)
                req.result.done(self.last_error)
                return
            try:
                getattr(self, f"_on_{req.kind}")(req, resp)
            except IllegalStateError as exc:  # a bug: fail the operation, never the sender thread
                log.error("transactional id %r: %s", self.transactional_id, exc)
                req.result.done(exc)

    def _common(self, req: TxnRequest, code: ErrorCode, what: str) -> bool:
        """Shared error handling; True if the request was dealt with (retried or failed)."""
        if code in _LOOKUP or code in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT):
            self._lookup(req)
            self._retry(req)
        elif code in _RETRY or code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            self._retry(req)
        elif code in _FENCED:
            self._request_fatal(req, ProducerFencedError())
        elif code in _FATAL:
            self._request_fatal(req, KafkaError(code, what))
        else:
            return False
        return True

    def _on_init(self, req: TxnRequest, resp: Any) -> None:
        code = ErrorCode(resp.error_code)
        if code == ErrorCode.NONE:
            self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
            self.epoch_generation += 1
            self.epoch_bump_required = False
            self._transition(TxnState.READY)
            log.info("transactional id %r: producer id %s epoch %s", self.transactional_id, self.producer_id,
                     self.producer_epoch)
            req.result.done()
        elif not self._common(req, code, "InitProducerId"):
            self._request_fatal(req, KafkaError(code, "InitProducerId"))

    def _on_add_partitions(self, req: TxnRequest, resp: Any) -> None:
        errors = {TopicPartition(t.name, p.partition_index): ErrorCode(p.error_code)
                  for t in resp.results for p in t.results}
        bad = {tp: c for tp, c in errors.items() if c != ErrorCode.NONE}
        if not bad:
            self.pending_partitions.difference_update(req.partitions)
            self.partitions.update(req.partitions)
            self.transaction_started = True
            req.result.done()
            return
        codes = set(bad.values())
        if codes & (_FENCED | _FATAL):
            self.pending_partitions.difference_update(req.partitions)
            code = next(iter(codes & _FENCED)) if codes & _FENCED else next(iter(codes & _FATAL))
            self._common(req, code, "AddPartitionsToTxn")
        elif codes & _LOOKUP:
            self._common(req, next(iter(codes & _LOOKUP)), "AddPartitionsToTxn")
        elif codes & (_RETRY | {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}):
            # CONCURRENT_TRANSACTIONS on the first add: the previous transaction is still completing
            quick = ErrorCode.CONCURRENT_TRANSACTIONS in codes and not self.partitions
            self._retry(req, ADD_PARTITIONS_RETRY_BACKOFF if quick else None)
        else:
            self.pending_partitions.difference_update(req.partitions)
            real = sorted(c for c in codes if c != ErrorCode.OPERATION_NOT_ATTEMPTED)
            detail = ", ".join(f"{tp.topic}-{tp.partition}: {c.name}" for tp, c in sorted(bad.items()))
            self._request_abortable(req, KafkaError(real[0] if real else ErrorCode.OPERATION_NOT_ATTEMPTED,
                                                    f"could not add partitions to the transaction ({detail})"))

    def _on_add_offsets(self, req: TxnRequest, resp: Any) -> None:
        code = ErrorCode(resp.error_code)
        group = req.group
        assert group is not None
        if code == ErrorCode.NONE:
            self.transaction_started = True
            # same result: send_offsets_to_transaction completes once the offsets are committed
            self._enqueue(TxnRequest("txn_offset_commit", P_ADD, req.result, GROUP, group.group_id,
                                     offsets=req.offsets, group=group))
        elif not self._common(req, code, "AddOffsetsToTxn"):
            self._request_abortable(req, KafkaError(code, f"AddOffsetsToTxn for group {group.group_id!r}"))

    def _on_txn_offset_commit(self, req: TxnRequest, resp: Any) -> None:
        errors = {TopicPartition(t.name, p.partition_index): ErrorCode(p.error_code)
                  for t in resp.topics for p in t.partitions}
        bad = {tp: c for tp, c in errors.items() if c != ErrorCode.NONE}
        if not bad:
            req.result.done()
            return
        codes = set(bad.values())
        if codes & _FENCED:
            self._request_fatal(req, ProducerFencedError())
            return
        if codes & {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID}:
            code = next(iter(codes & {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                                      ErrorCode.FENCED_INSTANCE_ID}))
            self._request_abortable(req, CommitFailedError(code, "transactional offset commit failed: the group "
                                                                 "rebalanced (the consumer's generation is stale)"))
            return
        retriable = _LOOKUP | _RETRY | {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT,
                                        ErrorCode.NETWORK_EXCEPTION, ErrorCode.UNSTABLE_OFFSET_COMMIT}
        if codes <= retriable:
            if codes & (_LOOKUP | {ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION}):
                self._lookup(req)
            req.offsets = {tp: om for tp, om in req.offsets.items() if tp in bad}
            self._retry(req)
            return
        code = next(c for c in codes if c not in retriable)
        if code in _FATAL:
            self._request_fatal(req, KafkaError(code, "TxnOffsetCommit"))
        else:
            self._request_abortable(req, KafkaError(code, f"TxnOffsetCommit for group {req.coordinator_key!r}"))

    def _on_end_txn(self, req: TxnRequest, resp: Any) -> None:
        code = ErrorCode(resp.error_code)
        if code == ErrorCode.NONE:
            self._finish_end_txn(req)
        elif not self._common(req, code, "EndTxn"):
            error = KafkaError(code, f"EndTxn({'commit' if req.committed else 'abort'})")
            if req.committed:
                self._request_abortable(req, error)
            else:
                self._request_fatal(req, error)

    def _finish_end_txn(self, req: TxnRequest) -> None:
        """The transaction is over; after an abort that may have left a sequence gap, bump the epoch
        first (InitProducerId with the current id/epoch) and complete the abort when that is done."""
        bump = self.epoch_bump_required and self.state is TxnState.ABORTING_TRANSACTION
        self._transition(TxnState.INITIALIZING if bump else TxnState.READY)
        self.transaction_started = False
        self.partitions.clear()
        self.pending_partitions.clear()
        self.new_partitions.clear()
        if bump:
            self._enqueue(self._init_request(req.result, bump=True))
        else:
            req.result.done()
