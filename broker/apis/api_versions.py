"""ApiVersions (key 18): what this broker handles, straight from the handler registry.

Invariant: the api_keys list is ``advertised_api_versions()`` (only what we handle);
v3's client software name/version must match Kafka's regex or the answer is
INVALID_REQUEST; v3 answers carry the features (KIP-584, ``broker/features.py``): none supported,
the finalized ones and their epoch as /feature last said (epoch -1, left out, without one);
throttle is always 0. Unsupported versions never reach this module:
the request handler answers them in v0 format with UNSUPPORTED_VERSION.
"""
from __future__ import annotations

import re

from odradek.protocol.apis import api_versions as API
from odradek.protocol.errors import ErrorCode

MIN_VERSION = 0
MAX_VERSION = 3

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def response(code: ErrorCode | int = ErrorCode.NONE) -> dict:
    from . import advertised_api_versions

    keys = advertised_api_versions() if code in (ErrorCode.NONE, ErrorCode.UNSUPPORTED_VERSION) else []
    return {"error_code": int(code), "api_keys": keys, "throttle_time_ms": 0}


def handle(ctx, rc, req) -> dict:
    if rc.api_version >= 3:
        name = req.client_software_name or ""
        version = req.client_software_version or ""
        if not (_SOFTWARE.fullmatch(name) and _SOFTWARE.fullmatch(version)):
            return response(ErrorCode.INVALID_REQUEST)
        return {**response(), **ctx.features.api_versions_fields()}
    return response()


def error_response(req, version: int, code: ErrorCode) -> dict:
    return response(code)
