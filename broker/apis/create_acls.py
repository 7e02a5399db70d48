"""CreateAcls (key 30, v0-2): add ACL bindings to ZooKeeper (and this broker's cache).

Invariant: as Kafka's KafkaApis.handleCreateAcls: Alter on the Cluster is needed
(CLUSTER_AUTHORIZATION_FAILED for every creation), no authorizer configured answers
SECURITY_DISABLED; each creation gets its own result in request order: INVALID_REQUEST with
the reason for a binding that cannot be stored (unknown or ANY values, a Cluster resource not
named kafka-cluster, an empty name, a principal not ``<type>:<name>``), else NONE once ZooKeeper
has it (UNKNOWN_SERVER_ERROR if the write failed).
"""
from __future__ import annotations

from twisted.internet import defer

from odradek.protocol.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.protocol.apis import create_acls as API
from odradek.protocol.errors import ErrorCode

from .authz import ALTER, CLUSTER, authorize
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 2


def binding(c) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.from_code(c.resource_type), c.resource_name,
                        PatternType.from_code(c.resource_pattern_type)),
        AccessControlEntry(c.principal, c.host, AclOperation.from_code(c.operation),
                           AclPermissionType.from_code(c.permission_type)))


def handle(ctx: BrokerContext, rc: RequestContext, req):
    if not authorize(ctx, rc, ALTER, CLUSTER):
        return error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    authorizer = ctx.authorizer
    if authorizer is None:
        return _response([(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
                          for _ in req.creations])
    bindings = [binding(c) for c in req.creations]

    def answer(errors: list[str | None]) -> dict:
        return _response([(ErrorCode.NONE, None) if e is None else
                          (ErrorCode.UNKNOWN_SERVER_ERROR if e.startswith("Failed to update") else
                           ErrorCode.INVALID_REQUEST, e) for e in errors])
    d: defer.Deferred = authorizer.create_acls(bindings)
    return d.addCallback(answer)


def _response(results: list[tuple[ErrorCode, str | None]]) -> dict:
    return {"throttle_time_ms": 0, "results": [{"error_code": int(code), "error_message": message}
                                               for code, message in results]}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response([(code, None) for _ in req.creations])
