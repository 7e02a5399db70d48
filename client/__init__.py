"""odradek.client: blocking Kafka clients familiar to kafka-python users.

Invariant: imports nothing of odradek but ``odradek.protocol``; configuration
keys are Kafka's (``linger.ms`` or ``linger_ms``), validated by ``config``.
"""
from odradek.protocol.errors import ErrorCode, KafkaError

from .admin import AdminClient
from .assignors import RangeAssignor, RoundRobinAssignor, StickyAssignor
from .config import ClientConfig, ConfigError
from .consumer import Consumer, ConsumerRebalanceListener
from .producer import Producer
from .structs import (
    CommitFailedError,
    ConfigEntry,
    ConsumerGroupMetadata,
    ConsumerRecord,
    GroupDescription,
    IllegalStateError,
    KafkaTimeoutError,
    MemberDescription,
    NewPartitions,
    NewTopic,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    ProducerFencedError,
    ProducerState,
    RecordMetadata,
    ReplicaLogDirInfo,
    TopicPartition,
    TopicPartitionReplica,
    TransactionAbortedError,
)

__all__ = [
    "Producer", "Consumer", "AdminClient", "TopicPartition", "ConsumerRecord", "RecordMetadata",
    "NewTopic", "NewPartitions", "OffsetAndTimestamp", "KafkaError", "KafkaTimeoutError", "ErrorCode", "ClientConfig",
    "ConfigError", "ConsumerRebalanceListener", "OffsetAndMetadata", "CommitFailedError",
    "NoOffsetForPartitionError", "IllegalStateError", "GroupDescription", "MemberDescription",
    "RangeAssignor", "RoundRobinAssignor", "StickyAssignor", "ConsumerGroupMetadata", "ProducerFencedError",
    "TransactionAbortedError", "ConfigEntry", "ProducerState", "TopicPartitionReplica", "ReplicaLogDirInfo",
]
