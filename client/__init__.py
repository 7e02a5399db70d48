"""odradek.client: blocking Kafka clients familiar to kafka-python users.

Invariant: imports nothing of odradek but ``odradek.protocol``; configuration
keys are Kafka's (``linger.ms`` or ``linger_ms``), validated by ``config``.
"""
from odradek.protocol.errors import ErrorCode, KafkaError

from .admin import AdminClient
from .config import ClientConfig, ConfigError
from .consumer import Consumer
from .producer import Producer
from .structs import (
    ConsumerRecord,
    KafkaTimeoutError,
    NewTopic,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)

__all__ = [
    "Producer", "Consumer", "AdminClient", "TopicPartition", "ConsumerRecord", "RecordMetadata",
    "NewTopic", "OffsetAndTimestamp", "KafkaError", "KafkaTimeoutError", "ErrorCode", "ClientConfig",
    "ConfigError",
]
