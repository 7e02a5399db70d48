"""AlterClientQuotas (key 49, v0-1): set or remove the quotas of user / client-id entities.

Invariant: answers as Kafka 2.8's ZkAdminManager.alterClientQuotas does, one result per entry,
each entry on its own (one refused entry leaves the others to succeed): an entity is a user, a
client id or both (a null name is the type's default, stored as ``<default>``; names are
sanitized as Kafka's Sanitizer), written whole to ``/config/users/<u>``,
``/config/users/<u>/clients/<c>`` or ``/config/clients/<c>`` (a user's SCRAM credentials kept)
plus a ``/config/changes`` notification, in a thread, by any broker. INVALID_REQUEST (42), with
Kafka's messages, for: no entity parts, an unknown entity type, an empty name, an unknown key,
a fractional byte rate; and, where odradek is stricter than Kafka, a negative value and the
``ip`` entity type (odradek has no connection-rate quotas; Kafka 2.8 stores them). A refused
entry writes nothing; ``validate_only`` writes nothing. Removing a key the entity lacks is not
an error (Kafka's). With an authorizer, AlterConfigs on the Cluster is needed (else
CLUSTER_AUTHORIZATION_FAILED for every entry).
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer

from odradek.protocol.apis import alter_client_quotas as API
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk import config_entities as ce

from .authz import ALTER_CONFIGS, CLUSTER, authorize
from .context import BrokerContext, RequestContext, admin_error

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 1

USER, CLIENT_ID, IP = "user", "client-id", "ip"   # Kafka's ClientQuotaEntity types
LONG_KEYS = frozenset({"producer_byte_rate", "consumer_byte_rate"})


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def quota_key(entity: list[Any]) -> ce.QuotaKey:
    """The stored quota entity of a request's entity components (Kafka's parseAndSanitizeQuotaEntity)."""
    if not entity:
        raise _invalid("Invalid empty client quota entity")
    parts: dict[str, str] = {}
    for component in entity:
        kind, name = component.entity_type, component.entity_name
        if kind not in (USER, CLIENT_ID, IP):
            raise _invalid(f"Unhandled client quota entity type: {kind}")
        if name is not None and not name:
            raise _invalid(f"Empty {kind} not supported")
        parts[kind] = ce.DEFAULT_ENTITY if name is None else ce.sanitize(name)
    if IP in parts:
        if len(parts) > 1:
            raise _invalid("Invalid quota entity combination, IP entity should not be used with user/client ID entity.")
        raise _invalid("odradek does not serve IP quotas (connection_creation_rate)")
    return parts.get(USER), parts.get(CLIENT_ID)


def new_config(current: dict[str, str], ops: list[Any]) -> dict[str, str]:
    """The entity's configs after the ops, in order (Kafka's checks, then odradek's sign check)."""
    config = dict(current)
    for op in ops:
        if op.remove:
            config.pop(op.key, None)
            continue
        if op.key not in ce.QUOTA_CONFIGS:
            raise _invalid(f"Invalid configuration key {op.key}")
        value = float(op.value)
        if value != value or value < 0:
            raise _invalid(f"Invalid value {op.value} for configuration {op.key}: a quota is a non-negative number")
        if op.key in LONG_KEYS:
            whole = int(value + 1e-6) if value < 2.0 ** 63 else None
            if whole is None or abs(whole - value) > 1e-6:
                raise _invalid(f"Configuration {op.key} must be a LONG value")
            config[op.key] = str(whole)
        else:
            config[op.key] = repr(value)
    return config


def alter(configs: ce.EntityConfigs, entries: list[Any], validate_only: bool) -> list[tuple[ErrorCode, str | None]]:
    """(code, message) per entry (blocking: reads and writes ZooKeeper)."""
    results: list[tuple[ErrorCode, str | None]] = []
    for entry in entries:
        try:
            key = quota_key(list(entry.entity))
            current = configs.quota_config(key)
            updated = new_config(current, list(entry.ops))
            if not validate_only and updated != current:
                configs.change(*ce.quota_znode(key), updated)
            results.append((ErrorCode.NONE, None))
        except Exception as exc:
            code, message = admin_error(exc)
            log.info("altering client quotas failed: %s", message)
            results.append((code, message))
    return results


def _body(req, results: list[tuple[ErrorCode, str | None]]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "entries": [
        {"error_code": int(code), "error_message": message,
         "entity": [{"entity_type": c.entity_type, "entity_name": c.entity_name} for c in entry.entity]}
        for entry, (code, message) in zip(req.entries, results)]}


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict | defer.Deferred:
    if not authorize(ctx, rc, ALTER_CONFIGS, CLUSTER):
        return error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if ctx.admin is None:
        return error_response(req, rc.api_version, ErrorCode.UNKNOWN_SERVER_ERROR)
    entries = list(req.entries)
    d = ctx.run_in_thread(alter, ce.EntityConfigs(ctx.admin), entries, bool(req.validate_only))
    return d.addCallback(lambda results: _body(req, results))


_MESSAGES = {ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed."}


def error_response(req, version: int, code: ErrorCode) -> dict[str, Any]:
    return _body(req, [(code, _MESSAGES.get(code, code.name))] * len(req.entries))


__all__ = ["API", "MIN_VERSION", "MAX_VERSION", "handle", "error_response", "quota_key", "new_config"]
