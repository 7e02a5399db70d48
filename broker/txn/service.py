"""TransactionCoordinatorService: the thin Twisted shell around the sans-IO TransactionCoordinator.

Invariant: the coordinator is only driven on the reactor thread. Its ``append`` writes one
batch to the local leader of ``__transaction_state-<p>`` through the replica manager with
acks=-1 and timeout=request.timeout.ms, completing with the produce error once the HW
passed the batch or the wait failed. Producer ids come from the broker's
ProducerIdManager (ZooKeeper blocks, off the reactor). Markers leave through one
TxnMarkerChannel on the inter-broker listener. Leadership and loading of the transaction
log partitions (in chunks of transaction.state.log.load.buffer.size, with the partition's
leader epoch as coordinator epoch) follow CoordinatorPartitions.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from twisted.internet import defer

from odradek.broker.completion import Completion
from odradek.protocol.errors import ErrorCode

from ..coordinator_partitions import CoordinatorPartitions
from . import (TRANSACTION_STATE_TOPIC, CallLaterTimer, MarkerJob,
                  TransactionCoordinator, TxnConfig)
from .marker_channel import TxnMarkerChannel

log = logging.getLogger(__name__)


class TransactionCoordinatorService(CoordinatorPartitions):
    """Owns the TransactionCoordinator and its marker channel; follows the replica manager's
    leadership hooks for ``__transaction_state``."""

    topic = TRANSACTION_STATE_TOPIC

    def __init__(self, config: Any, replica_manager: Any, metadata_cache: Any, scheduler: Any,
                 producer_ids: Any, broker_id: int, listener: str = "PLAINTEXT",
                 load_chunk_bytes: int | None = None, client_factory: Any = None):
        super().__init__(replica_manager, scheduler, int(config["transaction.state.log.load.buffer.size"]),
                         load_chunk_bytes)
        self.config = config
        self.producer_ids = producer_ids
        self.txn_config = TxnConfig.from_kafka_config(config)
        kwargs = {} if client_factory is None else {"client_factory": client_factory}
        self.channel = TxnMarkerChannel(scheduler, broker_id, metadata_cache, listener,
                                        retry_backoff_ms=self.txn_config.marker_retry_backoff_ms,
                                        request_timeout_ms=self.txn_config.request_timeout_ms, **kwargs)
        clock = getattr(scheduler, "seconds", time.time)
        self.coordinator = TransactionCoordinator(self.txn_config, CallLaterTimer(scheduler, clock),
                                                  self.append, self.generate_producer_id,
                                                  self.send_markers)
        self.channel.coordinator = self.coordinator

    def shutdown(self) -> None:
        super().shutdown()
        self.channel.shutdown()

    # ------------------------------------------------------------ injected functions
    def append(self, partition: int, batch: bytes) -> Completion[ErrorCode]:
        done: Completion[ErrorCode] = Completion()
        self.append_to_log(partition, self.txn_config.request_timeout_ms, -1, batch).add_callback(
            lambda result: done.complete(result.error))
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
