"""Produce (key 0): write record batches to partition leaders.

Invariant: declares every version of Kafka 2.8.2's ProduceRequest/ProduceResponse
(0-9, flexible 9+), all advertised.
"""
from __future__ import annotations

from ..schema import INT16, INT32, INT64, RECORDS, STRING, F, Message

API_KEY = 0
NAME = "Produce"
MIN_VERSION = 0
MAX_VERSION = 9
FLEXIBLE_FROM = 9

Request = Message("ProduceRequest", "0-9", flexible="9+", fields=[
    F("transactional_id", STRING, "3+", nullable="3+", default=None),
    F("acks", INT16, "0+"),
    F("timeout_ms", INT32, "0+"),
    F("topic_data", [
        F("name", STRING, "0+"),
        F("partition_data", [
            F("index", INT32, "0+"),
            F("records", RECORDS, "0+", nullable="0+"),
        ], "0+"),
    ], "0+"),
])

Response = Message("ProduceResponse", "0-9", flexible="9+", fields=[
    F("responses", [
        F("name", STRING, "0+"),
        F("partition_responses", [
            F("index", INT32, "0+"),
            F("error_code", INT16, "0+"),
            F("base_offset", INT64, "0+"),
            F("log_append_time_ms", INT64, "2+", default=-1),
            F("log_start_offset", INT64, "5+", default=-1),
            F("record_errors", [
                F("batch_index", INT32, "8+"),
                F("batch_index_error_message", STRING, "8+", nullable="8+", default=None),
            ], "8+"),
            F("error_message", STRING, "8+", nullable="8+", default=None),
        ], "0+"),
    ], "0+"),
    F("throttle_time_ms", INT32, "1+", default=0),
])
