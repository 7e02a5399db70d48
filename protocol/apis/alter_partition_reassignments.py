"""AlterPartitionReassignments (key 45): start or cancel partition reassignments (KIP-455).

Invariant: declares Kafka 2.8.2's only version (0, flexible), advertised. A null ``replicas``
cancels the partition's pending reassignment.
"""
from __future__ import annotations

from ..schema import ArrayOf, INT16, INT32, STRING, F, Message

API_KEY = 45
NAME = "AlterPartitionReassignments"
MIN_VERSION = 0
MAX_VERSION = 0
FLEXIBLE_FROM = 0

Request = Message("AlterPartitionReassignmentsRequest", "0", flexible="0+", fields=[
    F("timeout_ms", INT32, "0+", default=60000),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("replicas", ArrayOf(INT32), "0+", nullable="0+", default=None),
        ], "0+"),
    ], "0+"),
])

Response = Message("AlterPartitionReassignmentsResponse", "0", flexible="0+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("error_code", INT16, "0+"),
    F("error_message", STRING, "0+", nullable="0+", default=None),
    F("responses", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("error_code", INT16, "0+"),
            F("error_message", STRING, "0+", nullable="0+", default=None),
        ], "0+"),
    ], "0+"),
])
