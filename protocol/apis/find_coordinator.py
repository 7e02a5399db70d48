"""FindCoordinator (key 10): locate the group or transaction coordinator.

Invariant: declares every version of Kafka 2.8.2's FindCoordinatorRequest/FindCoordinatorResponse
(0-3, flexible 3+); all advertised.
"""
from __future__ import annotations

from ..schema import INT16, INT32, INT8, STRING, F, Message

API_KEY = 10
NAME = "FindCoordinator"
MIN_VERSION = 0
MAX_VERSION = 3
FLEXIBLE_FROM = 3

Request = Message("FindCoordinatorRequest", "0-3", flexible="3+", fields=[
    F("key", STRING, "0+"),
    F("key_type", INT8, "1+", default=0),
])

Response = Message("FindCoordinatorResponse", "0-3", flexible="3+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16, "0+"),
    F("error_message", STRING, "1+", nullable="1+"),
    F("node_id", INT32, "0+"),
    F("host", STRING, "0+"),
    F("port", INT32, "0+"),
])
