"""RenewDelegationToken (key 39): the token with this HMAC renewed by its owner or a renewer (KIP-48).

Invariant: declares every version of Kafka 2.8.2's RenewDelegationTokenRequest/Response (0-2,
flexible 2+), all advertised. The new expiry is now + the period, at most the token's max
timestamp; a negative period means the broker's delegation.token.expiry.time.ms.
"""
from __future__ import annotations

from ..schema import BYTES, INT16, INT32, INT64, F, Message

API_KEY = 39
NAME = "RenewDelegationToken"
MIN_VERSION = 0
MAX_VERSION = 2
FLEXIBLE_FROM = 2

Request = Message("RenewDelegationTokenRequest", "0-2", flexible="2+", fields=[
    F("hmac", BYTES, "0+"),
    F("renew_period_ms", INT64, "0+"),
])

Response = Message("RenewDelegationTokenResponse", "0-2", flexible="2+", fields=[
    F("error_code", INT16, "0+"),
    F("expiry_timestamp_ms", INT64, "0+"),
    F("throttle_time_ms", INT32, "0+"),
])
