"""UpdateMetadata (key 6): controller to broker: refresh the metadata cache.

Invariant: declares every version of Kafka 2.8.2's UpdateMetadataRequest/UpdateMetadataResponse
(0-7, flexible 6+); the broker advertises 0-7.
"""
from __future__ import annotations

from ..schema import ArrayOf, INT16, INT32, INT64, STRING, UUID, F, Message

API_KEY = 6
NAME = "UpdateMetadata"
MIN_VERSION = 0
MAX_VERSION = 7
FLEXIBLE_FROM = 6

UPDATE_METADATA_PARTITION_STATE = [
    F("topic_name", STRING, "0-4"),
    F("partition_index", INT32, "0+"),
    F("controller_epoch", INT32, "0+"),
    F("leader", INT32, "0+"),
    F("leader_epoch", INT32, "0+"),
    F("isr", ArrayOf(INT32), "0+"),
    F("zk_version", INT32, "0+"),
    F("replicas", ArrayOf(INT32), "0+"),
    F("offline_replicas", ArrayOf(INT32), "4+"),
]

Request = Message("UpdateMetadataRequest", "0-7", flexible="6+", fields=[
    F("controller_id", INT32, "0+"),
    F("controller_epoch", INT32, "0+"),
    F("broker_epoch", INT64, "5+", default=-1),
    F("ungrouped_partition_states", UPDATE_METADATA_PARTITION_STATE, "0-4"),
    F("topic_states", [
        F("topic_name", STRING, "5+"),
        F("topic_id", UUID, "7+"),
        F("partition_states", UPDATE_METADATA_PARTITION_STATE, "5+"),
    ], "5+"),
    F("live_brokers", [
        F("id", INT32, "0+"),
        F("v0_host", STRING, "0"),
        F("v0_port", INT32, "0"),
        F("endpoints", [
            F("port", INT32, "1+"),
            F("host", STRING, "1+"),
            F("listener", STRING, "3+"),
            F("security_protocol", INT16, "1+"),
        ], "1+"),
        F("rack", STRING, "2+", nullable="0+"),
    ], "0+"),
])

Response = Message("UpdateMetadataResponse", "0-7", flexible="6+", fields=[
    F("error_code", INT16, "0+"),
])
