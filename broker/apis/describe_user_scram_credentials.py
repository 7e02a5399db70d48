"""DescribeUserScramCredentials (key 50, v0): the SCRAM mechanisms and iterations of users.

Invariant: answers as Kafka 2.8's ZkAdminManager.describeUserScramCredentials does, from
``/config/users/<user>`` read in a thread: a null or empty list describes every user that has
a credential (sorted); named users are answered once each, in request order, with
RESOURCE_NOT_FOUND (91) for an empty name or a user without credentials and
DUPLICATE_RESOURCE (92) for a name asked twice. Only mechanism and iterations leave the
broker, never a salt or key. Any broker answers (no controller needed); with an authorizer,
Describe on the Cluster is needed (else CLUSTER_AUTHORIZATION_FAILED as the top-level error).
"""
from __future__ import annotations

from typing import Any

from twisted.internet import defer

from odradek.protocol.apis import describe_user_scram_credentials as API
from odradek.protocol.apis.alter_user_scram_credentials import TYPE_BY_MECHANISM
from odradek.protocol.errors import ErrorCode
from odradek.protocol.scram import ScramError
from odradek.zk.config_entities import EntityConfigs

from .authz import CLUSTER, DESCRIBE, authorize
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 0


def _result(user: str, code: ErrorCode = ErrorCode.NONE, message: str | None = None,
            infos: list[dict[str, int]] | None = None) -> dict[str, Any]:
    return {"user": user, "error_code": int(code), "error_message": message, "credential_infos": infos or []}


def _describe_user(configs: EntityConfigs, user: str, explicit: bool) -> dict[str, Any] | None:
    try:
        credentials = configs.scram_credentials(user)
    except ScramError as exc:
        return _result(user, ErrorCode.UNKNOWN_SERVER_ERROR, f"malformed SCRAM credential: {exc}")
    if credentials:
        return _result(user, infos=[{"mechanism": TYPE_BY_MECHANISM[m], "iterations": c.iterations}
                                    for m, c in credentials.items()])
    if explicit:
        return _result(user, ErrorCode.RESOURCE_NOT_FOUND,
                       f"Attempt to describe a user credential that does not exist: {user}")
    return None


def describe(configs: EntityConfigs, users: list[str] | None) -> dict[str, Any]:
    """The response body (blocking: reads ZooKeeper)."""
    if not users:
        found = [_describe_user(configs, u, False) for u in configs.users_with_scram()]
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "results": [r for r in found if r is not None]}
    results: dict[str, dict[str, Any]] = {}
    for user in dict.fromkeys(users):
        if not user:
            results[user] = _result(user, ErrorCode.RESOURCE_NOT_FOUND, "Username must not be empty")
        elif users.count(user) > 1:
            results[user] = _result(user, ErrorCode.DUPLICATE_RESOURCE,
                                    f"Cannot describe SCRAM credentials for the same user twice in a single "
                                    f"request: {user}")
        else:
            results[user] = _describe_user(configs, user, True) or _result(user)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": list(results.values())}


def handle(ctx: BrokerContext, rc: RequestContext, req) -> defer.Deferred:
    admin = ctx.admin
    users = None if req.users is None else [u.name for u in req.users]
    if not authorize(ctx, rc, DESCRIBE, CLUSTER):
        return defer.succeed(error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    if admin is None:
        return defer.succeed(error_response(req, rc.api_version, ErrorCode.UNKNOWN_SERVER_ERROR))
    d = ctx.run_in_thread(describe, EntityConfigs(admin), users)

    def failed(failure) -> dict[str, Any]:
        body = error_response(req, rc.api_version, ErrorCode.UNKNOWN_SERVER_ERROR)
        body["error_message"] = "Error processing describe user SCRAM credential configs request: " \
                                f"{type(failure.value).__name__}"
        return body
    return d.addErrback(failed)


def error_response(req, version: int, code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": None, "results": []}


__all__ = ["API", "MIN_VERSION", "MAX_VERSION", "handle", "error_response"]
