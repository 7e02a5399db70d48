"""OffsetDelete (key 47): delete a group's committed offsets for some partitions (KIP-496).

Invariant: declares every version of Kafka 2.8.2's OffsetDeleteRequest/Response (0 only, not
flexible), all advertised.
"""
from __future__ import annotations

from ..schema import INT16, INT32, STRING, F, Message

API_KEY = 47
NAME = "OffsetDelete"
MIN_VERSION = 0
MAX_VERSION = 0
FLEXIBLE_FROM = None

Request = Message("OffsetDeleteRequest", "0", fields=[
    F("group_id", STRING, "0+"),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
        ], "0+"),
    ], "0+"),
])

Response = Message("OffsetDeleteResponse", "0", fields=[
    F("error_code", INT16, "0+"),
    F("throttle_time_ms", INT32, "0+"),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("error_code", INT16, "0+"),
        ], "0+"),
    ], "0+"),
])
