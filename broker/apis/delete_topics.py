"""DeleteTopics (key 20, v0-3): mark topics for deletion, wait until they are gone.

Invariant: only the active controller deletes (others: NOT_CONTROLLER); a topic
not in the metadata cache is UNKNOWN_TOPIC_OR_PARTITION; otherwise
/admin/delete_topics/<t> is created through AdminZkClient in a thread and the
answer waits until the metadata cache no longer has the topic, or REQUEST_TIMED_OUT. With an
authorizer, Delete on the topic is needed (TOPIC_AUTHORIZATION_FAILED, checked before existence).
"""
from __future__ import annotations

import logging

from twisted.internet import defer

from odradek.protocol.apis import delete_topics as API
from odradek.protocol.errors import ErrorCode, KafkaError

from .authz import DELETE, TOPIC, denied
from .context import BrokerContext, RequestContext, wait_for_metadata

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 3


def _names(req, version: int) -> list[str]:
    return list(req.topic_names) if version <= 5 else [t.name for t in req.topics]


def handle(ctx: BrokerContext, rc: RequestContext, req):
    return defer.Deferred.fromCoroutine(_handle(ctx, rc, req))


async def _handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    names = list(dict.fromkeys(_names(req, rc.api_version)))
    codes: dict[str, ErrorCode] = {}
    pending: list[str] = []
    cache = ctx.metadata_cache
    refused = denied(ctx, rc, DELETE, TOPIC, names)
    for name in names:
        admin = ctx.controller_admin()
        if admin is None:
            codes[name] = ErrorCode.NOT_CONTROLLER
        elif not ctx.config["delete.topic.enable"]:
            codes[name] = ErrorCode.TOPIC_DELETION_DISABLED
        elif name in refused:
            codes[name] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not cache.contains_topic(name):
            codes[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            try:
                await ctx.run_in_thread(admin.delete_topic, name)
                log.info("marked topic %s for deletion", name)
            except KafkaError as e:
                codes[name] = e.code
                continue
            except Exception as e:  # already marked for deletion: wait like the first request
                if type(e).__name__ != "TopicAlreadyMarkedForDeletion":
                    log.exception("deleting topic %s failed", name)
                    codes[name] = ErrorCode.UNKNOWN_SERVER_ERROR
                    continue
            codes[name] = ErrorCode.NONE
            pending.append(name)
    if pending and req.timeout_ms > 0:
        ready = await wait_for_metadata(ctx, lambda: not any(cache.contains_topic(t) for t in pending),
                                        req.timeout_ms)
        if not ready:
            for t in pending:
                if cache.contains_topic(t):
                    codes[t] = ErrorCode.REQUEST_TIMED_OUT
    return {"throttle_time_ms": 0, "responses": [{"name": n, "error_code": int(codes[n])} for n in names]}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "responses": [{"name": n, "error_code": int(code)}
                                                 for n in _names(req, version)]}
