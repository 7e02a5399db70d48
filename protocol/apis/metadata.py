"""Metadata (key 3): brokers, topics, partitions and leaders.

Invariant: declares every version of Kafka 2.8.2's MetadataRequest/MetadataResponse
(0-11, flexible 9+), all advertised.
"""
from __future__ import annotations

from ..schema import ArrayOf, BOOL, INT16, INT32, STRING, UUID, F, Message

API_KEY = 3
NAME = "Metadata"
MIN_VERSION = 0
MAX_VERSION = 11
FLEXIBLE_FROM = 9

Request = Message("MetadataRequest", "0-11", flexible="9+", fields=[
    F("topics", [
        F("topic_id", UUID, "10+"),
        F("name", STRING, "0+", nullable="10+"),
    ], "0+", nullable="1+"),
    F("allow_auto_topic_creation", BOOL, "4+", default=True),
    F("include_cluster_authorized_operations", BOOL, "8-10"),
    F("include_topic_authorized_operations", BOOL, "8+"),
])

Response = Message("MetadataResponse", "0-11", flexible="9+", fields=[
    F("throttle_time_ms", INT32, "3+"),
    F("brokers", [
        F("node_id", INT32, "0+"),
        F("host", STRING, "0+"),
        F("port", INT32, "0+"),
        F("rack", STRING, "1+", nullable="1+", default=None),
    ], "0+"),
    F("cluster_id", STRING, "2+", nullable="2+", default=None),
    F("controller_id", INT32, "1+", default=-1),
    F("topics", [
        F("error_code", INT16, "0+"),
        F("name", STRING, "0+"),
        F("topic_id", UUID, "10+"),
        F("is_internal", BOOL, "1+", default=False),
        F("partitions", [
            F("error_code", INT16, "0+"),
            F("partition_index", INT32, "0+"),
            F("leader_id", INT32, "0+"),
            F("leader_epoch", INT32, "7+", default=-1),
            F("replica_nodes", ArrayOf(INT32), "0+"),
            F("isr_nodes", ArrayOf(INT32), "0+"),
            F("offline_replicas", ArrayOf(INT32), "5+"),
        ], "0+"),
        F("topic_authorized_operations", INT32, "8+", default=-2147483648),
    ], "0+"),
    F("cluster_authorized_operations", INT32, "8-10", default=-2147483648),
])
