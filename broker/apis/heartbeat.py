"""Heartbeat (key 12, v0-4): keep a member's session alive.

Invariant: answered at once by the GroupCoordinator (REBALANCE_IN_PROGRESS tells the
member to rejoin); v3 carries the static member's group.instance.id.
With an authorizer, Read on the group is needed (GROUP_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from odradek.protocol.apis import heartbeat as API
from odradek.protocol.errors import ErrorCode

from .authz import GROUP, READ, authorize
from .context import BrokerContext, RequestContext
from .group_common import coordinator

MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    if not authorize(ctx, rc, READ, GROUP, req["group_id"]):
        return error_response(req, rc.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coord = coordinator(ctx)
    if coord is None:
        return error_response(req, rc.api_version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    instance_id = req["group_instance_id"] if rc.api_version >= 3 else None
    code = coord.handle_heartbeat(req["group_id"], req["member_id"], instance_id, req["generation_id"])
    return {"throttle_time_ms": 0, "error_code": int(code)}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code)}
