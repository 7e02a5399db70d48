"""DeleteGroups (key 42): delete empty consumer groups.

Invariant: declares every version of Kafka 2.8.2's DeleteGroupsRequest/DeleteGroupsResponse
(0-2, flexible 2+); all advertised.
"""
from __future__ import annotations

from ..schema import ArrayOf, INT16, INT32, STRING, F, Message

API_KEY = 42
NAME = "DeleteGroups"
MIN_VERSION = 0
MAX_VERSION = 2
FLEXIBLE_FROM = 2

Request = Message("DeleteGroupsRequest", "0-2", flexible="2+", fields=[
    F("groups_names", ArrayOf(STRING), "0+"),
])

Response = Message("DeleteGroupsResponse", "0-2", flexible="2+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("results", [
        F("group_id", STRING, "0+"),
        F("error_code", INT16, "0+"),
    ], "0+"),
])
