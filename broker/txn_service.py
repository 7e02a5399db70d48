"""TransactionCoordinatorService: the thin Twisted shell around the sans-IO TransactionCoordinator.

Invariant: the coordinator is only driven on the reactor thread. Its ``append`` writes one
batch to the local leader of ``__transaction_state-<p>`` through the replica manager with
acks=-1 and timeout=request.timeout.ms, completing with the produce error once the HW
passed the batch or the wait failed. Producer ids come from the broker's
ProducerIdManager (ZooKeeper blocks, off the reactor). Markers leave through one
TxnMarkerChannel on the inter-broker listener. Becoming leader of a transaction log
partition loads it from its start to its end in chunks of
transaction.state.log.load.buffer.size, yielding to the reactor between chunks, with the
partition's leader epoch as coordinator epoch; a load is abandoned as soon as the
partition is resigned or elected again, so ``finish_loading`` runs only for the current one.
"""
from __future__ import annotations

import inspect
import logging
import time
from typing import Any, Iterable

from twisted.internet import defer, task

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import iter_headers

from .txn import (TRANSACTION_STATE_TOPIC, CallLaterTimer, Completion, MarkerJob,
                  TransactionCoordinator, TxnConfig)
from .txn.marker_channel import TxnMarkerChannel

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
DEFAULT_LOAD_CHUNK = 1 << 20   # at most this much is decoded per reactor turn


class TransactionCoordinatorService:
    """Owns the TransactionCoordinator and its marker channel; follows the replica manager's
    leadership hooks for ``__transaction_state``."""

    def __init__(self, config: Any, replica_manager: Any, metadata_cache: Any, scheduler: Any,
                 producer_ids: Any, broker_id: int, listener: str = "PLAINTEXT",
                 load_chunk_bytes: int | None = None, client_factory: Any = None):
        self.config = config
        self.replica_manager = replica_manager
        self.scheduler = scheduler
        self.producer_ids = producer_ids
        self.txn_config = TxnConfig.from_kafka_config(config)
        self.load_chunk_bytes = min(int(config["transaction.state.log.load.buffer.size"]),
                                    load_chunk_bytes or DEFAULT_LOAD_CHUNK)
        kwargs = {} if client_factory is None else {"client_factory": client_factory}
        self.channel = TxnMarkerChannel(scheduler, broker_id, metadata_cache, listener,
                                        retry_backoff_ms=self.txn_config.marker_retry_backoff_ms,
                                        request_timeout_ms=self.txn_config.request_timeout_ms, **kwargs)
        clock = getattr(scheduler, "seconds", time.time)
        self.coordinator = TransactionCoordinator(self.txn_config, CallLaterTimer(scheduler, clock),
                                                  self.append, self.generate_producer_id,
                                                  self.send_markers)
        self.channel.coordinator = self.coordinator
        try:
            params = inspect.signature(replica_manager.append_records).parameters
            self._origin = {"origin": "coordinator"} if "origin" in params else {}
        except (TypeError, ValueError):
            self._origin = {}
        self._loads: dict[int, object] = {}
        self.loads: dict[int, defer.Deferred] = {}    # partition -> the running load (for tests)

    # ------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        self.coordinator.startup()
        for p in list(self.replica_manager.partitions.values()):
            if p.topic == TRANSACTION_STATE_TOPIC and p.is_leader:
                self.elect(p.partition, p.leader_epoch)

    def shutdown(self) -> None:
        self._loads.clear()
        self.coordinator.shutdown()
        self.channel.shutdown()

    # ------------------------------------------------------------ injected functions
    def append(self, partition: int, batch: bytes) -> Completion[ErrorCode]:
        done: Completion[ErrorCode] = Completion()
        tp = (TRANSACTION_STATE_TOPIC, partition)

        def respond(results: dict[TopicPartition, dict]) -> None:
            if not done.done:
                done.complete(ErrorCode(results[tp]["error_code"]))

        try:
            self.replica_manager.append_records(self.txn_config.request_timeout_ms, -1, {tp: batch},
                                                respond, **self._origin)
        except KafkaError as e:
            if not done.done:
                done.complete(ErrorCode(e.code))
        return done

    def generate_producer_id(self) -> Completion[int]:
        done: Completion[int] = Completion()
        if self.producer_ids is None:
            done.complete(-1)
            return done
        d = defer.ensureDeferred(self.producer_ids.generate())

        def failed(f) -> None:
            log.warning("allocating a producer id failed: %s", f.getErrorMessage())
            done.complete(-1)
        d.addCallbacks(done.complete, failed)
        return done

    def send_markers(self, job: MarkerJob) -> None:
        self.channel.send(job)

    # ------------------------------------------------------------ leadership
    def on_leadership_change(self, leaders: Iterable[Any], followers: Iterable[Any]) -> None:
        for p in leaders:
            if p.topic == TRANSACTION_STATE_TOPIC:
                self.elect(p.partition, p.leader_epoch)
        for p in followers:
            if p.topic == TRANSACTION_STATE_TOPIC:
                self.resign(p.partition, p.leader_epoch)

    def on_stop_replicas(self, tps: Iterable[TopicPartition]) -> None:
        for topic, partition in tps:
            if topic == TRANSACTION_STATE_TOPIC:
                self.resign(partition, None)

    def elect(self, partition: int, epoch: int) -> None:
        if not self.coordinator.active or not self.coordinator.on_elected(partition, epoch):
            return
        token = object()
        self._loads[partition] = token
        d = defer.Deferred.fromCoroutine(self._load(partition, token))
        self.loads[partition] = d

        def failed(f) -> None:
            log.error("loading %s-%d failed: %s", TRANSACTION_STATE_TOPIC, partition, f.getTraceback())
            if self._loads.get(partition) is token:
                self.resign(partition, None)
        d.addErrback(failed)

    def resign(self, partition: int, epoch: int | None) -> None:
        self._loads.pop(partition, None)
        self.coordinator.on_resigned(partition, epoch)

    async def _load(self, partition: int, token: object) -> None:
        tp = (TRANSACTION_STATE_TOPIC, partition)
        started = time.monotonic()
        p = self.replica_manager.get_partition(tp)
        if p is None or p.log is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} is not hosted here")
        offset = p.log.log_start_offset
        while True:
            p = self.replica_manager.get_partition(tp)
            if self._loads.get(partition) is not token or p is None or not p.is_leader:
                return
            log_ = p.log
            if offset >= log_.log_end_offset:
                break
            try:
                blob = log_.read(offset, self.load_chunk_bytes, None, True)
            except KafkaError as e:
                if e.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise
                offset = log_.log_start_offset
                continue
            last = None
            for _, header in iter_headers(blob):
                last = header
            if last is None:
                break
            self.coordinator.load_batches(partition, blob)
            offset = last.next_offset
            await task.deferLater(self.scheduler, 0, lambda: None)
        if self._loads.get(partition) is not token:
            return
        self._loads.pop(partition, None)
        self.coordinator.finish_loading(partition)
        log.info("loaded %s-%d up to offset %d in %.0f ms", TRANSACTION_STATE_TOPIC, partition, offset,
                 (time.monotonic() - started) * 1000)
