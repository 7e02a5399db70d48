"""ListOffsets (key 2): look up offsets by timestamp (-1 latest, -2 earliest).

Invariant: declares every version of Kafka 2.8.2's ListOffsetsRequest/ListOffsetsResponse
(0-6, flexible 6+); all advertised.
"""
from __future__ import annotations

from ..schema import ArrayOf, INT16, INT32, INT64, INT8, STRING, F, Message

API_KEY = 2
NAME = "ListOffsets"
MIN_VERSION = 0
MAX_VERSION = 6
FLEXIBLE_FROM = 6

Request = Message("ListOffsetsRequest", "0-6", flexible="6+", fields=[
    F("replica_id", INT32, "0+"),
    F("isolation_level", INT8, "2+"),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("current_leader_epoch", INT32, "4+", default=-1),
            F("timestamp", INT64, "0+"),
            F("max_num_offsets", INT32, "0", default=1),
        ], "0+"),
    ], "0+"),
])

Response = Message("ListOffsetsResponse", "0-6", flexible="6+", fields=[
    F("throttle_time_ms", INT32, "2+"),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("error_code", INT16, "0+"),
            F("old_style_offsets", ArrayOf(INT64), "0"),
            F("timestamp", INT64, "1+", default=-1),
            F("offset", INT64, "1+", default=-1),
            F("leader_epoch", INT32, "4+", default=-1),
        ], "0+"),
    ], "0+"),
])
