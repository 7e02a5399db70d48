"""The AdminClient's ACL calls: DescribeAcls (29), CreateAcls (30), DeleteAcls (31).

Invariant: each call goes to one broker (any broker answers ACL requests: they all write the same
ZooKeeper and read their own cache), tried in turn while connections fail, until the request
timeout; the broker's answer is turned into ``odradek.protocol.acl`` values with Kafka's error
codes (CLUSTER_AUTHORIZATION_FAILED, SECURITY_DISABLED, INVALID_REQUEST ...) as ``KafkaError``s.
"""
from __future__ import annotations

from typing import Any

from odradek.protocol.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.protocol.apis import create_acls as _create_acls
from odradek.protocol.apis import delete_acls as _delete_acls
from odradek.protocol.apis import describe_acls as _describe_acls
from odradek.protocol.errors import ErrorCode, KafkaError


PREFIXED_FROM = 1   # the first version with pattern types


def _filter_body(f: AclBindingFilter) -> dict[str, Any]:
    return {"resource_type_filter": int(f.pattern.resource_type), "resource_name_filter": f.pattern.name,
            "pattern_type_filter": int(f.pattern.pattern_type), "principal_filter": f.entry.principal,
            "host_filter": f.entry.host, "operation": int(f.entry.operation),
            "permission_type": int(f.entry.permission_type)}


def _binding(resource_type: int, name: str, pattern_type: int, acl: Any) -> AclBinding:
    return AclBinding(ResourcePattern(ResourceType.from_code(resource_type), name, PatternType.from_code(pattern_type)),
                      AccessControlEntry(acl.principal, acl.host, AclOperation.from_code(acl.operation),
                                         AclPermissionType.from_code(acl.permission_type)))


class AclAdmin:
    def __init__(self, cluster: Any, pool: Any, timeout_s: float, backoff_s: float) -> None:
        self.cluster = cluster
        self.pool = pool
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s

    def _call(self, api: Any, body: dict[str, Any], needs_patterns: bool) -> Any:
        def version(conn: Any) -> int:
            v = conn.version_for(api, api.MAX_VERSION)
            if needs_patterns and v < PREFIXED_FROM:
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                                 f"broker {conn.node_id} does not support prefixed ACL patterns")
            return v
        return self.pool.call(api, body, lambda: sorted(self.cluster.brokers), self.timeout_s, self.backoff_s,
                              version=version)

    def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        resp = self._call(_describe_acls, _filter_body(flt), flt.pattern.pattern_type != PatternType.LITERAL)
        if resp.error_code:
            raise KafkaError(resp.error_code, resp.error_message or "DescribeAcls")
        return sorted(_binding(r.resource_type, r.resource_name, r.pattern_type, a)
                      for r in resp.resources for a in r.acls)

    def create(self, bindings: list[AclBinding]) -> dict[AclBinding, KafkaError | None]:
        body = {"creations": [{"resource_type": int(b.pattern.resource_type), "resource_name": b.pattern.name,
                               "resource_pattern_type": int(b.pattern.pattern_type),
                               "principal": b.entry.principal, "host": b.entry.host,
                               "operation": int(b.entry.operation),
                               "permission_type": int(b.entry.permission_type)} for b in bindings]}
        prefixed = any(b.pattern.pattern_type != PatternType.LITERAL for b in bindings)
        resp = self._call(_create_acls, body, prefixed)
        return {b: None if r.error_code == ErrorCode.NONE else KafkaError(r.error_code, r.error_message or str(b))
                for b, r in zip(bindings, resp.results)}

    def delete(self, filters: list[AclBindingFilter]
               ) -> list[tuple[AclBindingFilter, list[AclBinding], KafkaError | None]]:
        prefixed = any(f.pattern.pattern_type != PatternType.LITERAL for f in filters)
        resp = self._call(_delete_acls, {"filters": [_filter_body(f) for f in filters]}, prefixed)
        out: list[tuple[AclBindingFilter, list[AclBinding], KafkaError | None]] = []
        for f, r in zip(filters, resp.filter_results):
            error = None if r.error_code == ErrorCode.NONE else KafkaError(r.error_code, r.error_message or str(f))
            out.append((f, [_binding(m.resource_type, m.resource_name, m.pattern_type, m)
                            for m in r.matching_acls if m.error_code == ErrorCode.NONE], error))
        return out
