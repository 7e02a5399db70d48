"""DescribeDelegationToken (key 41): the tokens the requesting principal may see (KIP-48).

Invariant: declares every version of Kafka 2.8.2's DescribeDelegationTokenRequest/Response (0-2,
flexible 2+), all advertised. A null ``owners`` asks for every token; an owner matches a token it
owns or may renew. Each described token carries its HMAC.
"""
from __future__ import annotations

from ..schema import BYTES, INT16, INT32, INT64, STRING, F, Message

API_KEY = 41
NAME = "DescribeDelegationToken"
MIN_VERSION = 0
MAX_VERSION = 2
FLEXIBLE_FROM = 2

Request = Message("DescribeDelegationTokenRequest", "0-2", flexible="2+", fields=[
    F("owners", [
        F("principal_type", STRING, "0+"),
        F("principal_name", STRING, "0+"),
    ], "0+", nullable="0+"),
])

Response = Message("DescribeDelegationTokenResponse", "0-2", flexible="2+", fields=[
    F("error_code", INT16, "0+"),
    F("tokens", [
        F("principal_type", STRING, "0+"),
        F("principal_name", STRING, "0+"),
        F("issue_timestamp", INT64, "0+"),
        F("expiry_timestamp", INT64, "0+"),
        F("max_timestamp", INT64, "0+"),
        F("token_id", STRING, "0+"),
        F("hmac", BYTES, "0+"),
        F("renewers", [
            F("principal_type", STRING, "0+"),
            F("principal_name", STRING, "0+"),
        ], "0+"),
    ], "0+"),
    F("throttle_time_ms", INT32, "0+"),
])
