"""The Twisted shell both coordinators share: following the leadership of their internal topic.

Invariant: a coordinator (group or transaction) owns exactly the partitions of its topic
(``__consumer_offsets`` / ``__transaction_state``) this broker leads. Becoming leader
(LeaderAndIsr, or startup for partitions already led) calls ``on_elected`` and then loads
the partition's log from its start to its end in chunks of at most ``load_chunk_bytes``,
yielding to the reactor between chunks; becoming follower or StopReplica calls
``on_resigned``. A load is abandoned as soon as its partition is resigned or elected again,
so ``finish_loading`` only ever runs for the load that is still current, and a load that
fails gives the partition up instead of leaving it loading forever.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Iterable

from twisted.internet import defer, task

from odradek.broker.completion import Completion
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import iter_headers

from .group import AppendResult

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
DEFAULT_LOAD_CHUNK = 1 << 20   # at most this much is decoded per reactor turn


def _append_result(answer: dict) -> AppendResult:
    """A partition's produce answer as the coordinators read it."""
    code = answer["error_code"]
    if not code:
        return AppendResult(ErrorCode.NONE, int(answer.get("base_offset", -1)))
    return AppendResult(ErrorCode(code), -1)


class CoordinatorPartitions:
    """Base of GroupCoordinatorService and TransactionCoordinatorService.

    Subclasses set ``topic`` and, before calling ``startup``, ``coordinator`` (with
    ``active``, ``startup``, ``shutdown``, ``on_elected``, ``on_resigned``,
    ``load_batches`` and ``finish_loading``).
    """

    topic: str
    coordinator: Any

    def __init__(self, replica_manager: Any, scheduler: Any, load_buffer_size: int,
                 load_chunk_bytes: int | None = None) -> None:
        self.replica_manager = replica_manager
        self.scheduler = scheduler
        self.load_chunk_bytes = min(load_buffer_size, load_chunk_bytes or DEFAULT_LOAD_CHUNK)
        self._loads: dict[int, object] = {}          # partition -> token of the current load
        self.loads: dict[int, defer.Deferred] = {}    # partition -> the running load (for tests)
        self.load_times_ms: dict[int, float] = {}

    # ------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        self.coordinator.startup()
        # partitions this broker already leads (LeaderAndIsr may have arrived before startup)
        for p in list(self.replica_manager.partitions.values()):
            if p.topic == self.topic and p.is_leader:
                self.elect(p.partition, p.leader_epoch)

    def shutdown(self) -> None:
        self._loads.clear()
        self.coordinator.shutdown()

    # ------------------------------------------------------------ append
    def append_to_log(self, partition: int, timeout_ms: int, required_acks: int,
                      batch: bytes) -> Completion[AppendResult]:
        """Write one batch to this broker's leader of ``<topic>-<partition>`` (origin
        "coordinator": a transactional batch may carry a producer but no sequence); completes
        with the produce error and the batch's base offset once the acks are met."""
        tp = (self.topic, partition)
        done = self.replica_manager.append_one(timeout_ms, required_acks, tp, batch, origin="coordinator")
        if type(done) is dict:
            return Completion.completed(_append_result(done))
        return done.map(lambda results: _append_result(results[tp]))

    # ------------------------------------------------------------ leadership
    def on_leadership_change(self, leaders: Iterable[Any], followers: Iterable[Any]) -> None:
        """Replica manager hook after LeaderAndIsr: Partition objects that became leader/follower."""
        for p in leaders:
            if p.topic == self.topic:
                self.elect(p.partition, p.leader_epoch)
        for p in followers:
            if p.topic == self.topic:
                self.resign(p.partition, p.leader_epoch)

    def on_stop_replicas(self, tps: Iterable[TopicPartition]) -> None:
        """Replica manager hook after StopReplica."""
        for topic, partition in tps:
            if topic == self.topic:
                self.resign(partition, None)

    def elect(self, partition: int, epoch: int | None) -> None:
        if not self.coordinator.active or not self.coordinator.on_elected(partition, epoch):
            return
        token = object()
        self._loads[partition] = token
        d = defer.Deferred.fromCoroutine(self._load(partition, token))
        self.loads[partition] = d

        def failed(f) -> None:
            log.error("loading %s-%d failed: %s", self.topic, partition, f.getTraceback())
            if self._loads.get(partition) is token:   # give the partition up rather than hang loading
                self.resign(partition, None)
        d.addErrback(failed)

    def resign(self, partition: int, epoch: int | None) -> None:
        self._loads.pop(partition, None)
        self.coordinator.on_resigned(partition, epoch)

    def _current(self, partition: int, token: object) -> bool:
        return self._loads.get(partition) is token

    async def _load(self, partition: int, token: object) -> None:
        tp = (self.topic, partition)
        started = time.monotonic()
        p = self.replica_manager.get_partition(tp)
        if p is None or p.log is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} is not hosted here")
        offset = p.log.log_start_offset
        reads = 0
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
            reads += 1
            offset = last.next_offset
            await task.deferLater(self.scheduler, 0, lambda: None)   # let the reactor breathe
        if not self._current(partition, token):
            return
        self._loads.pop(partition, None)
        self.coordinator.finish_loading(partition)
        elapsed = (time.monotonic() - started) * 1000
        self.load_times_ms[partition] = elapsed
        log.info("loaded %s-%d up to offset %d in %.0f ms (%d reads)", self.topic, partition,
                 offset, elapsed, reads)
