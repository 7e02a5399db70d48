"""Fetch (key 1): read record batches (consumers and follower replicas).

Invariant: declares every version of Kafka 2.8.2's FetchRequest/FetchResponse
(0-12, flexible 12+), all advertised.
"""
from __future__ import annotations

from ..schema import ArrayOf, INT16, INT32, INT64, INT8, RECORDS, STRING, StructOf, F, Message

API_KEY = 1
NAME = "Fetch"
MIN_VERSION = 0
MAX_VERSION = 12
FLEXIBLE_FROM = 12

Request = Message("FetchRequest", "0-12", flexible="12+", fields=[
    F("cluster_id", STRING, "12+", nullable="12+", default=None, tag=0, tagged="12+"),
    F("replica_id", INT32, "0+"),
    F("max_wait_ms", INT32, "0+"),
    F("min_bytes", INT32, "0+"),
    F("max_bytes", INT32, "3+", default=0x7fffffff),
    F("isolation_level", INT8, "4+", default=0),
    F("session_id", INT32, "7+", default=0),
    F("session_epoch", INT32, "7+", default=-1),
    F("topics", [
        F("topic", STRING, "0+"),
        F("partitions", [
            F("partition", INT32, "0+"),
            F("current_leader_epoch", INT32, "9+", default=-1),
            F("fetch_offset", INT64, "0+"),
            F("last_fetched_epoch", INT32, "12+", default=-1),
            F("log_start_offset", INT64, "5+", default=-1),
            F("partition_max_bytes", INT32, "0+"),
        ], "0+"),
    ], "0+"),
    F("forgotten_topics_data", [
        F("topic", STRING, "7+"),
        F("partitions", ArrayOf(INT32), "7+"),
    ], "7+"),
    F("rack_id", STRING, "11+", default=''),
])

Response = Message("FetchResponse", "0-12", flexible="12+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16, "7+"),
    F("session_id", INT32, "7+", default=0),
    F("responses", [
        F("topic", STRING, "0+"),
        F("partition_responses", [
            F("partition", INT32, "0+"),
            F("error_code", INT16, "0+"),
            F("high_watermark", INT64, "0+"),
            F("last_stable_offset", INT64, "4+", default=-1),
            F("log_start_offset", INT64, "5+", default=-1),
            F("diverging_epoch", StructOf([
                F("epoch", INT32, "12+", default=-1),
                F("end_offset", INT64, "12+", default=-1),
            ]), "12+", tag=0, tagged="12+"),
            F("current_leader", StructOf([
                F("leader_id", INT32, "12+", default=-1),
                F("leader_epoch", INT32, "12+", default=-1),
            ]), "12+", tag=1, tagged="12+"),
            F("snapshot_id", StructOf([
                F("end_offset", INT64, "0+", default=-1),
                F("epoch", INT32, "0+", default=-1),
            ]), "12+", tag=2, tagged="12+"),
            F("aborted_transactions", [
                F("producer_id", INT64, "4+"),
                F("first_offset", INT64, "4+"),
            ], "4+", nullable="4+"),
            F("preferred_read_replica", INT32, "11+", default=-1),
            F("record_set", RECORDS, "0+", nullable="0+"),
        ], "0+"),
    ], "0+"),
])
