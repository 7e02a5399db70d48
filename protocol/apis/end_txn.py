"""EndTxn (key 26): commit or abort the producer's transaction.

Invariant: declares every version of Kafka 2.8.2's EndTxnRequest/Response (0-3,
flexible 3+); the broker advertises 0-3.
"""
from __future__ import annotations

from ..schema import BOOL, INT16, INT32, INT64, STRING, F, Message

API_KEY = 26
NAME = "EndTxn"
MIN_VERSION = 0
MAX_VERSION = 3
FLEXIBLE_FROM = 3

Request = Message("EndTxnRequest", "0-3", flexible="3+", fields=[
    F("transactional_id", STRING, "0+"),
    F("producer_id", INT64, "0+"),
    F("producer_epoch", INT16, "0+"),
    F("committed", BOOL, "0+"),
])

Response = Message("EndTxnResponse", "0-3", flexible="3+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("error_code", INT16, "0+"),
])
