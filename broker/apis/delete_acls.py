"""DeleteAcls (key 31, v0-2): remove the ACL bindings matching each filter.

Invariant: as Kafka's KafkaApis.handleDeleteAcls: Alter on the Cluster is needed
(CLUSTER_AUTHORIZATION_FAILED for every filter), no authorizer configured answers
SECURITY_DISABLED; a filter with UNKNOWN elements gets INVALID_REQUEST and removes nothing;
each other filter lists the bindings it removed from ZooKeeper (each with error NONE).
"""
from __future__ import annotations

from twisted.internet import defer

from odradek.protocol.acl import AclBinding
from odradek.protocol.apis import delete_acls as API
from odradek.protocol.errors import ErrorCode

from .authz import ALTER, CLUSTER, authorize
from .context import BrokerContext, RequestContext
from .describe_acls import binding_filter

MIN_VERSION = 0
MAX_VERSION = 2


def _matching(b: AclBinding) -> dict:
    p, e = b.pattern, b.entry
    return {"error_code": 0, "error_message": None, "resource_type": int(p.resource_type),
            "resource_name": p.name, "pattern_type": int(p.pattern_type), "principal": e.principal,
            "host": e.host, "operation": int(e.operation), "permission_type": int(e.permission_type)}


def handle(ctx: BrokerContext, rc: RequestContext, req):
    if not authorize(ctx, rc, ALTER, CLUSTER):
        return error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    authorizer = ctx.authorizer
    if authorizer is None:
        return _response([(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker", [])
                          for _ in req.filters])
    filters = [binding_filter(f) for f in req.filters]
    valid = [f for f in filters if not f.unknown()]

    def answer(removed: list[list[AclBinding]]) -> dict:
        per_filter = iter(removed)
        return _response([(ErrorCode.INVALID_REQUEST, "The filter contains UNKNOWN elements", []) if f.unknown()
                          else (ErrorCode.NONE, None, next(per_filter)) for f in filters])
    d: defer.Deferred = authorizer.delete_acls(valid) if valid else defer.succeed([])
    return d.addCallback(answer)


def _response(results: list[tuple[ErrorCode, str | None, list[AclBinding]]]) -> dict:
    return {"throttle_time_ms": 0, "filter_results": [
        {"error_code": int(code), "error_message": message, "matching_acls": [_matching(b) for b in bindings]}
        for code, message, bindings in results]}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response([(code, None, []) for _ in req.filters])
