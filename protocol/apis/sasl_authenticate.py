"""SaslAuthenticate (key 36): one SASL token from the client, one from the broker.

Invariant: declares every version of Kafka 2.8.2's SaslAuthenticateRequest/SaslAuthenticateResponse
(0-2, flexible 2+); the broker advertises 0-2.
"""
from __future__ import annotations

from ..schema import BYTES, INT16, INT64, STRING, F, Message

API_KEY = 36
NAME = "SaslAuthenticate"
MIN_VERSION = 0
MAX_VERSION = 2
FLEXIBLE_FROM = 2

Request = Message("SaslAuthenticateRequest", "0-2", flexible="2+", fields=[
    F("auth_bytes", BYTES, "0+"),
])

Response = Message("SaslAuthenticateResponse", "0-2", flexible="2+", fields=[
    F("error_code", INT16, "0+"),
    F("error_message", STRING, "0+", nullable="0+"),
    F("auth_bytes", BYTES, "0+"),
    F("session_lifetime_ms", INT64, "1+", default=0),
])
