"""DescribeClientQuotas (key 48, v0-1): the quotas of the user / client-id entities a filter matches.

Invariant: answers as Kafka 2.8's ZkAdminManager.describeClientQuotas does, from the quota
entities in ZooKeeper read in a thread (any broker answers): a component matches its entity
type's part exactly (MATCH_EXACT), the default (MATCH_DEFAULT) or any name including the default
(MATCH_ANY); an entity without a part the filter names never matches, and with ``strict`` an
entity with a part the filter does not name does not either; entities without quota values are
not listed. INVALID_REQUEST for a duplicate or empty component type, UNSUPPORTED_VERSION for a
custom type (Kafka's answers); odradek also answers INVALID_REQUEST for an unknown match type or
an exact match without a name (Kafka fails those with UNKNOWN_SERVER_ERROR). An ``ip`` component
matches nothing (odradek keeps no IP quotas). With an authorizer, DescribeConfigs on the Cluster
is needed (else CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet import defer

from odradek.protocol.apis import describe_client_quotas as API
from odradek.protocol.apis.describe_client_quotas import MATCH_ANY, MATCH_DEFAULT, MATCH_EXACT
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk import config_entities as ce

from .alter_client_quotas import CLIENT_ID, IP, USER
from .authz import CLUSTER, DESCRIBE_CONFIGS, authorize
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 1

ANY = object()   # a MATCH_ANY component: any name, the default too
Filter = dict[str, Any]   # entity type -> sanitized name, "<default>" or ANY


def parse_filter(components: list[Any]) -> Filter:
    """The request's components by entity type (Kafka's checks)."""
    out: Filter = {}
    for c in components:
        kind = c.entity_type
        if kind in out:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Duplicate {'client' if kind == CLIENT_ID else kind} "
                                                        "filter component entity type")
        if kind == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Unexpected empty filter component entity type")
        if kind not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Custom entity type '{kind}' not supported")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"An exact match of {kind} needs a name")
            out[kind] = ce.sanitize(c.match)
        elif c.match_type == MATCH_DEFAULT:
            out[kind] = ce.DEFAULT_ENTITY
        elif c.match_type == MATCH_ANY:
            out[kind] = ANY
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected match type: {c.match_type}")
    if IP in out and (USER in out or CLIENT_ID in out):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination, IP filter "
                                                    "component should not be used with user or clientId filter "
                                                    "component.")
    return out


def _matches(wanted: Any, name: Optional[str], strict: bool) -> bool:
    if wanted is None:       # the filter does not name this type
        return name is None or not strict
    if name is None:
        return False
    return wanted is ANY or wanted == name


def matching(all_quotas: dict[ce.QuotaKey, dict[str, str]], flt: Filter, strict: bool) -> dict[ce.QuotaKey, dict]:
    """The entities (with quota values) the filter selects."""
    if IP in flt:
        return {}
    return {key: values for key, values in all_quotas.items()
            if values and _matches(flt.get(USER), key[0], strict) and _matches(flt.get(CLIENT_ID), key[1], strict)}


def _entity(key: ce.QuotaKey) -> list[dict[str, Any]]:
    return [{"entity_type": kind, "entity_name": None if name == ce.DEFAULT_ENTITY else ce.desanitize(name)}
            for kind, name in zip((USER, CLIENT_ID), key) if name is not None]


def describe(configs: ce.EntityConfigs, flt: Filter, strict: bool) -> dict[str, Any]:
    """The response body (blocking: reads ZooKeeper)."""
    found = matching(configs.all_quota_configs(), flt, strict)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": [
        {"entity": _entity(key), "values": [{"key": k, "value": float(v)} for k, v in sorted(values.items())]}
        for key, values in sorted(found.items(), key=lambda kv: (kv[0][0] or "", kv[0][1] or ""))]}


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict | defer.Deferred:
    if not authorize(ctx, rc, DESCRIBE_CONFIGS, CLUSTER):
        return error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        flt = parse_filter(list(req.components))
    except KafkaError as exc:
        body = error_response(req, rc.api_version, exc.code)
        body["error_message"] = exc.message
        return body
    if ctx.admin is None:
        return error_response(req, rc.api_version, ErrorCode.UNKNOWN_SERVER_ERROR)
    return ctx.run_in_thread(describe, ce.EntityConfigs(ctx.admin), flt, bool(req.strict))


def error_response(req, version: int, code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": None, "entries": None}


__all__ = ["API", "MIN_VERSION", "MAX_VERSION", "handle", "error_response", "parse_filter", "matching"]
