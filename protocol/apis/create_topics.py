"""CreateTopics (key 19): create topics through the controller.

Invariant: declares every version of Kafka 2.8.2's CreateTopicsRequest/CreateTopicsResponse
(0-7, flexible 5+), all advertised.
"""
from __future__ import annotations

from ..schema import ArrayOf, BOOL, INT16, INT32, INT8, STRING, UUID, F, Message

API_KEY = 19
NAME = "CreateTopics"
MIN_VERSION = 0
MAX_VERSION = 7
FLEXIBLE_FROM = 5

Request = Message("CreateTopicsRequest", "0-7", flexible="5+", fields=[
    F("topics", [
        F("name", STRING, "0+"),
        F("num_partitions", INT32, "0+"),
        F("replication_factor", INT16, "0+"),
        F("assignments", [
            F("partition_index", INT32, "0+"),
            F("broker_ids", ArrayOf(INT32), "0+"),
        ], "0+"),
        F("configs", [
            F("name", STRING, "0+"),
            F("value", STRING, "0+", nullable="0+"),
        ], "0+"),
    ], "0+"),
    F("timeout_ms", INT32, "0+", default=60000),
    F("validate_only", BOOL, "1+", default=False),
])

Response = Message("CreateTopicsResponse", "0-7", flexible="5+", fields=[
    F("throttle_time_ms", INT32, "2+"),
    F("topics", [
        F("name", STRING, "0+"),
        F("topic_id", UUID, "7+"),
        F("error_code", INT16, "0+"),
        F("error_message", STRING, "1+", nullable="0+"),
        F("topic_config_error_code", INT16, "5+", tag=0, tagged="5+"),
        F("num_partitions", INT32, "5+", default=-1),
        F("replication_factor", INT16, "5+", default=-1),
        F("configs", [
            F("name", STRING, "5+"),
            F("value", STRING, "5+", nullable="5+"),
            F("read_only", BOOL, "5+"),
            F("config_source", INT8, "5+", default=-1),
            F("is_sensitive", BOOL, "5+"),
        ], "5+", nullable="5+"),
    ], "0+"),
])
