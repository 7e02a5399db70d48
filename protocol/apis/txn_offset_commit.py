"""TxnOffsetCommit (key 28): commit consumer offsets inside a transaction.

Invariant: declares every version of Kafka 2.8.2's TxnOffsetCommitRequest/Response
(0-3, flexible 3+); the broker advertises 0-3.
"""
from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, F, Message

API_KEY = 28
NAME = "TxnOffsetCommit"
MIN_VERSION = 0
MAX_VERSION = 3
FLEXIBLE_FROM = 3

Request = Message("TxnOffsetCommitRequest", "0-3", flexible="3+", fields=[
    F("transactional_id", STRING, "0+"),
    F("group_id", STRING, "0+"),
    F("producer_id", INT64, "0+"),
    F("producer_epoch", INT16, "0+"),
    F("generation_id", INT32, "3+", default=-1),
    F("member_id", STRING, "3+", default=""),
    F("group_instance_id", STRING, "3+", nullable="3+", default=None),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("committed_offset", INT64, "0+"),
            F("committed_leader_epoch", INT32, "2+", default=-1),
            F("committed_metadata", STRING, "0+", nullable="0+"),
        ], "0+"),
    ], "0+"),
])

Response = Message("TxnOffsetCommitResponse", "0-3", flexible="3+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("error_code", INT16, "0+"),
        ], "0+"),
    ], "0+"),
])
