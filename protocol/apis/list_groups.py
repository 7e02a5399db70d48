"""ListGroups (key 16): list the groups a coordinator knows.

Invariant: declares every version of Kafka 2.8.2's ListGroupsRequest/ListGroupsResponse
(0-4, flexible 3+), all advertised.
"""
from __future__ import annotations

from ..schema import ArrayOf, INT16, INT32, STRING, F, Message

API_KEY = 16
NAME = "ListGroups"
MIN_VERSION = 0
MAX_VERSION = 4
FLEXIBLE_FROM = 3

Request = Message("ListGroupsRequest", "0-4", flexible="3+", fields=[
    F("states_filter", ArrayOf(STRING), "4+"),
])

Response = Message("ListGroupsResponse", "0-4", flexible="3+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16, "0+"),
    F("groups", [
        F("group_id", STRING, "0+"),
        F("protocol_type", STRING, "0+"),
        F("group_state", STRING, "4+"),
    ], "0+"),
])
