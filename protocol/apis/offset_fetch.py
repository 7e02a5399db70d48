"""OffsetFetch (key 9): read committed consumer group offsets.

Invariant: declares every version of Kafka 2.8.2's OffsetFetchRequest/OffsetFetchResponse
(0-7, flexible 6+), all advertised.
"""
from __future__ import annotations

from ..schema import ArrayOf, BOOL, INT16, INT32, INT64, STRING, F, Message

API_KEY = 9
NAME = "OffsetFetch"
MIN_VERSION = 0
MAX_VERSION = 7
FLEXIBLE_FROM = 6

Request = Message("OffsetFetchRequest", "0-7", flexible="6+", fields=[
    F("group_id", STRING, "0+"),
    F("topics", [
        F("name", STRING, "0+"),
        F("partition_indexes", ArrayOf(INT32), "0+"),
    ], "0+", nullable="2+"),
    F("require_stable", BOOL, "7+", default=False),
])

Response = Message("OffsetFetchResponse", "0-7", flexible="6+", fields=[
    F("throttle_time_ms", INT32, "3+"),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("committed_offset", INT64, "0+"),
            F("committed_leader_epoch", INT32, "5+", default=-1),
            F("metadata", STRING, "0+", nullable="0+"),
            F("error_code", INT16, "0+"),
        ], "0+"),
    ], "0+"),
    F("error_code", INT16, "2+", default=0),
])
