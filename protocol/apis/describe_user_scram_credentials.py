"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms (and iterations) users have.

Invariant: declares every version of Kafka 2.8.2's DescribeUserScramCredentialsRequest/Response
(0 only, flexible from 0); the broker advertises 0. A null or empty ``users`` array asks for
every user; the response never carries a salt, key or password, only mechanism and iterations.
"""
from __future__ import annotations

from ..schema import INT8, INT16, INT32, STRING, F, Message

API_KEY = 50
NAME = "DescribeUserScramCredentials"
MIN_VERSION = 0
MAX_VERSION = 0
FLEXIBLE_FROM = 0

Request = Message("DescribeUserScramCredentialsRequest", "0", flexible="0+", fields=[
    F("users", [
        F("name", STRING, "0+"),
    ], "0+", nullable="0+"),
])

Response = Message("DescribeUserScramCredentialsResponse", "0", flexible="0+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("error_code", INT16, "0+"),
    F("error_message", STRING, "0+", nullable="0+", default=None),
    F("results", [
        F("user", STRING, "0+"),
        F("error_code", INT16, "0+"),
        F("error_message", STRING, "0+", nullable="0+", default=None),
        F("credential_infos", [
            F("mechanism", INT8, "0+"),
            F("iterations", INT32, "0+"),
        ], "0+"),
    ], "0+"),
])
