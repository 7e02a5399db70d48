"""ElectLeaders (key 43): preferred or unclean leader election for partitions (KIP-183, KIP-460).

Invariant: declares every version of Kafka 2.8.2's ElectLeadersRequest/Response (0-2, flexible
2+), all advertised. ``election_type`` (v1+): 0 preferred, 1 unclean; null ``topic_partitions``
means every partition.
"""
from __future__ import annotations

from ..schema import ArrayOf, INT8, INT16, INT32, STRING, F, Message

API_KEY = 43
NAME = "ElectLeaders"
MIN_VERSION = 0
MAX_VERSION = 2
FLEXIBLE_FROM = 2

Request = Message("ElectLeadersRequest", "0-2", flexible="2+", fields=[
    F("election_type", INT8, "1+", default=0),
    F("topic_partitions", [
        F("topic", STRING, "0+"),
        F("partition_id", ArrayOf(INT32), "0+"),
    ], "0+", nullable="0+"),
    F("timeout_ms", INT32, "0+", default=60000),
])

Response = Message("ElectLeadersResponse", "0-2", flexible="2+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("error_code", INT16, "1+", default=0),
    F("replica_election_results", [
        F("topic", STRING, "0+"),
        F("partition_result", [
            F("partition_id", INT32, "0+"),
            F("error_code", INT16, "0+"),
            F("error_message", STRING, "0+", nullable="0+", default=None),
        ], "0+"),
    ], "0+"),
])
