"""ListGroups (key 16, v0-4): the groups this broker coordinates.

Invariant: answered at once from the GroupCoordinator's cache — only groups of the
``__consumer_offsets`` partitions this broker leads; COORDINATOR_LOAD_IN_PROGRESS (with
the groups known so far) while a partition is loading. v4's ``states_filter`` lists only
groups in one of the named states (Kafka's names, e.g. "Stable", "Empty", matched exactly);
an empty filter lists them all.
With an authorizer, Describe on the Cluster lists them all; otherwise only the groups the
principal may Describe are listed.
"""
from __future__ import annotations

from odradek.protocol.apis import list_groups as API
from odradek.protocol.errors import ErrorCode

from .authz import CLUSTER, DESCRIBE, GROUP, authorize, denied
from .context import BrokerContext, RequestContext
from .group_common import coordinator

MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    coord = coordinator(ctx)
    if coord is None:
        return error_response(req, rc.api_version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    result = coord.handle_list_groups()
    hidden = set() if authorize(ctx, rc, DESCRIBE, CLUSTER) else \
        denied(ctx, rc, DESCRIBE, GROUP, (g.group_id for g in result.groups))
    states = set(getattr(req, "states_filter", None) or ())
    return {"throttle_time_ms": 0, "error_code": int(result.error_code),
            "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.group_state}
                       for g in result.groups
                       if g.group_id not in hidden and (not states or g.group_state in states)]}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "groups": []}
