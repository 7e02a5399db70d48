"""LeaveGroup (key 13, v0-4): members leave a group (triggers a rebalance).

Invariant: v0-2 name one member (``member_id``) and get one error code — the group's
error, else that member's (``legacy_error_code``); v3 is batched: a list of
(member_id, group_instance_id) and one error per member plus the group-level error.
Answered at once by the GroupCoordinator.
With an authorizer, Read on the group is needed (GROUP_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from odradek.protocol.apis import leave_group as API
from odradek.protocol.errors import ErrorCode

from .authz import GROUP, READ, authorize
from .context import BrokerContext, RequestContext
from .group_common import coordinator

MIN_VERSION = 0
MAX_VERSION = 4


def _members(req, version: int) -> list[tuple[str, str | None]]:
    if version <= 2:
        return [(req.member_id, None)]
    return [(m.member_id, m.group_instance_id) for m in req.members]


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    version = rc.api_version
    if not authorize(ctx, rc, READ, GROUP, req.group_id):
        return error_response(req, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coord = coordinator(ctx)
    if coord is None:
        return error_response(req, version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    result = coord.handle_leave_group(req.group_id, _members(req, version))
    if version <= 2:
        return {"throttle_time_ms": 0, "error_code": int(result.legacy_error_code)}
    return {"throttle_time_ms": 0, "error_code": int(result.error_code),
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "error_code": int(m.error_code)} for m in result.members]}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "members": []}
