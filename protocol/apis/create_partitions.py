"""CreatePartitions (key 37): add partitions to existing topics.

Invariant: declares every version of Kafka 2.8.2's CreatePartitionsRequest/CreatePartitionsResponse
(0-3, flexible 2+); all advertised.
"""
from __future__ import annotations

from ..schema import ArrayOf, BOOL, INT16, INT32, STRING, F, Message

API_KEY = 37
NAME = "CreatePartitions"
MIN_VERSION = 0
MAX_VERSION = 3
FLEXIBLE_FROM = 2

Request = Message("CreatePartitionsRequest", "0-3", flexible="2+", fields=[
    F("topics", [
        F("name", STRING, "0+"),
        F("count", INT32, "0+"),
        F("assignments", [
            F("broker_ids", ArrayOf(INT32), "0+"),
        ], "0+", nullable="0+"),
    ], "0+"),
    F("timeout_ms", INT32, "0+"),
    F("validate_only", BOOL, "0+"),
])

Response = Message("CreatePartitionsResponse", "0-3", flexible="2+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("results", [
        F("name", STRING, "0+"),
        F("error_code", INT16, "0+"),
        F("error_message", STRING, "0+", nullable="0+", default=None),
    ], "0+"),
])
