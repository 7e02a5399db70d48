"""InitProducerId (key 22): allocate a producer id and epoch.

Invariant: declares every version of Kafka 2.8.2's InitProducerIdRequest/InitProducerIdResponse
(0-4, flexible 2+); the broker advertises 0-4.
"""
from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, F, Message

API_KEY = 22
NAME = "InitProducerId"
MIN_VERSION = 0
MAX_VERSION = 4
FLEXIBLE_FROM = 2

Request = Message("InitProducerIdRequest", "0-4", flexible="2+", fields=[
    F("transactional_id", STRING, "0+", nullable="0+"),
    F("transaction_timeout_ms", INT32, "0+"),
    F("producer_id", INT64, "3+", default=-1),
    F("producer_epoch", INT16, "3+", default=-1),
])

Response = Message("InitProducerIdResponse", "0-4", flexible="2+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("error_code", INT16, "0+"),
    F("producer_id", INT64, "0+", default=-1),
    F("producer_epoch", INT16, "0+"),
])
