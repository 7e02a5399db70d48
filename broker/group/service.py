"""GroupCoordinatorService: the thin Twisted shell around the sans-IO GroupCoordinator.

Invariant: the coordinator is only driven on the reactor thread. Its ``append`` writes
one batch to the local leader of ``__consumer_offsets-<p>`` through the replica
manager's produce path (origin "coordinator", as Kafka's appendForGroup) with
acks=offsets.commit.required.acks (-1) and timeout=offsets.commit.timeout.ms, and its
Completion completes with the produce error and the batch's base offset once the HW
passed the batch (DelayedProduce) or the wait failed. ``on_txn_marker_written`` (called
by WriteTxnMarkers once a marker is replicated on an offsets partition) commits or drops
the producer's pending transactional offsets there. Leadership and loading of the offsets
partitions (in chunks of offsets.load.buffer.size) follow CoordinatorPartitions.
"""
from __future__ import annotations

import time
from typing import Any

from odradek.broker.completion import Completion

from ..coordinator_partitions import CoordinatorPartitions
from . import AppendResult, CallLaterTimer, GroupConfig, GroupCoordinator
from .offsets import GROUP_METADATA_TOPIC


class GroupCoordinatorService(CoordinatorPartitions):
    """Owns the GroupCoordinator; wired to the replica manager's leadership hooks."""

    topic = GROUP_METADATA_TOPIC

    def __init__(self, config: Any, replica_manager: Any, scheduler: Any,
                 load_chunk_bytes: int | None = None):
        super().__init__(replica_manager, scheduler, int(config["offsets.load.buffer.size"]),
                         load_chunk_bytes)
        self.config = config
        self.commit_timeout_ms = int(config["offsets.commit.timeout.ms"])
        self.required_acks = int(config["offsets.commit.required.acks"])
        clock = getattr(scheduler, "seconds", time.time)
        self.coordinator = GroupCoordinator(GroupConfig.from_kafka_config(config),
                                            CallLaterTimer(scheduler, clock), self.append)

    def append(self, partition: int, batch: bytes) -> Completion[AppendResult]:
        return self.append_to_log(partition, self.commit_timeout_ms, self.required_acks, batch)

    # ------------------------------------------------------------ transactions
    def on_txn_marker_written(self, partition_index: int, producer_id: int,
                              committed: bool) -> None:
        """A COMMIT/ABORT marker of ``producer_id`` is replicated on
        ``__consumer_offsets-<partition_index>``: complete its pending offsets there."""
        self.coordinator.handle_txn_completion(producer_id, (partition_index,), committed)
