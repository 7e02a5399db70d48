"""GroupCoordinatorService: the thin Twisted shell around the sans-IO GroupCoordinator.

Invariant: the coordinator is only driven on the reactor thread. Its ``append`` writes
one batch to the local leader of ``__consumer_offsets-<p>`` through the replica
manager's produce path (origin "coordinator", as Kafka's appendForGroup) with
acks=offsets.commit.required.acks (-1) and timeout=offsets.commit.timeout.ms, and its
Completion completes with the produce error and the batch's base offset once the HW
passed the batch (DelayedProduce) or the wait failed. ``on_txn_marker_written`` (called
by WriteTxnMarkers once a marker is replicated on an offsets partition) commits or drops
the producer's pending transactional offsets there. Becoming leader of an
offsets partition (``on_leadership_change``) runs ``on_elected`` then loads the log from
its start to its end in chunks of offsets.load.buffer.size, yielding to the reactor
between chunks; a load is abandoned as soon as the partition is resigned (becoming
follower, StopReplica) or elected again, so ``finish_loading`` is only called for the
load that is still current.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Iterable

from twisted.internet import defer, task

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import iter_headers

from .group import AppendResult, CallLaterTimer, Completion, GroupConfig, GroupCoordinator
from .group.offsets import GROUP_METADATA_TOPIC

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
DEFAULT_LOAD_CHUNK = 1 << 20   # at most this much is decoded per reactor turn


class GroupCoordinatorService:
    """Owns the GroupCoordinator; wired to the replica manager's leadership hooks."""

    def __init__(self, config: Any, replica_manager: Any, scheduler: Any,
                 load_chunk_bytes: int | None = None):
        self.config = config
        self.replica_manager = replica_manager
        self.scheduler = scheduler
        self.commit_timeout_ms = int(config["offsets.commit.timeout.ms"])
        self.required_acks = int(config["offsets.commit.required.acks"])
        self.load_chunk_bytes = min(int(config["offsets.load.buffer.size"]),
                                    load_chunk_bytes or DEFAULT_LOAD_CHUNK)
        clock = getattr(scheduler, "seconds", time.time)
        self.coordinator = GroupCoordinator(GroupConfig.from_kafka_config(config),
                                            CallLaterTimer(scheduler, clock), self.append)
        self._loads: dict[int, object] = {}          # partition -> token of the current load
        self.loads: dict[int, defer.Deferred] = {}    # partition -> the running load (for tests)
        self.load_times_ms: dict[int, float] = {}

    # ------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        self.coordinator.startup()
        # partitions this broker already leads (LeaderAndIsr may have arrived before startup)
        for p in list(self.replica_manager.partitions.values()):
            if p.topic == GROUP_METADATA_TOPIC and p.is_leader:
                self.elect(p.partition, p.leader_epoch)

    def shutdown(self) -> None:
        self._loads.clear()
        self.coordinator.shutdown()

    # ------------------------------------------------------------ append (acks=-1)
    def append(self, partition: int, batch: bytes) -> Completion[AppendResult]:
        done: Completion[AppendResult] = Completion()
        tp = (GROUP_METADATA_TOPIC, partition)

        def respond(results: dict[TopicPartition, dict]) -> None:
            if not done.done:
                result = results[tp]
                error = ErrorCode(result["error_code"])
                done.complete(AppendResult(error, int(result.get("base_offset", -1))
                                           if error == ErrorCode.NONE else -1))

        try:   # origin: a transactional offset commit carries a producer but no sequence
            self.replica_manager.append_records(self.commit_timeout_ms, self.required_acks,
                                                {tp: batch}, respond, origin="coordinator")
        except KafkaError as e:
            if not done.done:
                done.complete(AppendResult(ErrorCode(e.code)))
        return done

    # ------------------------------------------------------------ transactions
    def on_txn_marker_written(self, partition_index: int, producer_id: int,
                              committed: bool) -> None:
        """A COMMIT/ABORT marker of ``producer_id`` is replicated on
        ``__consumer_offsets-<partition_index>``: complete its pending offsets there."""
        self.coordinator.handle_txn_completion(producer_id, (partition_index,), committed)

    # ------------------------------------------------------------ leadership
    def on_leadership_change(self, leaders: Iterable[Any], followers: Iterable[Any]) -> None:
        """Replica manager hook after LeaderAndIsr: Partition objects that became leader/follower."""
        for p in leaders:
            if p.topic == GROUP_METADATA_TOPIC:
                self.elect(p.partition, p.leader_epoch)
        for p in followers:
            if p.topic == GROUP_METADATA_TOPIC:
                self.resign(p.partition, p.leader_epoch)

    def on_stop_replicas(self, tps: Iterable[TopicPartition]) -> None:
        """Replica manager hook after StopReplica."""
        for topic, partition in tps:
            if topic == GROUP_METADATA_TOPIC:
                self.resign(partition, None)

    def elect(self, partition: int, epoch: int | None) -> None:
        if not self.coordinator.active:
            return
        if not self.coordinator.on_elected(partition, epoch):
            return
        token = object()
        self._loads[partition] = token
        d = defer.Deferred.fromCoroutine(self._load(partition, token))
        self.loads[partition] = d

        def failed(f) -> None:
            log.error("loading %s-%d failed: %s", GROUP_METADATA_TOPIC, partition, f.getTraceback())
            if self._loads.get(partition) is token:   # give the partition up rather than hang loading
                self.resign(partition, None)
        d.addErrback(failed)

    def resign(self, partition: int, epoch: int | None) -> None:
        self._loads.pop(partition, None)
        self.coordinator.on_resigned(partition, epoch)

    def _current(self, partition: int, token: object) -> bool:
        return self._loads.get(partition) is token

    async def _load(self, partition: int, token: object) -> None:
        tp = (GROUP_METADATA_TOPIC, partition)
        started = time.monotonic()
        p = self.replica_manager.get_partition(tp)
        if p is None or p.log is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} is not hosted here")
        offset = p.log.log_start_offset
        batches = 0
        while True:
            p = self.replica_manager.get_partition(tp)
            if not self._current(partition, token) or p is None or not p.is_leader:
                return   # resigned (or re-elected) meanwhile: that path owns the partition now
            log_ = p.log
            if offset >= log_.log_end_offset:
                break
            try:
                blob = log_.read(offset, self.load_chunk_bytes, None, True)
            except KafkaError as e:
                if e.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise
                offset = log_.log_start_offset   # the log start moved: replay from there
                continue
            last = None
            for _, header in iter_headers(blob):
                last = header
            if last is None:
                break
            self.coordinator.load_batches(partition, blob)
            batches += 1
            offset = last.next_offset
            await task.deferLater(self.scheduler, 0, lambda: None)   # let the reactor breathe
        if not self._current(partition, token):
            return
        self._loads.pop(partition, None)
        self.coordinator.finish_loading(partition)
        elapsed = (time.monotonic() - started) * 1000
        self.load_times_ms[partition] = elapsed
        log.info("loaded %s-%d up to offset %d in %.0f ms (%d reads)", GROUP_METADATA_TOPIC,
                 partition, offset, elapsed, batches)
