"""TransactionCoordinator (sans-IO): InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, timeouts, and the marker phase of Kafka 2.8's transaction coordinator.

Invariant: every state change of a transactional id goes prepare -> append (acks=-1) ->
complete, so what a client is told always is in the log first. EndTxn answers the client
once Prepare{Commit,Abort} is durable; the Complete state is written only after every
partition leader acknowledged its marker (``MarkerJob.pending`` empty), and only while
the coordinator still owns the id at the job's coordinator epoch. An ongoing
transaction is never abandoned: a new InitProducerId or the timeout fences it with a
bumped epoch and aborts it first. Errors are Kafka's codes; PRODUCER_FENCED is mapped
to INVALID_PRODUCER_EPOCH for old request versions by the handlers, not here.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

from odradek.broker.completion import Completion
from odradek.protocol.errors import ErrorCode

from . import (NO_PRODUCER_EPOCH, GenerateProducerIdFn, InitProducerIdResult, MarkerJob,
               SendMarkersFn, Timer, TopicPartition, TxnConfig)
from .metadata import TransactionMetadata, TxnState, TxnTransit, is_epoch_exhausted
from .state_manager import AppendFn, TransactionStateManager

log = logging.getLogger(__name__)

E = ErrorCode
S = TxnState


class _NeedProducerId:
    """``_prepare_init``'s answer when the epoch is exhausted and no new id was allocated yet."""


NEED_PRODUCER_ID = _NeedProducerId()


