"""Kafka 2.8's delegation-token znodes (ZkData's DelegationToken*ZNode): one class per znode,
beside ``zk/znodes.py`` (which holds every other znode; split for the 600-line limit).

Invariant: the bytes are Kafka 2.8's. ``/delegation_token/tokens/<tokenId>`` holds
``{"version":1,"owner":"User%3Aalice","renewers":[...],"issueTimestamp":..,"maxTimestamp":..,
"expiryTimestamp":..,"tokenId":".."}`` with principals sanitized as Kafka's Sanitizer does (never
the HMAC or any credential: every broker derives those from its secret key);
``/delegation_token/token_changes/token_change_<seq>`` holds the changed token's id. Versions up
to 3 (a later Kafka's, with ``tokenRequester``) are read.
"""
from __future__ import annotations

import json

from odradek.protocol.delegation_token import TokenInformation

from .config_entities import desanitize, sanitize

MAX_VERSION = 3


class DelegationTokenAuthZNode:
    path = "/delegation_token"


class DelegationTokensZNode:
    path = "/delegation_token/tokens"


class DelegationTokenInfoZNode:
    @staticmethod
    def path(token_id: str) -> str:
        return f"{DelegationTokensZNode.path}/{token_id}"

    @staticmethod
    def encode(info: TokenInformation) -> bytes:
        return json.dumps({"version": 1, "owner": sanitize(info.owner),
                           "renewers": [sanitize(r) for r in info.renewers],
                           "issueTimestamp": info.issue_timestamp, "maxTimestamp": info.max_timestamp,
                           "expiryTimestamp": info.expiry_timestamp, "tokenId": info.token_id},
                          separators=(",", ":")).encode()

    @staticmethod
    def decode(data: bytes | None) -> TokenInformation | None:
        """None for an absent or empty znode; ValueError for one that is not Kafka's JSON."""
        if not data:
            return None
        try:
            obj = json.loads(data.decode())
            if not 0 < int(obj["version"]) <= MAX_VERSION:
                raise ValueError(f"unsupported delegation token znode version {obj['version']}")
            return TokenInformation(str(obj["tokenId"]), desanitize(obj["owner"]),
                                    tuple(desanitize(r) for r in obj["renewers"]), int(obj["issueTimestamp"]),
                                    int(obj["maxTimestamp"]), int(obj["expiryTimestamp"]))
        except (KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a delegation token znode: {exc!r}") from None


class DelegationTokenChangeNotificationZNode:
    """Token changes: sequential ``token_change_<seq>`` children whose data is the token id."""
    path = "/delegation_token/token_changes"
    prefix = "token_change_"

    @staticmethod
    def encode(token_id: str) -> bytes:
        return token_id.encode("utf-8")

    @staticmethod
    def decode(data: bytes) -> str:
        return data.decode("utf-8")
