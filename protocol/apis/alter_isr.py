"""AlterIsr (key 56): a partition leader asks the controller to change its ISR (KIP-497).

Invariant: declares every version of Kafka 2.8.2's AlterIsrRequest/Response (0, flexible 0+),
all advertised. ``current_isr_version`` is the zk version of the partition's state znode.
"""
from __future__ import annotations

from ..schema import ArrayOf, INT16, INT32, INT64, STRING, F, Message

API_KEY = 56
NAME = "AlterIsr"
MIN_VERSION = 0
MAX_VERSION = 0
FLEXIBLE_FROM = 0

Request = Message("AlterIsrRequest", "0", flexible="0+", fields=[
    F("broker_id", INT32, "0+"),
    F("broker_epoch", INT64, "0+", default=-1),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("leader_epoch", INT32, "0+"),
            F("new_isr", ArrayOf(INT32), "0+"),
            F("current_isr_version", INT32, "0+"),
        ], "0+"),
    ], "0+"),
])

Response = Message("AlterIsrResponse", "0", flexible="0+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("error_code", INT16, "0+"),
    F("topics", [
        F("name", STRING, "0+"),
        F("partitions", [
            F("partition_index", INT32, "0+"),
            F("error_code", INT16, "0+"),
            F("leader_id", INT32, "0+"),
            F("leader_epoch", INT32, "0+"),
            F("isr", ArrayOf(INT32), "0+"),
            F("current_isr_version", INT32, "0+"),
        ], "0+"),
    ], "0+"),
])
