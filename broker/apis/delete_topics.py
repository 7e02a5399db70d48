"""DeleteTopics (key 20, v0-6): mark topics for deletion, wait until they are gone.

Invariant: only the active controller deletes (others: NOT_CONTROLLER); a topic
not in the metadata cache is UNKNOWN_TOPIC_OR_PARTITION (v6 may name topics by id: an id the
cache does not know is UNKNOWN_TOPIC_ID, an entry with both a name and an id INVALID_REQUEST,
and each answer carries both); otherwise
/admin/delete_topics/<t> is created through AdminZkClient in a thread and the
answer waits until the metadata cache no longer has the topic, or REQUEST_TIMED_OUT. With an
authorizer, Delete on the topic is needed (TOPIC_AUTHORIZATION_FAILED, checked before existence).
A client's controller_mutation_rate quota (KIP-599, ``broker/quotas/``) counts the partitions
each deleted topic had; from v5 a topic arriving while over it is THROTTLING_QUOTA_EXCEEDED and changes nothing.
"""
from __future__ import annotations

import logging
import uuid

from twisted.internet import defer

from odradek.protocol.apis import delete_topics as API
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.primitives import ZERO_UUID

from ..quotas.request_quotas import THROTTLED_MESSAGE, mutation_quota
from .authz import DELETE, TOPIC, denied
from .context import BrokerContext, RequestContext, wait_for_metadata

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 6


def _asked(req, version: int) -> list[tuple[str | None, uuid.UUID]]:
    """(name, id) per requested topic: names before v6, a name or an id from v6."""
    if version <= 5:
        return [(n, ZERO_UUID) for n in req.topic_names]
    return [(t.name, t.topic_id) for t in req.topics]


def handle(ctx: BrokerContext, rc: RequestContext, req):
    return defer.Deferred.fromCoroutine(_handle(ctx, rc, req))


async def _handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    cache = ctx.metadata_cache
    early: list[dict] = []
    names: list[str] = []
    for name, topic_id in dict.fromkeys(_asked(req, rc.api_version)):
        if name is not None and topic_id.int:
            early.append(_answer(name, topic_id, ErrorCode.INVALID_REQUEST))
        elif name is None:
            known = cache.topic_with_id(topic_id)
            if known is None:
                early.append(_answer(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
            elif known not in names:
                names.append(known)
        elif name not in names:
            names.append(name)
    codes: dict[str, ErrorCode] = {}
    pending: list[str] = []
    refused = denied(ctx, rc, DELETE, TOPIC, names)
    mutations = mutation_quota(ctx.quotas, rc)
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
        elif not mutations.admit(len(cache.partitions(name) or {})):
            codes[name] = ErrorCode.THROTTLING_QUOTA_EXCEEDED
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
    ids = {n: cache.topic_id(n) or ZERO_UUID for n in names}
    return {"throttle_time_ms": mutations.throttle_ms,
            "responses": early + [_answer(n, ids[n], codes[n]) for n in names]}


def _answer(name: str | None, topic_id: uuid.UUID, code: ErrorCode) -> dict:
    message = THROTTLED_MESSAGE if code == ErrorCode.THROTTLING_QUOTA_EXCEEDED else None
    return {"name": name, "topic_id": topic_id, "error_code": int(code), "error_message": message}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "responses": [_answer(n, i, code) for n, i in _asked(req, version)]}
