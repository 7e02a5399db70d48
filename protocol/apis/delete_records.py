"""DeleteRecords (key 21): move partitions' log start offsets forward (KIP-107).

Invariant: declares every version of Kafka 2.8.2's DeleteRecordsRequest/Response (0-2, flexible
2+), all advertised. An ``offset`` of -1 means the partition's high watermark.
"""
from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, F, Message

API_KEY = 21
NAME = "DeleteRecords"
MIN_VERSION = 0
MAX_VERSION = 2
FLEXIBLE_FROM = 2

Request = Message("DeleteRecordsRequest", "0-2", flexible="2+", fields=[
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("offset", INT64, "0+"),
        ], "0+"),
    ], "0+"),
    F("timeout_ms", INT32, "0+"),
])

Response = Message("DeleteRecordsResponse", "0-2", flexible="2+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("low_watermark", INT64, "0+"),
            F("error_code", INT16, "0+"),
        ], "0+"),
    ], "0+"),
])
