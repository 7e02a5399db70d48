"""SyncGroup (key 14): distribute assignments (rebalance, phase two).

Invariant: declares every version of Kafka 2.8.2's SyncGroupRequest/SyncGroupResponse
(0-5, flexible 4+); all advertised.
"""
from __future__ import annotations

from ..schema import BYTES, INT16, INT32, STRING, F, Message

API_KEY = 14
NAME = "SyncGroup"
MIN_VERSION = 0
MAX_VERSION = 5
FLEXIBLE_FROM = 4

Request = Message("SyncGroupRequest", "0-5", flexible="4+", fields=[
    F("group_id", STRING, "0+"),
    F("generation_id", INT32, "0+"),
    F("member_id", STRING, "0+"),
    F("group_instance_id", STRING, "3+", nullable="3+", default=None),
    F("protocol_type", STRING, "5+", nullable="5+", default=None),
    F("protocol_name", STRING, "5+", nullable="5+", default=None),
    F("assignments", [
        F("member_id", STRING, "0+"),
        F("assignment", BYTES, "0+"),
    ], "0+"),
])

Response = Message("SyncGroupResponse", "0-5", flexible="4+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16, "0+"),
    F("protocol_type", STRING, "5+", nullable="5+", default=None),
    F("protocol_name", STRING, "5+", nullable="5+", default=None),
    F("assignment", BYTES, "0+"),
])
