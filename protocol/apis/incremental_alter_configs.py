"""IncrementalAlterConfigs (key 44): set, delete, append to or subtract from single configs
(KIP-339).

Invariant: declares every version of Kafka 2.8.2's IncrementalAlterConfigsRequest/Response (0-1,
flexible 1+), all advertised. ``config_operation``: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT.
"""
from __future__ import annotations

from ..schema import BOOL, INT8, INT16, INT32, STRING, F, Message

API_KEY = 44
NAME = "IncrementalAlterConfigs"
MIN_VERSION = 0
MAX_VERSION = 1
FLEXIBLE_FROM = 1

Request = Message("IncrementalAlterConfigsRequest", "0-1", flexible="1+", fields=[
    F("resources", [
        F("resource_type", INT8, "0+"),
        F("resource_name", STRING, "0+"),
        F("configs", [
            F("name", STRING, "0+"),
            F("config_operation", INT8, "0+"),
            F("value", STRING, "0+", nullable="0+"),
        ], "0+"),
    ], "0+"),
    F("validate_only", BOOL, "0+"),
])

Response = Message("IncrementalAlterConfigsResponse", "0-1", flexible="1+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("responses", [
        F("error_code", INT16, "0+"),
        F("error_message", STRING, "0+", nullable="0+"),
        F("resource_type", INT8, "0+"),
        F("resource_name", STRING, "0+"),
    ], "0+"),
])
