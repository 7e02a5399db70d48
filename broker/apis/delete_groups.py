"""DeleteGroups (key 42, v0-2): delete empty groups and their offsets.

Invariant: one result per requested group (request order, duplicates answered once):
NONE for an Empty group (made Dead, tombstones appended), NON_EMPTY_GROUP,
GROUP_ID_NOT_FOUND, or the coordinator error for groups another broker coordinates.
With an authorizer, a group without Delete answers GROUP_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

from odradek.protocol.apis import delete_groups as API
from odradek.protocol.errors import ErrorCode

from .authz import DELETE, GROUP, denied
from .context import BrokerContext, RequestContext
from .group_common import coordinator

MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    coord = coordinator(ctx)
    if coord is None:
        return error_response(req, rc.api_version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    names = list(dict.fromkeys(req.groups_names))
    refused = denied(ctx, rc, DELETE, GROUP, names)
    errors = coord.handle_delete_groups([g for g in names if g not in refused])
    errors.update({g: ErrorCode.GROUP_AUTHORIZATION_FAILED for g in refused})
    return {"throttle_time_ms": 0, "results": [
        {"group_id": g, "error_code": int(errors.get(g, ErrorCode.NONE))} for g in names]}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "results": [
        {"group_id": g, "error_code": int(code)} for g in dict.fromkeys(req.groups_names)]}
