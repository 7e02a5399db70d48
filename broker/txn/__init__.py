"""The transaction coordinator (sans-IO): its interfaces with the broker layer.

Invariant: nothing in ``odradek.broker.txn`` except ``marker_channel`` does I/O or imports
Twisted. The broker drives the ``TransactionCoordinator`` with method calls and gives it:
a ``Timer`` (``schedule``/``cancel``/``now_ms``), an ``append`` function
(``append(partition, batch) -> Completion[ErrorCode]`` writing one RecordBatch to
``__transaction_state-<partition>`` with acks=-1), a ``generate_producer_id() ->
Completion[int]`` (the ZooKeeper-block ProducerIdManager), a ``send_markers(job)``
(the WriteTxnMarkers channel, which reports back through ``marker_written`` /
``markers_done`` / ``marker_partition_dropped``), and the records of a partition when it
becomes its leader. Slow answers are ``Completion`` objects (shared with the group
coordinator): each completes exactly once.

Broker usage: ``coord = TransactionCoordinator(TxnConfig.from_kafka_config(cfg), timer,
append, generate_producer_id, send_markers)``; ``coord.startup()``; on LeaderAndIsr for
``__transaction_state-p``: ``on_elected(p, leader_epoch)``, ``load_batches(p, blob)`` per
log read, ``finish_loading(p)``; on becoming follower/StopReplica: ``on_resigned(p, epoch)``.
FindCoordinator uses ``coord.partition_for(transactional_id)``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from odradek.broker.completion import Completion
from odradek.broker.group import CallLaterTimer, Timer
from odradek.protocol.errors import ErrorCode

__all__ = [
    "Timer", "CallLaterTimer", "TxnConfig", "InitProducerIdResult", "MarkerJob",
    "TRANSACTION_STATE_TOPIC", "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH", "TransactionCoordinator",
]

TRANSACTION_STATE_TOPIC = "__transaction_state"
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class TxnConfig:
    """The broker settings the coordinator uses (Kafka's names in ``from_kafka_config``)."""

    transactional_id_expiration_ms: int = 604_800_000
    max_timeout_ms: int = 900_000
    num_partitions: int = 50
    abort_timed_out_interval_ms: int = 10_000
    remove_expired_interval_ms: int = 3_600_000
    request_timeout_ms: int = 30_000
    marker_retry_backoff_ms: int = 100

    @classmethod
    def from_kafka_config(cls, cfg: Mapping[str, Any] | Any) -> "TxnConfig":
        return cls(
            transactional_id_expiration_ms=int(cfg["transactional.id.expiration.ms"]),
            max_timeout_ms=int(cfg["transaction.max.timeout.ms"]),
            num_partitions=int(cfg["transaction.state.log.num.partitions"]),
            abort_timed_out_interval_ms=int(
                cfg["transaction.abort.timed.out.transaction.cleanup.interval.ms"]),
            remove_expired_interval_ms=int(
                cfg["transaction.remove.expired.transaction.cleanup.interval.ms"]),
            request_timeout_ms=int(cfg["request.timeout.ms"]),
        )


@dataclass(frozen=True)
class InitProducerIdResult:
    error_code: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(eq=False)
class MarkerJob:
    """Markers of one transaction to write: ``pending`` shrinks as leaders acknowledge."""

    transactional_id: str
    txn_partition: int                  # the __transaction_state partition
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    commit: bool
    pending: set[TopicPartition] = field(default_factory=set)
    cancelled: bool = False
    complete: Any = field(default=None, repr=False)   # the Complete transit written at the end


SendMarkersFn = Callable[[MarkerJob], None]
GenerateProducerIdFn = Callable[[], Completion[int]]


from .coordinator import TransactionCoordinator  # noqa: E402  (needs the names above)
