"""DeleteAcls (key 31): remove the ACL bindings matching each filter.

Invariant: declares every version of Kafka 2.8.2's DeleteAclsRequest/DeleteAclsResponse
(0-2, flexible 2+); the broker advertises 0-2. v0 has no pattern type: it means LITERAL (3).
One filter result per filter, in request order, listing the bindings it removed.
"""
from __future__ import annotations

from ..schema import INT16, INT32, INT8, STRING, F, Message

API_KEY = 31
NAME = "DeleteAcls"
MIN_VERSION = 0
MAX_VERSION = 2
FLEXIBLE_FROM = 2

Request = Message("DeleteAclsRequest", "0-2", flexible="2+", fields=[
    F("filters", [
        F("resource_type_filter", INT8, "0+"),
        F("resource_name_filter", STRING, "0+", nullable="0+"),
        F("pattern_type_filter", INT8, "1+", default=3),
        F("principal_filter", STRING, "0+", nullable="0+"),
        F("host_filter", STRING, "0+", nullable="0+"),
        F("operation", INT8, "0+"),
        F("permission_type", INT8, "0+"),
    ], "0+"),
])

Response = Message("DeleteAclsResponse", "0-2", flexible="2+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("filter_results", [
        F("error_code", INT16, "0+"),
        F("error_message", STRING, "0+", nullable="0+"),
        F("matching_acls", [
            F("error_code", INT16, "0+"),
            F("error_message", STRING, "0+", nullable="0+"),
            F("resource_type", INT8, "0+"),
            F("resource_name", STRING, "0+"),
            F("pattern_type", INT8, "1+", default=3),
            F("principal", STRING, "0+"),
            F("host", STRING, "0+"),
            F("operation", INT8, "0+"),
            F("permission_type", INT8, "0+"),
        ], "0+"),
    ], "0+"),
])
