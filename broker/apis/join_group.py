"""JoinGroup (key 11, v0-7): phase one of a rebalance.

Invariant: the request is translated per version and handed to the GroupCoordinator,
which answers later (a Completion): v0 has no rebalance timeout (the coordinator uses
the session timeout), v4+ dynamic members must first learn their member id
(``require_known_member_id = version >= 4 and group_instance_id is None``), v5 carries
the static member's group.instance.id, v7 answers the group's protocol type and a null protocol
name when none was chosen. The member's client_host is the peer address
as Kafka prints it ("/127.0.0.1"). Only the leader's response lists the members.
With an authorizer, Read on the group is needed (GROUP_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from twisted.internet import defer

from odradek.protocol.apis import join_group as API
from odradek.protocol.errors import ErrorCode

from .authz import GROUP, READ, authorize
from .context import BrokerContext, RequestContext, to_deferred
from .group_common import client_host, client_id, coordinator

MIN_VERSION = 0
MAX_VERSION = 7


def handle(ctx: BrokerContext, rc: RequestContext, req):
    return defer.Deferred.fromCoroutine(_handle(ctx, rc, req))


async def _handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    version = rc.api_version
    if not authorize(ctx, rc, READ, GROUP, req.group_id):
        return error_response(req, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coord = coordinator(ctx)
    if coord is None:
        return error_response(req, version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    instance_id = req.group_instance_id if version >= 5 else None
    rebalance_timeout = req.rebalance_timeout_ms if version >= 1 else -1
    result = await to_deferred(coord.handle_join_group(
        req.group_id, req.member_id, instance_id, client_id(rc), client_host(rc),
        req.session_timeout_ms, rebalance_timeout, req.protocol_type,
        [(p.name, p.metadata) for p in req.protocols],
        require_known_member_id=version >= 4 and instance_id is None))
    return {"throttle_time_ms": 0, "error_code": int(result.error_code),
            "generation_id": result.generation_id, "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name or _no_name(version), "leader": result.leader,
            "member_id": result.member_id,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "metadata": m.metadata} for m in result.members]}


def _no_name(version: int) -> str | None:
    return None if version >= 7 else ""     # v7 can say null


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "generation_id": -1, "protocol_name": _no_name(version),
            "leader": "", "member_id": req.member_id, "members": []}
