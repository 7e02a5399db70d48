"""DescribeGroups (key 15): describe consumer groups and their members.

Invariant: declares every version of Kafka 2.8.2's DescribeGroupsRequest/DescribeGroupsResponse
(0-5, flexible 5+); all advertised.
"""
from __future__ import annotations

from ..schema import ArrayOf, BOOL, BYTES, INT16, INT32, STRING, F, Message

API_KEY = 15
NAME = "DescribeGroups"
MIN_VERSION = 0
MAX_VERSION = 5
FLEXIBLE_FROM = 5

Request = Message("DescribeGroupsRequest", "0-5", flexible="5+", fields=[
    F("groups", ArrayOf(STRING), "0+"),
    F("include_authorized_operations", BOOL, "3+"),
])

Response = Message("DescribeGroupsResponse", "0-5", flexible="5+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("groups", [
        F("error_code", INT16, "0+"),
        F("group_id", STRING, "0+"),
        F("group_state", STRING, "0+"),
        F("protocol_type", STRING, "0+"),
        F("protocol_data", STRING, "0+"),
        F("members", [
            F("member_id", STRING, "0+"),
            F("group_instance_id", STRING, "4+", nullable="4+", default=None),
            F("client_id", STRING, "0+"),
            F("client_host", STRING, "0+"),
            F("member_metadata", BYTES, "0+"),
            F("member_assignment", BYTES, "0+"),
        ], "0+"),
        F("authorized_operations", INT32, "3+", default=-2147483648),
    ], "0+"),
])
