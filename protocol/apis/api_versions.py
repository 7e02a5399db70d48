"""ApiVersions (key 18): which API versions the broker supports.

Invariant: declares every version of Kafka 2.8.2's ApiVersionsRequest/ApiVersionsResponse
(0-3, flexible 3+); the broker advertises 0-3.
"""
from __future__ import annotations

from ..schema import INT16, INT32, INT64, STRING, F, Message

API_KEY = 18
NAME = "ApiVersions"
MIN_VERSION = 0
MAX_VERSION = 3
FLEXIBLE_FROM = 3

Request = Message("ApiVersionsRequest", "0-3", flexible="3+", fields=[
    F("client_software_name", STRING, "3+"),
    F("client_software_version", STRING, "3+"),
])

Response = Message("ApiVersionsResponse", "0-3", flexible="3+", fields=[
    F("error_code", INT16, "0+"),
    F("api_keys", [
        F("api_key", INT16, "0+"),
        F("min_version", INT16, "0+"),
        F("max_version", INT16, "0+"),
    ], "0+"),
    F("throttle_time_ms", INT32, "1+"),
    F("supported_features", [
        F("name", STRING, "3+"),
        F("min_version", INT16, "3+"),
        F("max_version", INT16, "3+"),
    ], "3+", tag=0, tagged="3+"),
    F("finalized_features_epoch", INT64, "3+", default=-1, tag=1, tagged="3+"),
    F("finalized_features", [
        F("name", STRING, "3+"),
        F("max_version_level", INT16, "3+"),
        F("min_version_level", INT16, "3+"),
    ], "3+", tag=2, tagged="3+"),
])
