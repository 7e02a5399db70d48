"""CreatePartitions (key 37, v0-3): add partitions to existing topics.

Invariant: only the active controller adds partitions (others: NOT_CONTROLLER per
topic), as Kafka's KafkaApis.handleCreatePartitionsRequest + ZkAdminManager do:
duplicate names → INVALID_REQUEST, topics queued for deletion →
INVALID_TOPIC_EXCEPTION, then per topic UNKNOWN_TOPIC_OR_PARTITION,
INVALID_PARTITIONS (count ≤ current, or more than a topic znode can hold),
INVALID_REPLICA_ASSIGNMENT (bad manual assignment); a name no topic can have is
UNKNOWN_TOPIC_OR_PARTITION before it reaches ZooKeeper; the topic znode is rewritten
through AdminZkClient in a thread (``validate_only`` writes nothing). Topics that grew
are answered once the metadata cache shows every partition with a leader, or
REQUEST_TIMED_OUT. With an authorizer, Alter on the topic is needed
(TOPIC_AUTHORIZATION_FAILED, after the duplicate check).
A client's controller_mutation_rate quota (KIP-599, ``broker/quotas/``) counts the partitions
each topic gains; from v3 a topic arriving while over it is THROTTLING_QUOTA_EXCEEDED and changes nothing.
"""
from __future__ import annotations

import logging

from twisted.internet import defer

from odradek.protocol.apis import create_partitions as API
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk import topics as topic_rules

from ..quotas.request_quotas import THROTTLED_MESSAGE, mutation_quota
from .authz import ALTER, TOPIC, denied
from .context import BrokerContext, RequestContext, admin_error, await_leaders

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 3


def _result(name: str, code: ErrorCode | int, message: str | None = None) -> dict:
    return {"name": name, "error_code": int(code), "error_message": message}


def handle(ctx: BrokerContext, rc: RequestContext, req):
    return defer.Deferred.fromCoroutine(_handle(ctx, rc, req))


def _queued_for_deletion(ctx: BrokerContext, topic: str) -> bool:
    return ctx.controller is not None and ctx.controller.is_topic_queued_for_deletion(topic)


def _check_name(name: str) -> None:
    """A name no topic can have ("..", "a/b", 250 characters) names no existing topic: refused
    before it reaches a ZooKeeper path (kazoo rejects relative ones)."""
    try:
        topic_rules.validate_topic_name(name)
    except KafkaError:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.") from None


async def _handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    names = [t.name for t in req.topics]
    dups = {n for n in names if names.count(n) > 1}
    refused = denied(ctx, rc, ALTER, TOPIC, names)
    results: dict[str, dict] = {}
    grown: dict[str, int] = {}
    mutations = mutation_quota(ctx.quotas, rc)
    for topic in req.topics:
        name = topic.name
        if name in results:
            continue
        admin = ctx.controller_admin()
        if admin is None:
            results[name] = _result(name, ErrorCode.NOT_CONTROLLER,
                                    "This is not the correct controller for this cluster.")
        elif name in dups:
            results[name] = _result(name, ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
        elif name in refused:
            results[name] = _result(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                    "The topic authorization is failed.")
        elif _queued_for_deletion(ctx, name):
            results[name] = _result(name, ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion.")
        else:
            assignments = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
            try:
                _check_name(name)
                current = len(ctx.metadata_cache.partitions(name) or {})
                if not req.validate_only and not mutations.admit(max(topic.count - current, 0)):
                    results[name] = _result(name, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
                    continue
                new = await ctx.run_in_thread(admin.create_partitions, name, topic.count, assignments,
                                              bool(req.validate_only))
                results[name] = _result(name, ErrorCode.NONE)
                if not req.validate_only:
                    grown[name] = topic.count
                    log.info("topic %s: added partitions %s", name, new)
            except Exception as e:
                code, message = admin_error(e)
                if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                    log.exception("adding partitions to %s failed", name)
                results[name] = _result(name, code, message)
    for t in await await_leaders(ctx, grown, req.timeout_ms):
        results[t] = _result(t, ErrorCode.REQUEST_TIMED_OUT, "Operation timed out")
    seen: set[str] = set()
    out = []
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(results[n])
    return {"throttle_time_ms": mutations.throttle_ms, "results": out}


def error_response(req, version: int, code: ErrorCode) -> dict:
    seen: list[str] = []
    for t in req.topics:
        if t.name not in seen:
            seen.append(t.name)
    return {"throttle_time_ms": 0, "results": [_result(n, code) for n in seen]}


__all__ = ["API", "MIN_VERSION", "MAX_VERSION", "handle", "error_response"]
