"""DescribeClientQuotas (key 48): the quota configs of user / client-id / ip entities (KIP-546).

Invariant: declares every version of Kafka 2.8.2's DescribeClientQuotasRequest/Response (0-1,
flexible 1+), all advertised. A filter component's ``match_type`` is MATCH_EXACT (0, ``match``
names the entity), MATCH_DEFAULT (1, the default entity) or MATCH_ANY (2, any named entity).
"""
from __future__ import annotations

from ..schema import BOOL, FLOAT64, INT8, INT16, INT32, STRING, F, Message

API_KEY = 48
NAME = "DescribeClientQuotas"
MIN_VERSION = 0
MAX_VERSION = 1
FLEXIBLE_FROM = 1

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

Request = Message("DescribeClientQuotasRequest", "0-1", flexible="1+", fields=[
    F("components", [
        F("entity_type", STRING, "0+"),
        F("match_type", INT8, "0+"),
        F("match", STRING, "0+", nullable="0+"),
    ], "0+"),
    F("strict", BOOL, "0+"),
])

Response = Message("DescribeClientQuotasResponse", "0-1", flexible="1+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("error_code", INT16, "0+"),
    F("error_message", STRING, "0+", nullable="0+", default=None),
    F("entries", [
        F("entity", [
            F("entity_type", STRING, "0+"),
            F("entity_name", STRING, "0+", nullable="0+"),
        ], "0+"),
        F("values", [
            F("key", STRING, "0+"),
            F("value", FLOAT64, "0+"),
        ], "0+"),
    ], "0+", nullable="0+"),
])
