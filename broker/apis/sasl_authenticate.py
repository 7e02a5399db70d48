"""SaslAuthenticate (key 36) once a connection is past authentication, or on a listener without SASL.

Invariant: tokens of an exchange in progress never reach this module (the connection's
``SaslAuthenticator`` takes them); one that arrives here is out of place and gets
ILLEGAL_SASL_STATE (34). Re-authentication (KIP-368, ``connections.max.reauth.ms``) is not
built.
"""
from __future__ import annotations

from odradek.protocol.apis import sasl_authenticate as API
from odradek.protocol.errors import ErrorCode

MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, rc, req) -> dict:
    return error_response(req, rc.api_version, ErrorCode.ILLEGAL_SASL_STATE)


def error_response(req, version: int, code: ErrorCode) -> dict:
    message = "SaslAuthenticate is only served during SASL authentication" \
        if code == ErrorCode.ILLEGAL_SASL_STATE else None
    return {"error_code": int(code), "error_message": message, "auth_bytes": b"", "session_lifetime_ms": 0}
