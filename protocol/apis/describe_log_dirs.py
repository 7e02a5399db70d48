"""DescribeLogDirs (key 35): a broker's log dirs and the size of each partition in them (KIP-113).

Invariant: declares every version of Kafka 2.8.2's DescribeLogDirsRequest/Response (0-2, flexible
2+), all advertised. Null ``topics``: every partition.
"""
from __future__ import annotations

from ..schema import ArrayOf, BOOL, INT16, INT32, INT64, STRING, F, Message

API_KEY = 35
NAME = "DescribeLogDirs"
MIN_VERSION = 0
MAX_VERSION = 2
FLEXIBLE_FROM = 2

Request = Message("DescribeLogDirsRequest", "0-2", flexible="2+", fields=[
    F("topics", [
        F("topic", STRING, "0+"),
        F("partition_index", ArrayOf(INT32), "0+"),
    ], "0+", nullable="0+"),
])

Response = Message("DescribeLogDirsResponse", "0-2", flexible="2+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("results", [
        F("error_code", INT16, "0+"),
        F("log_dir", STRING, "0+"),
        F("topics", [
            F("name", STRING, "0+"),
            F("partitions", [
                F("partition_index", INT32, "0+"),
                F("partition_size", INT64, "0+"),
                F("offset_lag", INT64, "0+"),
                F("is_future_key", BOOL, "0+"),
            ], "0+"),
        ], "0+"),
    ], "0+"),
])
