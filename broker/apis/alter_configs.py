"""AlterConfigs (key 33, v0-2): replace a topic's whole set of config overrides (brokers: refused).

Invariant: each resource answered in request order (``config_common``: authorization,
validation, the ZooKeeper write every broker applies live); a null value is INVALID_REQUEST, as
in Kafka; configs not named are removed (this is the legacy, non-incremental API).
"""
from __future__ import annotations

from typing import Any

from odradek.protocol.apis import alter_configs as API
from odradek.protocol.errors import ErrorCode

from . import config_common
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: BrokerContext, rc: RequestContext, req):
    async def alter_one(r: Any) -> dict:
        nulls = [c.name for c in r.configs if c.value is None]
        if nulls:
            return config_common.result(r, ErrorCode.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}")
        wanted = {c.name: c.value for c in r.configs}
        return await config_common.alter(ctx, r, req.validate_only, lambda _current: wanted)
    return config_common.run_all(ctx, rc, req, alter_one)


def error_response(req, version: int, code: ErrorCode) -> dict:
    return config_common.error_response(req, version, code)
