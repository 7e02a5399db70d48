"""StopReplica (key 5): controller to broker: stop (and maybe delete) replicas.

Invariant: declares every version of Kafka 2.8.2's StopReplicaRequest/StopReplicaResponse
(0-3, flexible 2+); the broker advertises 0-3.
"""
from __future__ import annotations

from ..schema import ArrayOf, BOOL, INT16, INT32, INT64, STRING, F, Message

API_KEY = 5
NAME = "StopReplica"
MIN_VERSION = 0
MAX_VERSION = 3
FLEXIBLE_FROM = 2

Request = Message("StopReplicaRequest", "0-3", flexible="2+", fields=[
    F("controller_id", INT32, "0+"),
    F("controller_epoch", INT32, "0+"),
    F("broker_epoch", INT64, "1+", default=-1),
    F("delete_partitions", BOOL, "0-2"),
    F("ungrouped_partitions", [
        F("topic_name", STRING, "0"),
        F("partition_index", INT32, "0"),
    ], "0"),
    F("topics", [
        F("name", STRING, "1-2"),
        F("partition_indexes", ArrayOf(INT32), "1-2"),
    ], "1-2"),
    F("topic_states", [
        F("topic_name", STRING, "3+"),
        F("partition_states", [
            F("partition_index", INT32, "3+"),
            F("leader_epoch", INT32, "3+", default=-1),
            F("delete_partition", BOOL, "3+"),
        ], "3+"),
    ], "3+"),
])

Response = Message("StopReplicaResponse", "0-3", flexible="2+", fields=[
    F("error_code", INT16, "0+"),
    F("partition_errors", [
        F("topic_name", STRING, "0+"),
        F("partition_index", INT32, "0+"),
        F("error_code", INT16, "0+"),
    ], "0+"),
])
