"""AlterClientQuotas (key 49): set or remove quota configs of user / client-id / ip entities (KIP-546).

Invariant: declares every version of Kafka 2.8.2's AlterClientQuotasRequest/Response (0-1,
flexible 1+), all advertised. An entity name of null is the entity type's default; an op with
``remove`` true ignores its ``value``.
"""
from __future__ import annotations

from ..schema import BOOL, FLOAT64, INT16, INT32, STRING, F, Message

API_KEY = 49
NAME = "AlterClientQuotas"
MIN_VERSION = 0
MAX_VERSION = 1
FLEXIBLE_FROM = 1

_ENTITY = [
    F("entity_type", STRING, "0+"),
    F("entity_name", STRING, "0+", nullable="0+"),
]

Request = Message("AlterClientQuotasRequest", "0-1", flexible="1+", fields=[
    F("entries", [
        F("entity", _ENTITY, "0+"),
        F("ops", [
            F("key", STRING, "0+"),
            F("value", FLOAT64, "0+"),
            F("remove", BOOL, "0+"),
        ], "0+"),
    ], "0+"),
    F("validate_only", BOOL, "0+"),
])

Response = Message("AlterClientQuotasResponse", "0-1", flexible="1+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("entries", [
        F("error_code", INT16, "0+"),
        F("error_message", STRING, "0+", nullable="0+", default=None),
        F("entity", _ENTITY, "0+"),
    ], "0+"),
])