class TransactionCoordinator:
    def __init__(self, config: TxnConfig, timer: Timer, append: AppendFn,
                 generate_producer_id: GenerateProducerIdFn, send_markers: SendMarkersFn):
        self.config = config
        self.timer = timer
        self.manager = TransactionStateManager(config, timer, append)
        self._generate_pid = generate_producer_id
        self._send_markers = send_markers
        self.active = False
        self._jobs: dict[str, MarkerJob] = {}       # transactional id -> its marker job
        self._timers: list[Any] = []

    # ------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        self.active = True
        self._every(self.config.abort_timed_out_interval_ms, self.abort_timed_out_transactions)
        self._every(self.config.remove_expired_interval_ms, self.expire_transactional_ids)

    def shutdown(self) -> None:
        self.active = False
        for handle in self._timers:
            self.timer.cancel(handle)
        self._timers.clear()
        for job in self._jobs.values():
            job.cancelled = True
        self._jobs.clear()
        self.manager.clear()

    def _every(self, interval_ms: int, fn: Callable[[], Any]) -> None:
        slot = len(self._timers)
        self._timers.append(None)

        def tick() -> None:
            if not self.active:
                return
            try:
                fn()
            except Exception:  # noqa: BLE001 - a periodic task must keep running
                log.exception("transaction coordinator task failed")
            self._timers[slot] = self.timer.schedule(interval_ms, tick)
        self._timers[slot] = self.timer.schedule(interval_ms, tick)

    def partition_for(self, transactional_id: str) -> int:
        return self.manager.partition_for(transactional_id)

    # ------------------------------------------------------------ InitProducerId
    def handle_init_producer_id(self, transactional_id: str, timeout_ms: int,
                                expected: tuple[int, int] | None = None
                                ) -> Completion[InitProducerIdResult]:
        """InitProducerId with a transactional id (``expected`` = KIP-360 (id, epoch), v3+)."""
        done: Completion[InitProducerIdResult] = Completion()
        if not transactional_id:
            return Completion.completed(InitProducerIdResult(E.INVALID_REQUEST))
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return Completion.completed(InitProducerIdResult(E.INVALID_TRANSACTION_TIMEOUT))
        self._init(transactional_id, timeout_ms, expected, None, done)
        return done

    def _with_new_pid(self, then: Callable[[int], None], done: Completion[InitProducerIdResult]) -> None:
        def got(result: Any) -> None:
            if isinstance(result, int) and result >= 0:
                then(result)
            elif not done.done:
                done.complete(InitProducerIdResult(E.COORDINATOR_NOT_AVAILABLE))
        try:
            self._generate_pid().add_callback(got)
        except Exception:  # noqa: BLE001
            log.exception("allocating a producer id failed")
            got(None)

    def _init(self, txn_id: str, timeout_ms: int, expected: tuple[int, int] | None,
              new_pid: int | None, done: Completion[InitProducerIdResult]) -> None:
        error, coord_epoch, md = self.manager.get(txn_id)
        if error != E.NONE:
            done.complete(InitProducerIdResult(error))
            return
        if md is None:
            if new_pid is None:   # allocate first (ZooKeeper), then look again
                self._with_new_pid(lambda pid: self._init(txn_id, timeout_ms, expected, pid, done), done)
                return
            created = TransactionMetadata(txn_id, new_pid, timeout_ms=timeout_ms, state=S.EMPTY,
                                          last_update_timestamp=self.timer.now_ms())
            error, coord_epoch, md = self.manager.put_if_absent(created)
            if error != E.NONE or md is None:
                done.complete(InitProducerIdResult(error if error != E.NONE else E.NOT_COORDINATOR))
                return
            new_pid = None if md is created else new_pid
        result = self._prepare_init(md, timeout_ms, expected, new_pid)
        if isinstance(result, ErrorCode):
            done.complete(InitProducerIdResult(result))
            return
        if result is NEED_PRODUCER_ID:
            self._with_new_pid(lambda pid: self._init(txn_id, timeout_ms, expected, pid, done), done)
            return
        assert isinstance(result, TxnTransit)
        transit = result
        if transit.state is S.PREPARE_EPOCH_FENCE:
            # abort the ongoing transaction first; the client retries and then gets the next epoch
            def fenced(err: ErrorCode) -> None:
                done.complete(InitProducerIdResult(err if err != E.NONE else E.CONCURRENT_TRANSACTIONS))
            self._end_transaction(txn_id, transit.producer_id, transit.producer_epoch, False,
                                  from_client=False).add_callback(fenced)
            return

        def appended(err: ErrorCode) -> None:
            if err == E.NONE:
                log.info("initialized transactional id %s with producer id %d epoch %d on partition %d",
                         txn_id, transit.producer_id, transit.producer_epoch, self.partition_for(txn_id))
                done.complete(InitProducerIdResult(E.NONE, transit.producer_id, transit.producer_epoch))
            else:
                done.complete(InitProducerIdResult(err))
        self.manager.append_transit(txn_id, coord_epoch, transit).add_callback(appended)

    def _prepare_init(self, md: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None,
                      new_pid: int | None) -> TxnTransit | ErrorCode | _NeedProducerId:
        if md.pending:
            return E.CONCURRENT_TRANSACTIONS
        if expected is not None:
            pid, epoch = expected
            valid = (md.producer_epoch == NO_PRODUCER_EPOCH or pid == md.producer_id
                     or (pid == md.last_producer_id and is_epoch_exhausted(epoch)))
            if not valid:
                return E.PRODUCER_FENCED
        if md.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return E.CONCURRENT_TRANSACTIONS
        if md.state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if md.epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                if new_pid is None:
                    return NEED_PRODUCER_ID
                return md.prepare_producer_id_rotation(new_pid, timeout_ms, self.timer.now_ms(),
                                                       expected is not None)
            return md.prepare_increment_epoch(timeout_ms, None if expected is None else expected[1],
                                              self.timer.now_ms())
        if md.state is S.ONGOING:
            return md.prepare_fence_epoch()
        raise RuntimeError(f"transactional id {md.transactional_id} found in state {md.state.kafka_name}")

    # ------------------------------------------------------------ AddPartitions / AddOffsets
    def handle_add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Iterable[TopicPartition]) -> Completion[ErrorCode]:
        """AddPartitionsToTxn (and AddOffsetsToTxn with the group's offsets partition)."""
        if not transactional_id:
            return Completion.completed(E.INVALID_REQUEST)
        wanted = set(partitions)
        error, coord_epoch, md = self.manager.get(transactional_id)
        if error != E.NONE:
            return Completion.completed(error)
        if md is None or md.producer_id != producer_id:
            return Completion.completed(E.INVALID_PRODUCER_ID_MAPPING)
        if md.producer_epoch != producer_epoch:
            return Completion.completed(E.PRODUCER_FENCED)
        if md.pending or md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return Completion.completed(E.CONCURRENT_TRANSACTIONS)
        if md.state is S.ONGOING and wanted <= md.partitions:
            return Completion.completed(E.NONE)
        transit = md.prepare_add_partitions(wanted, self.timer.now_ms())
        return self.manager.append_transit(transactional_id, coord_epoch, transit)

    # ------------------------------------------------------------ EndTxn
    def handle_end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                               commit: bool) -> Completion[ErrorCode]:
        return self._end_transaction(transactional_id, producer_id, producer_epoch, commit,
                                     from_client=True)

    def _end_transaction(self, txn_id: str, producer_id: int, producer_epoch: int, commit: bool,
                         from_client: bool) -> Completion[ErrorCode]:
        if not txn_id:
            return Completion.completed(E.INVALID_REQUEST)
        error, coord_epoch, md = self.manager.get(txn_id)
        if error != E.NONE:
            return Completion.completed(error)
        pre = self._prepare_end(md, producer_id, producer_epoch, commit, from_client)
        if isinstance(pre, ErrorCode):
            return Completion.completed(pre)
        transit, epoch_fence = pre
        assert md is not None
        done: Completion[ErrorCode] = Completion()

        def appended(err: ErrorCode) -> None:
            if err != E.NONE:
                if epoch_fence:
                    e2, epoch_now, current = self.manager.get(txn_id)
                    if e2 == E.NONE and current is not None and epoch_now == coord_epoch:
                        current.has_failed_epoch_fence = True
                done.complete(err)
                return
            e2, epoch_now, current = self.manager.get(txn_id)
            if e2 != E.NONE or current is None:
                done.complete(e2 if e2 != E.NONE else E.NOT_COORDINATOR)
                return
            if epoch_now != coord_epoch:
                done.complete(E.NOT_COORDINATOR)
                return
            if current.producer_id != producer_id:
                done.complete(E.INVALID_PRODUCER_ID_MAPPING)
            elif current.producer_epoch != transit.producer_epoch:
                done.complete(E.PRODUCER_FENCED)
            elif current.pending:
                done.complete(E.CONCURRENT_TRANSACTIONS)
            elif current.state is not (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
                done.complete(E.INVALID_TXN_STATE)
            else:
                complete = current.prepare_complete(self.timer.now_ms())
                done.complete(E.NONE)   # the client hears back now; markers follow
                self._start_markers(txn_id, coord_epoch, current, complete, commit)

        self.manager.append_transit(txn_id, coord_epoch, transit).add_callback(appended)
        return done

    def _prepare_end(self, md: TransactionMetadata | None, producer_id: int, producer_epoch: int,
                     commit: bool, from_client: bool) -> tuple[TxnTransit, bool] | ErrorCode:
        if md is None or md.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if (from_client and producer_epoch != md.producer_epoch) or producer_epoch < md.producer_epoch:
            return E.PRODUCER_FENCED
        if md.pending and md.pending_state is not S.PREPARE_EPOCH_FENCE:
            return E.CONCURRENT_TRANSACTIONS
        state = md.state
        if state is S.ONGOING:
            target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            epoch_fence = False
            if target is S.PREPARE_ABORT and md.pending_state is S.PREPARE_EPOCH_FENCE:
                epoch_fence = True   # the bumped epoch goes into the PrepareAbort record
                md.pending_state = None
                md.producer_epoch = producer_epoch
                md.last_producer_epoch = NO_PRODUCER_EPOCH
            return md.prepare_abort_or_commit(target, self.timer.now_ms()), epoch_fence
        if state is S.COMPLETE_COMMIT:
            return E.NONE if commit else E.INVALID_TXN_STATE
        if state is S.COMPLETE_ABORT:
            return E.INVALID_TXN_STATE if commit else E.NONE
        if state is S.PREPARE_COMMIT:
            return E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE
        if state is S.PREPARE_ABORT:
            return E.INVALID_TXN_STATE if commit else E.CONCURRENT_TRANSACTIONS
        if state is S.EMPTY:
            return E.INVALID_TXN_STATE
        raise RuntimeError(f"transactional id {md.transactional_id} found in state {state.kafka_name}")

    # ------------------------------------------------------------ markers
    def _start_markers(self, txn_id: str, coord_epoch: int, md: TransactionMetadata,
                       complete: TxnTransit, commit: bool) -> None:
        old = self._jobs.pop(txn_id, None)
        if old is not None:
            old.cancelled = True
        job = MarkerJob(txn_id, self.partition_for(txn_id), coord_epoch, md.producer_id,
                        md.producer_epoch, commit, set(md.partitions), complete=complete)
        self._jobs[txn_id] = job
        if not job.pending:
            self.markers_done(job)
        else:
            self._send_markers(job)

    def _job_current(self, job: MarkerJob) -> TransactionMetadata | None:
        """The id's metadata if ``job`` is still the live marker phase of it."""
        if job.cancelled or self._jobs.get(job.transactional_id) is not job:
            return None
        error, epoch, md = self.manager.get(job.transactional_id)
        if (error != E.NONE or md is None or epoch != job.coordinator_epoch
                or md.producer_id != job.producer_id or md.producer_epoch != job.producer_epoch
                or md.state is not (S.PREPARE_COMMIT if job.commit else S.PREPARE_ABORT)):
            self._cancel(job)
            return None
        return md

    def _cancel(self, job: MarkerJob) -> None:
        job.cancelled = True
        if self._jobs.get(job.transactional_id) is job:
            del self._jobs[job.transactional_id]

    def marker_written(self, job: MarkerJob, tp: TopicPartition) -> bool:
        """The channel reports a durable marker on ``tp`` (or that its topic is gone).
        False if the job is obsolete (the channel stops sending it)."""
        md = self._job_current(job)
        if md is None:
            return False
        job.pending.discard(tp)
        md.remove_partition(tp)
        if not job.pending:
            self.markers_done(job)
        return True

    marker_partition_dropped = marker_written

    def markers_done(self, job: MarkerJob) -> None:
        """Every marker is written: persist Complete{Commit,Abort} (retrying while the log is
        unavailable, as Kafka does), then forget the job."""
        md = self._job_current(job)
        if md is None:
            return
        transit: TxnTransit = job.complete

        def appended(err: ErrorCode) -> None:
            if self._jobs.get(job.transactional_id) is not job:
                return
            if err == E.COORDINATOR_NOT_AVAILABLE and self.active:
                self.timer.schedule(self.config.marker_retry_backoff_ms, lambda: self.markers_done(job))
                return
            self._cancel(job)
            if err != E.NONE:
                log.warning("writing %s of %s failed: %s", transit.state.kafka_name,
                            job.transactional_id, err.name)
        self.manager.append_transit(job.transactional_id, job.coordinator_epoch, transit,
                                    retry_on_error=lambda e: e == E.COORDINATOR_NOT_AVAILABLE
                                    ).add_callback(appended)

    def is_job_live(self, job: MarkerJob) -> bool:
        return self._job_current(job) is not None

    def abandon_markers(self, job: MarkerJob) -> None:
        """A leader fenced the markers (newer producer or coordinator epoch): stop, as Kafka
        does; the id stays pending until the partition is loaded again."""
        self._cancel(job)

    # ------------------------------------------------------------ leadership
    def on_elected(self, partition: int, coordinator_epoch: int) -> bool:
        """Start loading ``__transaction_state-<partition>``; False if the epoch is stale."""
        self._cancel_partition_jobs(partition)
        return self.manager.begin_load(partition, coordinator_epoch)

    def load_batches(self, partition: int, blob: bytes) -> None:
        self.manager.load_batches(partition, blob)

    def finish_loading(self, partition: int) -> None:
        """Own the partition and resume its PrepareCommit/PrepareAbort transactions."""
        epoch = self.manager.coordinator_epoch(partition)
        for md in self.manager.finish_load(partition):
            if md.pending or epoch is None:
                continue
            commit = md.state is S.PREPARE_COMMIT
            complete = md.prepare_complete(self.timer.now_ms())
            log.info("resuming %s of %s after loading", "commit" if commit else "abort",
                     md.transactional_id)
            self._start_markers(md.transactional_id, epoch, md, complete, commit)

    def on_resigned(self, partition: int, coordinator_epoch: int | None = None) -> None:
        if self.manager.remove_partition(partition, coordinator_epoch):
            self._cancel_partition_jobs(partition)

    def _cancel_partition_jobs(self, partition: int) -> None:
        for job in [j for j in self._jobs.values() if j.txn_partition == partition]:
            self._cancel(job)

    # ------------------------------------------------------------ timeouts and expiry
    def abort_timed_out_transactions(self) -> int:
        """Fence (epoch bump) and abort Ongoing transactions past their timeout."""
        count = 0
        for txn_id, producer_id, _ in self.manager.timed_out(self.timer.now_ms()):
            error, _, md = self.manager.get(txn_id)
            if error != E.NONE or md is None or md.producer_id != producer_id or md.pending:
                continue
            transit = md.prepare_fence_epoch()
            log.info("aborting transaction of %s: open longer than its timeout of %d ms",
                     txn_id, md.timeout_ms)
            self._end_transaction(txn_id, transit.producer_id, transit.producer_epoch, False,
                                  from_client=False)
            count += 1
        return count

    def expire_transactional_ids(self) -> int:
        return len(self.manager.expire_transactional_ids(self.timer.now_ms()))

