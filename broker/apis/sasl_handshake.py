"""SaslHandshake (key 17) once a connection is past authentication, or on a listener without SASL.

Invariant: a SASL listener's connections reach this module only after they authenticated
(``broker/security/sasl_server.py`` serves the handshake before that), so every request here
is out of place: ILLEGAL_SASL_STATE (34), listing the mechanisms the listener enables, as Kafka
answers.
"""
from __future__ import annotations

from odradek.protocol.apis import sasl_handshake as API
from odradek.protocol.errors import ErrorCode

MIN_VERSION = 0
MAX_VERSION = 1


def _mechanisms(ctx, listener: str) -> list[str]:
    if not ctx.config.security_protocol(listener).startswith("SASL_"):
        return []
    return list(ctx.config.listener_value(listener, "sasl.enabled.mechanisms"))


def handle(ctx, rc, req) -> dict:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": _mechanisms(ctx, rc.listener)}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"error_code": int(code), "mechanisms": []}
