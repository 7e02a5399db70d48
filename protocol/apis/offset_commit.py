"""OffsetCommit (key 8): commit consumer group offsets.

Invariant: declares every version of Kafka 2.8.2's OffsetCommitRequest/OffsetCommitResponse
(0-8, flexible 8+); all advertised.
"""
from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, F, Message

API_KEY = 8
NAME = "OffsetCommit"
MIN_VERSION = 0
MAX_VERSION = 8
FLEXIBLE_FROM = 8

Request = Message("OffsetCommitRequest", "0-8", flexible="8+", fields=[
    F("group_id", STRING, "0+"),
    F("generation_id", INT32, "1+", default=-1),
    F("member_id", STRING, "1+"),
    F("group_instance_id", STRING, "7+", nullable="7+", default=None),
    F("retention_time_ms", INT64, "2-4", default=-1),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("committed_offset", INT64, "0+"),
            F("committed_leader_epoch", INT32, "6+", default=-1),
            F("commit_timestamp", INT64, "1", default=-1),
            F("committed_metadata", STRING, "0+", nullable="0+"),
        ], "0+"),
    ], "0+"),
])

Response = Message("OffsetCommitResponse", "0-8", flexible="8+", fields=[
    F("throttle_time_ms", INT32, "3+"),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("error_code", INT16, "0+"),
        ], "0+"),
    ], "0+"),
])
