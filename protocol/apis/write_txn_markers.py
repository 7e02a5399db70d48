"""WriteTxnMarkers (key 27): the transaction coordinator asks partition leaders to
append commit/abort markers.

Invariant: declares every version of Kafka 2.8.2's WriteTxnMarkersRequest/Response
(0-1, flexible 1+); the broker advertises 0-1.
"""
from __future__ import annotations

from ..schema import BOOL, INT16, INT32, INT64, STRING, ArrayOf, F, Message

API_KEY = 27
NAME = "WriteTxnMarkers"
MIN_VERSION = 0
MAX_VERSION = 1
FLEXIBLE_FROM = 1

Request = Message("WriteTxnMarkersRequest", "0-1", flexible="1+", fields=[
    F("markers", [
        F("producer_id", INT64, "0+"),
        F("producer_epoch", INT16, "0+"),
        F("transaction_result", BOOL, "0+"),
        F("topics", [
            F("name", STRING, "0+"),
            F("partition_indexes", ArrayOf(INT32), "0+"),
        ], "0+"),
        F("coordinator_epoch", INT32, "0+"),
    ], "0+"),
])

Response = Message("WriteTxnMarkersResponse", "0-1", flexible="1+", fields=[
    F("markers", [
        F("producer_id", INT64, "0+"),
        F("topics", [
            F("name", STRING, "0+"),
            F("partitions", [
                F("partition_index", INT32, "0+"),
                F("error_code", INT16, "0+"),
            ], "0+"),
        ], "0+"),
    ], "0+"),
])
