"""JoinGroup (key 11): join a consumer group (rebalance, phase one).

Invariant: declares every version of Kafka 2.8.2's JoinGroupRequest/JoinGroupResponse
(0-7, flexible 6+); all advertised.
"""
from __future__ import annotations

from ..schema import BYTES, INT16, INT32, STRING, F, Message

API_KEY = 11
NAME = "JoinGroup"
MIN_VERSION = 0
MAX_VERSION = 7
FLEXIBLE_FROM = 6

Request = Message("JoinGroupRequest", "0-7", flexible="6+", fields=[
    F("group_id", STRING, "0+"),
    F("session_timeout_ms", INT32, "0+"),
    F("rebalance_timeout_ms", INT32, "1+", default=-1),
    F("member_id", STRING, "0+"),
    F("group_instance_id", STRING, "5+", nullable="5+", default=None),
    F("protocol_type", STRING, "0+"),
    F("protocols", [
        F("name", STRING, "0+"),
        F("metadata", BYTES, "0+"),
    ], "0+"),
])

Response = Message("JoinGroupResponse", "0-7", flexible="6+", fields=[
    F("throttle_time_ms", INT32, "2+"),
    F("error_code", INT16, "0+"),
    F("generation_id", INT32, "0+", default=-1),
    F("protocol_type", STRING, "7+", nullable="7+", default=None),
    F("protocol_name", STRING, "0+", nullable="7+"),
    F("leader", STRING, "0+"),
    F("member_id", STRING, "0+"),
    F("members", [
        F("member_id", STRING, "0+"),
        F("group_instance_id", STRING, "5+", nullable="5+", default=None),
        F("metadata", BYTES, "0+"),
    ], "0+"),
])
