"""DeleteTopics (key 20): delete topics through the controller.

Invariant: declares every version of Kafka 2.8.2's DeleteTopicsRequest/DeleteTopicsResponse
(0-6, flexible 4+), all advertised.
"""
from __future__ import annotations

from ..schema import ArrayOf, INT16, INT32, STRING, UUID, F, Message

API_KEY = 20
NAME = "DeleteTopics"
MIN_VERSION = 0
MAX_VERSION = 6
FLEXIBLE_FROM = 4

Request = Message("DeleteTopicsRequest", "0-6", flexible="4+", fields=[
    F("topics", [
        F("name", STRING, "6+", nullable="6+"),
        F("topic_id", UUID, "6+"),
    ], "6+"),
    F("topic_names", ArrayOf(STRING), "0-5"),
    F("timeout_ms", INT32, "0+"),
])

Response = Message("DeleteTopicsResponse", "0-6", flexible="4+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("responses", [
        F("name", STRING, "0+", nullable="6+"),
        F("topic_id", UUID, "6+"),
        F("error_code", INT16, "0+"),
        F("error_message", STRING, "5+", nullable="5+", default=None),
    ], "0+"),
])
