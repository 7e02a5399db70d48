"""LeaveGroup (key 13): leave a consumer group.

Invariant: declares every version of Kafka 2.8.2's LeaveGroupRequest/LeaveGroupResponse
(0-4, flexible 4+); all advertised.
"""
from __future__ import annotations

from ..schema import INT16, INT32, STRING, F, Message

API_KEY = 13
NAME = "LeaveGroup"
MIN_VERSION = 0
MAX_VERSION = 4
FLEXIBLE_FROM = 4

Request = Message("LeaveGroupRequest", "0-4", flexible="4+", fields=[
    F("group_id", STRING, "0+"),
    F("member_id", STRING, "0-2"),
    F("members", [
        F("member_id", STRING, "3+"),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
    ], "3+"),
])

Response = Message("LeaveGroupResponse", "0-4", flexible="4+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16, "0+"),
    F("members", [
        F("member_id", STRING, "3+"),
        F("group_instance_id", STRING, "3+", nullable="3+"),
        F("error_code", INT16, "3+"),
    ], "3+"),
])
