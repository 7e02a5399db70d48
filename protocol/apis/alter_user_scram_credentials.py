"""AlterUserScramCredentials (key 51): delete or upsert users' SCRAM credentials.

Invariant: declares every version of Kafka 2.8.2's AlterUserScramCredentialsRequest/Response
(0 only, flexible from 0); the broker advertises 0. An upsertion carries the salt and the
salted password (PBKDF2 output, computed by the client), never the password itself.
``MECHANISM_BY_TYPE`` is Kafka's ScramMechanism byte for the wire (0 is UNKNOWN).
"""
from __future__ import annotations

from ..schema import BYTES, INT8, INT16, INT32, STRING, F, Message

API_KEY = 51
NAME = "AlterUserScramCredentials"
MIN_VERSION = 0
MAX_VERSION = 0
FLEXIBLE_FROM = 0

MECHANISM_BY_TYPE: dict[int, str] = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_BY_MECHANISM: dict[str, int] = {name: t for t, name in MECHANISM_BY_TYPE.items()}

Request = Message("AlterUserScramCredentialsRequest", "0", flexible="0+", fields=[
    F("deletions", [
        F("name", STRING, "0+"),
        F("mechanism", INT8, "0+"),
    ], "0+"),
    F("upsertions", [
        F("name", STRING, "0+"),
        F("mechanism", INT8, "0+"),
        F("iterations", INT32, "0+"),
        F("salt", BYTES, "0+"),
        F("salted_password", BYTES, "0+"),
    ], "0+"),
])

Response = Message("AlterUserScramCredentialsResponse", "0", flexible="0+", fields=[
    F("throttle_time_ms", INT32, "0+"),
    F("results", [
        F("user", STRING, "0+"),
        F("error_code", INT16, "0+"),
        F("error_message", STRING, "0+", nullable="0+", default=None),
    ], "0+"),
])
