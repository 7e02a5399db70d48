"""ListGroups (key 16, v0-2): the groups this broker coordinates.

Invariant: answered at once from the GroupCoordinator's cache — only groups of the
``__consumer_offsets`` partitions this broker leads; COORDINATOR_LOAD_IN_PROGRESS (with
the groups known so far) while a partition is loading.
"""
from __future__ import annotations

from odradek.protocol.apis import list_groups as API
from odradek.protocol.errors import ErrorCode

from .context import BrokerContext, RequestContext
from .group_common import coordinator

MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    coord = coordinator(ctx)
    if coord is None:
        return error_response(req, rc.api_version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    result = coord.handle_list_groups()
    return {"throttle_time_ms": 0, "error_code": int(result.error_code),
            "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type,
                        "group_state": g.group_state} for g in result.groups]}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "groups": []}
