"""UpdateFeatures (key 57): change the cluster's finalized features (KIP-584).

Invariant: declares every version of Kafka 2.8.2's UpdateFeaturesRequest/Response (0, flexible
0+), all advertised. A ``max_version_level`` below 1 with ``allow_downgrade`` asks to delete the
feature.
"""
from __future__ import annotations

from ..schema import BOOL, INT16, INT32, STRING, F, Message

API_KEY = 57
NAME = "UpdateFeatures"
MIN_VERSION = 0
MAX_VERSION = 0
FLEXIBLE_FROM = 0

Request = Message("UpdateFeaturesRequest", "0", flexible="0+", fields=[
    F("timeout_ms", INT32, "0+", default=60000),
    F("feature_updates", [
        F("feature", STRING, "0+"),
        F("max_version_level", INT16, "0+"),
        F("allow_downgrade", BOOL, "0+"),
    ], "0+"),
])

Response = Message("UpdateFeaturesResponse", "0", flexible="0+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("error_code", INT16, "0+"),
    F("error_message", STRING, "0+", nullable="0+"),
    F("results", [
        F("feature", STRING, "0+"),
        F("error_code", INT16, "0+"),
        F("error_message", STRING, "0+", nullable="0+"),
    ], "0+"),
])
