"""AlterUserScramCredentials (key 51, v0): delete or upsert users' SCRAM credentials.

Invariant: only the active controller writes (others answer NOT_CONTROLLER for every user),
only for a principal allowed Alter on the Cluster when an authorizer is on (else
CLUSTER_AUTHORIZATION_FAILED for every user), and it checks what Kafka 2.8's ZkAdminManager
checks, one result per user: an empty name is UNACCEPTABLE_CREDENTIAL (93), an unknown
mechanism UNSUPPORTED_SASL_MECHANISM (33), iterations outside 4096..16384
UNACCEPTABLE_CREDENTIAL, the same (user, mechanism) twice DUPLICATE_RESOURCE (92), deleting a
credential the user lacks RESOURCE_NOT_FOUND (91); a user with any such problem changes
nothing. A valid user's new config is written whole to ``/config/users/<user>`` plus a
``/config/changes`` notification, in a thread. The upsertion's salted password becomes stored
and server keys here; it is never stored or logged.
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from twisted.internet import defer

from odradek.broker.security.scram_credentials import iterations_problem
from odradek.protocol.apis import alter_user_scram_credentials as API
from odradek.protocol.apis.alter_user_scram_credentials import MECHANISM_BY_TYPE
from odradek.protocol.errors import ErrorCode
from odradek.protocol.scram import ScramCredential
from odradek.zk.config_entities import USERS, EntityConfigs, sanitize

from .authz import ALTER, CLUSTER, authorize
from .context import BrokerContext, RequestContext, admin_error

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 0

Result = tuple[ErrorCode, Optional[str]]


def validate(upsertions: list[Any], deletions: list[Any]) -> tuple[dict[str, Result], set[str]]:
    """Kafka's checks that need no ZooKeeper: (refused users -> (code, message), users to try)."""
    refused: dict[str, Result] = {}
    for d in deletions:
        if not d.name:
            refused[d.name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif d.mechanism not in MECHANISM_BY_TYPE:
            refused[d.name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    for u in upsertions:
        if not u.name:
            refused[u.name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif u.mechanism not in MECHANISM_BY_TYPE:
            refused[u.name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif (problem := iterations_problem(u.iterations)) is not None:
            refused[u.name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, problem)
    pairs = [(e.name, e.mechanism) for e in [*upsertions, *deletions] if e.name not in refused]
    for name, _ in {p for p in pairs if pairs.count(p) > 1}:
        refused[name] = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    return refused, {name for name, _ in pairs if name not in refused}


def apply(configs: EntityConfigs, users: set[str], upsertions: list[Any], deletions: list[Any]
          ) -> dict[str, Result]:
    """Write the valid users' credentials (blocking: ZooKeeper); a result per user."""
    results: dict[str, Result] = {}
    current = {user: configs.fetch(USERS, sanitize(user)) for user in sorted(users)}
    for d in deletions:
        if d.name in current and MECHANISM_BY_TYPE[d.mechanism] not in current[d.name]:
            results[d.name] = (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
    for user, config in current.items():
        if user in results:
            continue
        try:
            for d in deletions:
                if d.name == user:
                    config.pop(MECHANISM_BY_TYPE[d.mechanism], None)
            for u in upsertions:
                if u.name == user:
                    mechanism = MECHANISM_BY_TYPE[u.mechanism]
                    config[mechanism] = ScramCredential.from_salted_password(
                        mechanism, u.salt, u.salted_password, u.iterations).to_config()
            configs.change(USERS, sanitize(user), config)
            results[user] = (ErrorCode.NONE, None)
        except Exception as exc:
            code, message = admin_error(exc)
            log.info("altering the SCRAM credentials of user %s failed: %s", user, type(exc).__name__)
            results[user] = (code, message)
    return results


def _body(results: dict[str, Result]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "results": [{"user": user, "error_code": int(code), "error_message": message}
                                               for user, (code, message) in results.items()]}


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict | defer.Deferred:
    admin = ctx.controller_admin()
    if admin is None:
        return error_response(req, rc.api_version, ErrorCode.NOT_CONTROLLER)
    if not authorize(ctx, rc, ALTER, CLUSTER):
        return error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    upsertions, deletions = list(req.upsertions), list(req.deletions)
    refused, valid = validate(upsertions, deletions)
    if not valid:
        return _body(refused)
    d = ctx.run_in_thread(apply, EntityConfigs(admin), valid, upsertions, deletions)
    return d.addCallback(lambda written: _body({**refused, **written}))


# Kafka's default messages for the errors every user of a request gets (ApiError.message).
_MESSAGES = {ErrorCode.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
             ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed."}


def error_response(req, version: int, code: ErrorCode) -> dict[str, Any]:
    users = sorted({e.name for e in [*req.deletions, *req.upsertions]})
    message = _MESSAGES.get(code, code.name)
    return _body({user: (code, message) for user in users})


__all__ = ["API", "MIN_VERSION", "MAX_VERSION", "handle", "error_response", "validate"]
