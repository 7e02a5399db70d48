"""SaslHandshake (key 17): the client names the SASL mechanism it will authenticate with.

Invariant: declares every version of Kafka 2.8.2's SaslHandshakeRequest/SaslHandshakeResponse
(0-1, never flexible); the broker advertises 0-1. After v0 the client sends its SASL tokens as
bare size-prefixed frames; after v1 it wraps them in SaslAuthenticate requests.
"""
from __future__ import annotations

from ..schema import ArrayOf, INT16, STRING, F, Message

API_KEY = 17
NAME = "SaslHandshake"
MIN_VERSION = 0
MAX_VERSION = 1
FLEXIBLE_FROM = None

Request = Message("SaslHandshakeRequest", "0-1", fields=[
    F("mechanism", STRING, "0+"),
])

Response = Message("SaslHandshakeResponse", "0-1", fields=[
    F("error_code", INT16, "0+"),
    F("mechanisms", ArrayOf(STRING), "0+"),
])
