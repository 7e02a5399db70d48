"""ApiVersions (key 18): what this broker handles, straight from the handler registry.

Invariant: the api_keys list is ``advertised_api_versions()`` (only what we handle);
v3's client software name/version must match Kafka's regex or the answer is
INVALID_REQUEST; v3 answers carry the features (KIP-584, ``broker/features.py``): none supported,
the finalized ones and their epoch as /feature last said (epoch -1, left out, without one);
throttle is always 0. Unsupported versions never reach this module:
the request handler answers them in v0 format with UNSUPPORTED_VERSION. The answer is encoded
once per (version, finalized features) and sent as those bytes after (issue 17: it was rebuilt
and encoded at every request, which cost more than a produce).
"""
from __future__ import annotations

import re

from typing import Any

from odradek.protocol.apis import api_versions as API
from odradek.protocol.errors import ErrorCode
from odradek.protocol.header import EncodedBody

MIN_VERSION = 0
MAX_VERSION = 3

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def response(code: ErrorCode | int = ErrorCode.NONE) -> dict:
    from . import advertised_api_versions

    keys = advertised_api_versions() if code in (ErrorCode.NONE, ErrorCode.UNSUPPORTED_VERSION) else []
    return {"error_code": int(code), "api_keys": keys, "throttle_time_ms": 0}


MAX_VALID_SOFTWARE = 1024   # client (name, version) pairs remembered as valid, not matched again
_VALID_SOFTWARE: set[tuple[str, str]] = set()
_ENCODED: dict[Any, EncodedBody] = {}   # (version, features epoch, features) -> the answer's body


def handle(ctx, rc, req) -> dict | EncodedBody:
    version = rc.api_version
    if version >= 3:
        named = (req.get("client_software_name") or "", req.get("client_software_version") or "")
        if named not in _VALID_SOFTWARE:
            if not (_SOFTWARE.fullmatch(named[0]) and _SOFTWARE.fullmatch(named[1])):
                return response(ErrorCode.INVALID_REQUEST)
            if len(_VALID_SOFTWARE) < MAX_VALID_SOFTWARE:
                _VALID_SOFTWARE.add(named)
        features = ctx.features
        finalized = features.features
        key: Any = (version, features.epoch, tuple(sorted(finalized.items())) if finalized else ())
    else:
        key = version
    body = _ENCODED.get(key)
    if body is None:
        fields = {**response(), **ctx.features.api_versions_fields()} if version >= 3 else response()
        body = _ENCODED[key] = EncodedBody.of(API, version, fields)
    return body


def error_response(req, version: int, code: ErrorCode) -> dict:
    return response(code)
