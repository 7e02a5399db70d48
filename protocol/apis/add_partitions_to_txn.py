"""AddPartitionsToTxn (key 24): add partitions to the producer's ongoing transaction.

Invariant: declares every version of Kafka 2.8.2's AddPartitionsToTxnRequest/Response
(0-3, flexible 3+); the broker advertises 0-3.
"""
from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, ArrayOf, F, Message

API_KEY = 24
NAME = "AddPartitionsToTxn"
MIN_VERSION = 0
MAX_VERSION = 3
FLEXIBLE_FROM = 3

Request = Message("AddPartitionsToTxnRequest", "0-3", flexible="3+", fields=[
    F("transactional_id", STRING, "0+"),
    F("producer_id", INT64, "0+"),
    F("producer_epoch", INT16, "0+"),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", ArrayOf(INT32), "0+"),
    ], "0+"),
])

Response = Message("AddPartitionsToTxnResponse", "0-3", flexible="3+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("results", [
        F("name", STRING, "0+"),
        F("results", [
            F("partition_index", INT32, "0+"),
            F("error_code", INT16, "0+"),
        ], "0+"),
    ], "0+"),
])
