"""OffsetForLeaderEpoch (key 23): end offset of a leader epoch (follower truncation).

Invariant: declares every version of Kafka 2.8.2's OffsetForLeaderEpochRequest/OffsetForLeaderEpochResponse
(0-4, flexible 4+); all advertised.
"""
from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, F, Message

API_KEY = 23
NAME = "OffsetForLeaderEpoch"
MIN_VERSION = 0
MAX_VERSION = 4
FLEXIBLE_FROM = 4

Request = Message("OffsetForLeaderEpochRequest", "0-4", flexible="4+", fields=[
    F("replica_id", INT32, "3+", default=-2),
    F("topics", [
        F("topic", STRING, "0+"),
        F("partitions", [
            F("partition", INT32, "0+"),
            F("current_leader_epoch", INT32, "2+", default=-1),
            F("leader_epoch", INT32, "0+"),
        ], "0+"),
    ], "0+"),
])

Response = Message("OffsetForLeaderEpochResponse", "0-4", flexible="4+", fields=[
    F("throttle_time_ms", INT32, "2+"),
    F("topics", [
        F("topic", STRING, "0+"),
        F("partitions", [
            F("error_code", INT16, "0+"),
            F("partition", INT32, "0+"),
            F("leader_epoch", INT32, "1+", default=-1),
            F("end_offset", INT64, "0+", default=-1),
        ], "0+"),
    ], "0+"),
])
