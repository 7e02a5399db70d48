"""CreateDelegationToken (key 38): a delegation token for the requesting principal (KIP-48).

Invariant: declares every version of Kafka 2.8.2's CreateDelegationTokenRequest/Response (0-2,
flexible 2+), all advertised. A ``max_lifetime_ms`` of -1 (any value <= 0) means the broker's
``delegation.token.max.lifetime.ms``; the token is owned by the principal that asked.
"""
from __future__ import annotations

from ..schema import BYTES, INT16, INT32, INT64, STRING, F, Message

API_KEY = 38
NAME = "CreateDelegationToken"
MIN_VERSION = 0
MAX_VERSION = 2
FLEXIBLE_FROM = 2

Request = Message("CreateDelegationTokenRequest", "0-2", flexible="2+", fields=[
    F("renewers", [
        F("principal_type", STRING, "0+"),
        F("principal_name", STRING, "0+"),
    ], "0+"),
    F("max_lifetime_ms", INT64, "0+"),
])

Response = Message("CreateDelegationTokenResponse", "0-2", flexible="2+", fields=[
    F("error_code", INT16, "0+"),
    F("principal_type", STRING, "0+"),
    F("principal_name", STRING, "0+"),
    F("issue_timestamp_ms", INT64, "0+"),
    F("expiry_timestamp_ms", INT64, "0+"),
    F("max_timestamp_ms", INT64, "0+"),
    F("token_id", STRING, "0+"),
    F("hmac", BYTES, "0+"),
    F("throttle_time_ms", INT32, "0+"),
])
