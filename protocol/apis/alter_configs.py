"""AlterConfigs (key 33): replace a topic's or broker's whole set of config overrides.

Invariant: declares every version of Kafka 2.8.2's AlterConfigsRequest/Response (0-2, flexible
2+), all advertised.
"""
from __future__ import annotations

from ..schema import BOOL, INT8, INT16, INT32, STRING, F, Message

API_KEY = 33
NAME = "AlterConfigs"
MIN_VERSION = 0
MAX_VERSION = 2
FLEXIBLE_FROM = 2

Request = Message("AlterConfigsRequest", "0-2", flexible="2+", fields=[
    F("resources", [
        F("resource_type", INT8, "0+"),
        F("resource_name", STRING, "0+"),
        F("configs", [
            F("name", STRING, "0+"),
            F("value", STRING, "0+", nullable="0+"),
        ], "0+"),
    ], "0+"),
    F("validate_only", BOOL, "0+"),
])

Response = Message("AlterConfigsResponse", "0-2", flexible="2+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("responses", [
        F("error_code", INT16, "0+"),
        F("error_message", STRING, "0+", nullable="0+"),
        F("resource_type", INT8, "0+"),
        F("resource_name", STRING, "0+"),
    ], "0+"),
])
