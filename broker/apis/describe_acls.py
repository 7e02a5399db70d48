"""DescribeAcls (key 29, v0-2): the ACL bindings matching a filter, from this broker's cache.

Invariant: as Kafka's KafkaApis.handleDescribeAcls: Describe on the Cluster is needed
(CLUSTER_AUTHORIZATION_FAILED), no authorizer configured answers SECURITY_DISABLED, a filter
with UNKNOWN elements INVALID_REQUEST; otherwise the bindings are grouped by resource pattern.
"""
from __future__ import annotations

from odradek.protocol.acl import (
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)
from odradek.protocol.apis import describe_acls as API
from odradek.protocol.errors import ErrorCode

from .authz import CLUSTER, DESCRIBE, authorize
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 2


def binding_filter(f) -> AclBindingFilter:
    """The AclBindingFilter of a DescribeAcls request or a DeleteAcls filter."""
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType.from_code(f.resource_type_filter), f.resource_name_filter,
                              PatternType.from_code(f.pattern_type_filter)),
        AccessControlEntryFilter(f.principal_filter, f.host_filter, AclOperation.from_code(f.operation),
                                 AclPermissionType.from_code(f.permission_type)))


def resources(bindings: list[AclBinding]) -> list[dict]:
    out: dict = {}
    for b in bindings:
        p, e = b.pattern, b.entry
        out.setdefault(p, []).append({"principal": e.principal, "host": e.host, "operation": int(e.operation),
                                      "permission_type": int(e.permission_type)})
    return [{"resource_type": int(p.resource_type), "resource_name": p.name, "pattern_type": int(p.pattern_type),
             "acls": acls} for p, acls in out.items()]


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    if not authorize(ctx, rc, DESCRIBE, CLUSTER):
        return error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if ctx.authorizer is None:
        return _error(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    flt = binding_filter(req)
    if flt.unknown():
        return _error(ErrorCode.INVALID_REQUEST, "The filter contains UNKNOWN elements")
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "resources": resources(ctx.authorizer.acls(flt))}


def _error(code: ErrorCode, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message, "resources": []}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _error(code)
