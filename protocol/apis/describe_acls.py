"""DescribeAcls (key 29): the ACLs matching one filter.

Invariant: declares every version of Kafka 2.8.2's DescribeAclsRequest/DescribeAclsResponse
(0-2, flexible 2+); the broker advertises 0-2. v0 has no pattern type: it means LITERAL (3).
Codes are those of ``odradek.protocol.acl``.
"""
from __future__ import annotations

from ..schema import INT16, INT32, INT8, STRING, F, Message

API_KEY = 29
NAME = "DescribeAcls"
MIN_VERSION = 0
MAX_VERSION = 2
FLEXIBLE_FROM = 2

Request = Message("DescribeAclsRequest", "0-2", flexible="2+", fields=[
    F("resource_type_filter", INT8, "0+"),
    F("resource_name_filter", STRING, "0+", nullable="0+"),
    F("pattern_type_filter", INT8, "1+", default=3),
    F("principal_filter", STRING, "0+", nullable="0+"),
    F("host_filter", STRING, "0+", nullable="0+"),
    F("operation", INT8, "0+"),
    F("permission_type", INT8, "0+"),
])

Response = Message("DescribeAclsResponse", "0-2", flexible="2+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("error_code", INT16, "0+"),
    F("error_message", STRING, "0+", nullable="0+"),
    F("resources", [
        F("resource_type", INT8, "0+"),
        F("resource_name", STRING, "0+"),
        F("pattern_type", INT8, "1+", default=3),
        F("acls", [
            F("principal", STRING, "0+"),
            F("host", STRING, "0+"),
            F("operation", INT8, "0+"),
            F("permission_type", INT8, "0+"),
        ], "0+"),
    ], "0+"),
])
