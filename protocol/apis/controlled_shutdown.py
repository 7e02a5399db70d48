"""ControlledShutdown (key 7): broker to controller: move leadership away before shutdown.

Invariant: declares every version of Kafka 2.8.2's ControlledShutdownRequest/ControlledShutdownResponse
(0-3, flexible 3+); the broker advertises 0-3.
"""
from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, F, Message

API_KEY = 7
NAME = "ControlledShutdown"
MIN_VERSION = 0
MAX_VERSION = 3
FLEXIBLE_FROM = 3

Request = Message("ControlledShutdownRequest", "0-3", flexible="3+", fields=[
    F("broker_id", INT32, "0+"),
    F("broker_epoch", INT64, "2+", default=-1),
])

Response = Message("ControlledShutdownResponse", "0-3", flexible="3+", fields=[
    F("error_code", INT16, "0+"),
    F("remaining_partitions", [
        F("topic_name", STRING, "0+"),
        F("partition_index", INT32, "0+"),
    ], "0+"),
])
