"""AlterReplicaLogDirs (key 34): move replicas between a broker's log dirs (KIP-113).

Invariant: declares every version of Kafka 2.8.2's AlterReplicaLogDirsRequest/Response (0-2,
flexible 2+; v1 is v0), all advertised. ``dirs[].path`` is an absolute log dir of the broker the
request is sent to.
"""
from __future__ import annotations

from ..schema import ArrayOf, INT16, INT32, STRING, F, Message

API_KEY = 34
NAME = "AlterReplicaLogDirs"
MIN_VERSION = 0
MAX_VERSION = 2
FLEXIBLE_FROM = 2

Request = Message("AlterReplicaLogDirsRequest", "0-2", flexible="2+", fields=[
    F("dirs", [
        F("path", STRING, "0+"),
        F("topics", [
            F("name", STRING, "0+"),
            F("partitions", ArrayOf(INT32), "0+"),
        ], "0+"),
    ], "0+"),
])

Response = Message("AlterReplicaLogDirsResponse", "0-2", flexible="2+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("results", [
        F("topic_name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("error_code", INT16, "0+"),
        ], "0+"),
    ], "0+"),
])
