"""Plain value types of the client API (kafka-python-like names and fields).

Invariant: these are immutable tuples with no behaviour beyond conversion, so
they can be hashed, compared and pickled (the Spark source ships them).
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence

from odradek.protocol.errors import ErrorCode, KafkaError


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class TopicPartitionReplica(NamedTuple):
    """One broker's replica of a partition; shown as Kafka shows it: ``<broker>-<topic>-<partition>``."""
    topic: str
    partition: int
    broker_id: int

    def __str__(self) -> str:
        return f"{self.broker_id}-{self.topic}-{self.partition}"


class ReplicaLogDirInfo(NamedTuple):
    """Where a replica lives (Kafka's DescribeReplicaLogDirsResult.ReplicaLogDirInfo): its dir and
    offset lag, and those of its future replica while it moves to another dir (else None, -1)."""
    current_log_dir: str | None = None
    current_offset_lag: int = -1
    future_log_dir: str | None = None
    future_offset_lag: int = -1


class RecordMetadata(NamedTuple):
    """Where a produced record landed (offset -1 with acks=0)."""
    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int = -1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any  # what the key deserializer returns (bytes without one)
    value: Any
    headers: list
    serialized_key_size: int
    serialized_value_size: int


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class NewTopic:
    """A topic to create: ``replica_assignments`` maps partition -> broker ids."""

    def __init__(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                 topic_configs: dict[str, str] | None = None,
                 replica_assignments: Mapping[int, Sequence[int]] | None = None) -> None:
        self.name = name
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.topic_configs = dict(topic_configs or {})
        self.replica_assignments = {int(p): list(r) for p, r in (replica_assignments or {}).items()}

    def __repr__(self) -> str:
        return (f"NewTopic(name={self.name!r}, num_partitions={self.num_partitions}, "
                f"replication_factor={self.replication_factor}, topic_configs={self.topic_configs!r})")


class NewPartitions:
    """What a topic grows to: ``total_count`` partitions in all; ``new_assignments``, the broker
    ids of each added partition in order (None: the controller places them)."""

    def __init__(self, total_count: int, new_assignments: Sequence[Sequence[int]] | None = None) -> None:
        self.total_count = total_count
        self.new_assignments = None if new_assignments is None else [list(r) for r in new_assignments]

    def __repr__(self) -> str:
        return f"NewPartitions(total_count={self.total_count}, new_assignments={self.new_assignments!r})"


class ConfigEntry(NamedTuple):
    """One config of a DescribeConfigs answer; ``source`` is Kafka's ConfigSource name
    (DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, ...), ``synonyms`` (name, value,
    source) most specific first; a sensitive value is None."""
    name: str
    value: str | None
    source: str
    is_sensitive: bool
    is_read_only: bool
    synonyms: tuple[tuple[str, str | None, str], ...] = ()


class ProducerState(NamedTuple):
    """One active producer of a partition, as DescribeProducers (KIP-664) answers it."""
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_transaction_start_offset: int


class OffsetAndMetadata(NamedTuple):
    """A committed offset: the next offset to consume, its metadata string and leader epoch."""
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class MemberDescription(NamedTuple):
    """One member of a described consumer group (subscription and assignment decoded)."""
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    topics: tuple[str, ...]
    assignment: tuple[TopicPartition, ...]


class GroupDescription(NamedTuple):
    """DescribeGroups for one group; ``coordinator`` is the broker id that answered."""
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]
    coordinator: int
    error_code: int = 0


class KafkaTimeoutError(KafkaError):
    """A client-side wait ran out (future.get, max.block.ms, delivery.timeout.ms)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


class CommitFailedError(KafkaError):
    """An OffsetCommit the group rejected (rebalance, unknown member, stale generation)."""


class NoOffsetForPartitionError(KafkaError):
    """No committed offset and ``auto.offset.reset=none`` (Java's NoOffsetForPartitionException)."""

    def __init__(self, partitions: "Sequence[TopicPartition]") -> None:
        self.partitions = tuple(partitions)
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in self.partitions)
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, f"undefined offset with no reset policy for partitions: {names}")


class IllegalStateError(KafkaError):
    """An API used in the wrong state (e.g. subscribe() after assign())."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)


class ConsumerGroupMetadata(NamedTuple):
    """What ``Consumer.group_metadata()`` returns, for ``Producer.send_offsets_to_transaction``."""
    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class ProducerFencedError(KafkaError):
    """A newer producer with the same transactional.id fenced this one (fatal: close the producer)."""

    def __init__(self, message: str = "there is a newer producer with the same transactional.id "
                                      "which fences the current one") -> None:
        super().__init__(ErrorCode.PRODUCER_FENCED, message)


class TransactionAbortedError(KafkaError):
    """A record that was still queued when its transaction was aborted (never sent)."""

    def __init__(self, message: str = "failing batch since the transaction was aborted") -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)
