"""ExpireDelegationToken (key 40): the token with this HMAC expired by its owner or a renewer (KIP-48).

Invariant: declares every version of Kafka 2.8.2's ExpireDelegationTokenRequest/Response (0-2,
flexible 2+), all advertised. The new expiry is now + the period, at most the token's max
timestamp; a negative period expires the token at once.
"""
from __future__ import annotations

from ..schema import BYTES, INT16, INT32, INT64, F, Message

API_KEY = 40
NAME = "ExpireDelegationToken"
MIN_VERSION = 0
MAX_VERSION = 2
FLEXIBLE_FROM = 2

Request = Message("ExpireDelegationTokenRequest", "0-2", flexible="2+", fields=[
    F("hmac", BYTES, "0+"),
    F("expiry_time_period_ms", INT64, "0+"),
])

Response = Message("ExpireDelegationTokenResponse", "0-2", flexible="2+", fields=[
    F("error_code", INT16, "0+"),
    F("expiry_timestamp_ms", INT64, "0+"),
    F("throttle_time_ms", INT32, "0+"),
])
