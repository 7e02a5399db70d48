"""DescribeConfigs (key 32): read topic and broker configuration.

Invariant: declares every version of Kafka 2.8.2's DescribeConfigsRequest/DescribeConfigsResponse
(0-4, flexible 4+), all advertised.
"""
from __future__ import annotations

from ..schema import ArrayOf, BOOL, INT16, INT32, INT8, STRING, F, Message

API_KEY = 32
NAME = "DescribeConfigs"
MIN_VERSION = 0
MAX_VERSION = 4
FLEXIBLE_FROM = 4

Request = Message("DescribeConfigsRequest", "0-4", flexible="4+", fields=[
    F("resources", [
        F("resource_type", INT8, "0+"),
        F("resource_name", STRING, "0+"),
        F("configuration_keys", ArrayOf(STRING), "0+", nullable="0+"),
    ], "0+"),
    F("include_synonyms", BOOL, "1+", default=False),
    F("include_documentation", BOOL, "3+", default=False),
])

Response = Message("DescribeConfigsResponse", "0-4", flexible="4+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("results", [
        F("error_code", INT16, "0+"),
        F("error_message", STRING, "0+", nullable="0+"),
        F("resource_type", INT8, "0+"),
        F("resource_name", STRING, "0+"),
        F("configs", [
            F("name", STRING, "0+"),
            F("value", STRING, "0+", nullable="0+"),
            F("read_only", BOOL, "0+"),
            F("is_default", BOOL, "0"),
            F("config_source", INT8, "1+", default=-1),
            F("is_sensitive", BOOL, "0+"),
            F("synonyms", [
                F("name", STRING, "1+"),
                F("value", STRING, "1+", nullable="0+"),
                F("source", INT8, "1+"),
            ], "1+"),
            F("config_type", INT8, "3+", default=0),
            F("documentation", STRING, "3+", nullable="0+"),
        ], "0+"),
    ], "0+"),
])
