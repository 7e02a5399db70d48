"""LeaderAndIsr (key 4): controller to broker: become leader or follower.

Invariant: declares every version of Kafka 2.8.2's LeaderAndIsrRequest/LeaderAndIsrResponse
(0-5, flexible 4+); the broker advertises 0-5.
"""
from __future__ import annotations

from ..schema import ArrayOf, BOOL, INT16, INT32, INT64, INT8, STRING, UUID, F, Message

API_KEY = 4
NAME = "LeaderAndIsr"
MIN_VERSION = 0
MAX_VERSION = 5
FLEXIBLE_FROM = 4

LEADER_AND_ISR_PARTITION_STATE = [
    F("topic_name", STRING, "0-1"),
    F("partition_index", INT32, "0+"),
    F("controller_epoch", INT32, "0+"),
    F("leader", INT32, "0+"),
    F("leader_epoch", INT32, "0+"),
    F("isr", ArrayOf(INT32), "0+"),
    F("zk_version", INT32, "0+"),
    F("replicas", ArrayOf(INT32), "0+"),
    F("adding_replicas", ArrayOf(INT32), "3+"),
    F("removing_replicas", ArrayOf(INT32), "3+"),
    F("is_new", BOOL, "1+", default=False),
]

Request = Message("LeaderAndIsrRequest", "0-5", flexible="4+", fields=[
    F("controller_id", INT32, "0+"),
    F("controller_epoch", INT32, "0+"),
    F("broker_epoch", INT64, "2+", default=-1),
    F("type", INT8, "5+"),
    F("ungrouped_partition_states", LEADER_AND_ISR_PARTITION_STATE, "0-1"),
    F("topic_states", [
        F("topic_name", STRING, "2+"),
        F("topic_id", UUID, "5+"),
        F("partition_states", LEADER_AND_ISR_PARTITION_STATE, "2+"),
    ], "2+"),
    F("live_leaders", [
        F("broker_id", INT32, "0+"),
        F("host_name", STRING, "0+"),
        F("port", INT32, "0+"),
    ], "0+"),
])

LEADER_AND_ISR_PARTITION_ERROR = [
    F("topic_name", STRING, "0-4"),
    F("partition_index", INT32, "0+"),
    F("error_code", INT16, "0+"),
]

Response = Message("LeaderAndIsrResponse", "0-5", flexible="4+", fields=[
    F("error_code", INT16, "0+"),
    F("partition_errors", LEADER_AND_ISR_PARTITION_ERROR, "0-4"),
    F("topics", [
        F("topic_id", UUID, "5+"),
        F("partition_errors", LEADER_AND_ISR_PARTITION_ERROR, "5+"),
    ], "5+"),
])
