"""DescribeProducers (key 61): the active producers of partitions (KIP-664).

Invariant: declares every version of Kafka 2.8.2's DescribeProducersRequest/Response (0, flexible
0+), all advertised.
"""
from __future__ import annotations

from ..schema import ArrayOf, INT16, INT32, INT64, STRING, F, Message

API_KEY = 61
NAME = "DescribeProducers"
MIN_VERSION = 0
MAX_VERSION = 0
FLEXIBLE_FROM = 0

Request = Message("DescribeProducersRequest", "0", flexible="0+", fields=[
    F("topics", [
        F("name", STRING, "0+"),
        F("partition_indexes", ArrayOf(INT32), "0+"),
    ], "0+"),
])

Response = Message("DescribeProducersResponse", "0", flexible="0+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("error_code", INT16, "0+"),
            F("error_message", STRING, "0+", nullable="0+", default=None),
            F("active_producers", [
                F("producer_id", INT64, "0+"),
                F("producer_epoch", INT32, "0+"),
                F("last_sequence", INT32, "0+", default=-1),
                F("last_timestamp", INT64, "0+", default=-1),
                F("coordinator_epoch", INT32, "0+"),
                F("current_txn_start_offset", INT64, "0+", default=-1),
            ], "0+"),
        ], "0+"),
    ], "0+"),
])
