"""CreateAcls (key 30): add ACL bindings.

Invariant: declares every version of Kafka 2.8.2's CreateAclsRequest/CreateAclsResponse
(0-2, flexible 2+); the broker advertises 0-2. v0 has no pattern type: it means LITERAL (3).
One result per creation, in request order.
"""
from __future__ import annotations

from ..schema import INT16, INT32, INT8, STRING, F, Message

API_KEY = 30
NAME = "CreateAcls"
MIN_VERSION = 0
MAX_VERSION = 2
FLEXIBLE_FROM = 2

Request = Message("CreateAclsRequest", "0-2", flexible="2+", fields=[
    F("creations", [
        F("resource_type", INT8, "0+"),
        F("resource_name", STRING, "0+"),
        F("resource_pattern_type", INT8, "1+", default=3),
        F("principal", STRING, "0+"),
        F("host", STRING, "0+"),
        F("operation", INT8, "0+"),
        F("permission_type", INT8, "0+"),
    ], "0+"),
])

Response = Message("CreateAclsResponse", "0-2", flexible="2+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("results", [
        F("error_code", INT16, "0+"),
        F("error_message", STRING, "0+", nullable="0+"),
    ], "0+"),
])
