"""Heartbeat (key 12): keep a group membership alive.

Invariant: declares every version of Kafka 2.8.2's HeartbeatRequest/HeartbeatResponse
(0-4, flexible 4+); all advertised.
"""
from __future__ import annotations

from ..schema import INT16, INT32, STRING, F, Message

API_KEY = 12
NAME = "Heartbeat"
MIN_VERSION = 0
MAX_VERSION = 4
FLEXIBLE_FROM = 4

Request = Message("HeartbeatRequest", "0-4", flexible="4+", fields=[
    F("group_id", STRING, "0+"),
    F("generation_id", INT32, "0+"),
    F("member_id", STRING, "0+"),
    F("group_instance_id", STRING, "3+", nullable="3+", default=None),
])

Response = Message("HeartbeatResponse", "0-4", flexible="4+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16, "0+"),
])
