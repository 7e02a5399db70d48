"""DescribeCluster (key 60): the brokers, the controller and the cluster id (KIP-700).

Invariant: declares every version of Kafka 2.8.2's DescribeClusterRequest/Response (0 only,
flexible from 0), all advertised.
"""
from __future__ import annotations

from ..schema import BOOL, INT16, INT32, STRING, F, Message

API_KEY = 60
NAME = "DescribeCluster"
MIN_VERSION = 0
MAX_VERSION = 0
FLEXIBLE_FROM = 0

Request = Message("DescribeClusterRequest", "0", flexible="0+", fields=[
    F("include_cluster_authorized_operations", BOOL, "0+"),
])

Response = Message("DescribeClusterResponse", "0", flexible="0+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("error_code", INT16, "0+"),
    F("error_message", STRING, "0+", nullable="0+", default=None),
    F("cluster_id", STRING, "0+"),
    F("controller_id", INT32, "0+", default=-1),
    F("brokers", [
        F("broker_id", INT32, "0+"),
        F("host", STRING, "0+"),
        F("port", INT32, "0+"),
        F("rack", STRING, "0+", nullable="0+", default=None),
    ], "0+"),
    F("cluster_authorized_operations", INT32, "0+", default=-2147483648),
])
