"""DescribeGroups (key 15, v0-5): state, protocol and members of groups.

Invariant: one entry per requested group, in request order, each with its own error
(NOT_COORDINATOR for a group another broker coordinates); a group nobody created is
"Dead" with no error. v3+ with include_authorized_operations get the group operations the
principal holds (of READ, DELETE, DESCRIBE; all three without an authorizer), else INT32_MIN.
With an authorizer, a group without Describe answers GROUP_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

from odradek.protocol.apis import describe_groups as API
from odradek.protocol.errors import ErrorCode

from .authz import DESCRIBE, GROUP, NO_OPERATIONS, authorized_operations, denied
from .context import BrokerContext, RequestContext
from .group_common import coordinator

MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    version = rc.api_version
    coord = coordinator(ctx)
    if coord is None:
        return error_response(req, version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    with_ops = version >= 3 and req.include_authorized_operations
    refused = denied(ctx, rc, DESCRIBE, GROUP, req.groups)
    described = {g.group_id: g for g in coord.handle_describe_groups([g for g in req.groups if g not in refused])}
    groups = []
    for gid in req.groups:
        if gid in refused:
            groups.append(_error(gid, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        g = described[gid]
        groups.append({
            "error_code": int(g.error_code), "group_id": g.group_id, "group_state": g.group_state,
            "protocol_type": g.protocol_type, "protocol_data": g.protocol_data,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "member_metadata": m.member_metadata,
                         "member_assignment": m.member_assignment} for m in g.members],
            "authorized_operations": authorized_operations(ctx, rc, GROUP, gid) if with_ops else NO_OPERATIONS})
    return {"throttle_time_ms": 0, "groups": groups}


def _error(group_id: str, code: ErrorCode) -> dict:
    return {"error_code": int(code), "group_id": group_id, "group_state": "", "protocol_type": "",
            "protocol_data": "", "members": [], "authorized_operations": NO_OPERATIONS}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "groups": [_error(g, code) for g in req.groups]}
