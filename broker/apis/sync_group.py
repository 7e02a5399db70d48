"""SyncGroup (key 14, v0-5): phase two of a rebalance — the leader's assignment.

Invariant: the leader's assignments ({member id: bytes}) go to the GroupCoordinator,
which answers every member once the group metadata is written (a Completion); v3
carries the static member's group.instance.id; v5 carries the protocol type and name the member
expects (INCONSISTENT_GROUP_PROTOCOL if they are not the group's) and answers the group's.
Errors carry an empty assignment.
With an authorizer, Read on the group is needed (GROUP_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from twisted.internet import defer

from odradek.protocol.apis import sync_group as API
from odradek.protocol.errors import ErrorCode

from .authz import GROUP, READ, authorize
from .context import BrokerContext, RequestContext, to_deferred
from .group_common import coordinator

MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: BrokerContext, rc: RequestContext, req):
    return defer.Deferred.fromCoroutine(_handle(ctx, rc, req))


async def _handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    version = rc.api_version
    if not authorize(ctx, rc, READ, GROUP, req.group_id):
        return error_response(req, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coord = coordinator(ctx)
    if coord is None:
        return error_response(req, version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    instance_id = req.group_instance_id if version >= 3 else None
    assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
    protocol_type = req.protocol_type if version >= 5 else None
    protocol_name = req.protocol_name if version >= 5 else None
    result = await to_deferred(coord.handle_sync_group(
        req.group_id, req.generation_id, req.member_id, instance_id, assignments, protocol_type, protocol_name))
    ok = result.error_code == ErrorCode.NONE
    return {"throttle_time_ms": 0, "error_code": int(result.error_code), "assignment": result.assignment if ok else b"",
            "protocol_type": result.protocol_type if ok else None,
            "protocol_name": result.protocol_name if ok else None}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "assignment": b""}
