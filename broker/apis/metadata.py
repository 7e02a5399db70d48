"""Metadata (key 3, v0-11): brokers, controller and topic/partition leadership.

Invariant: the answer comes only from the MetadataCache (filled by the controller's
UpdateMetadata), using each broker's endpoint on the listener this connection
arrived on; a request that arrives before the first UpdateMetadata waits for it
(``context.first_metadata``). An unknown, valid topic may be auto-created (auto.create.topics.enable
and, v4+, allow_auto_topic_creation): the znodes are written in a thread and the
topic is answered LEADER_NOT_AVAILABLE meanwhile; INVALID_REPLICATION_FACTOR when
default.replication.factor exceeds the live brokers, as Kafka 2.8 does. The answer is
assembled from pieces encoded once per metadata-cache version (``metadata_answers.py``), except
while a client quota is set (the answer must then carry its throttle time, so it stays a dict).
With an authorizer (KafkaApis.handleTopicMetadataRequest): a request for all topics lists only those the principal
may Describe; a named topic it may not Describe answers TOPIC_AUTHORIZATION_FAILED whether or
not it exists; auto-creation needs Create on the Cluster or on the topic
(TOPIC_AUTHORIZATION_FAILED otherwise, nothing created). v8 answers
``include_cluster_authorized_operations`` / ``include_topic_authorized_operations`` with the
operations the principal holds (all of them without an authorizer; the Cluster's are 0 without
Describe on it), else INT32_MIN (v11 has no cluster operations). v10+ answers each topic's id
(KIP-516, the zero UUID for a topic without one); asking by topic id is INVALID_REQUEST, as in
Kafka 2.8.
"""
from __future__ import annotations

import logging

from twisted.internet import defer

from odradek.protocol.apis import metadata as API
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.header import EncodedBody
from odradek.protocol.primitives import ZERO_UUID
from odradek.zk import topics as topic_rules

from ..metadata_cache import MetadataCache
from .authz import (CLUSTER, CREATE, DESCRIBE, NO_OPERATIONS, TOPIC, authorize, authorized_operations,
                    cluster_operations, denied)
from .context import BrokerContext, RequestContext, first_metadata
from .metadata_answers import MetadataAnswers

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 11


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict | EncodedBody | defer.Deferred:
    if not ctx.metadata_cache.version:   # before this broker's first UpdateMetadata
        return first_metadata(ctx).addCallback(lambda _: _answer(ctx, rc, req))
    return _answer(ctx, rc, req)


def _answer(ctx: BrokerContext, rc: RequestContext, req) -> dict | EncodedBody:
    version = rc.api_version
    cache = ctx.metadata_cache
    listener = rc.listener
    answers = _answers(ctx)

    def brokers() -> list[dict]:
        return [{"node_id": b.id, "host": ep[0], "port": ep[1], "rack": b.rack} for b, ep in cache.brokers_on(listener)]

    asked = req.topics   # (each attribute of a decoded request is read once: they are not free)
    if version >= 10 and asked:
        ids = [t.topic_id for t in asked]
        named = [t.name for t in asked]
        if any(i.int for i in ids) or None in named:
            # as Kafka 2.8: "Requesting metadata by topic ID is not supported" (nor with no name at all)
            return {"throttle_time_ms": 0, "brokers": brokers(), "cluster_id": cache.cluster_id,
                    "controller_id": -1, "topics": [
                        {"error_code": int(ErrorCode.INVALID_REQUEST), "name": n or "", "topic_id": i,
                         "is_internal": False, "partitions": []} for n, i in zip(named, ids)]}
    else:
        named = [t.name for t in asked] if asked else []
    all_topics = asked is None or (version == 0 and not asked)
    names = cache.topics() if all_topics else list(dict.fromkeys(named))
    refused = denied(ctx, rc, DESCRIBE, TOPIC, names)
    if all_topics and refused:
        names = [n for n in names if n not in refused]
    topics: list[dict] = []
    for name in names:
        if name in refused:
            topics.append({"error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), "name": name,
                           "is_internal": False, "partitions": []})
        elif cache.contains_topic(name):
            topics.append(answers.topic(name, listener, version, topic_metadata))
        else:
            allow_auto = bool(req.allow_auto_topic_creation) if version >= 4 else True
            topics.append(_missing_topic(ctx, rc, name, allow_auto))
    if version >= 8 and req.include_topic_authorized_operations:
        topics = [t if t["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED else
                  {**t, "topic_authorized_operations": authorized_operations(ctx, rc, TOPIC, str(t["name"]))}
                  for t in topics]
    cluster_ops = cluster_operations(ctx, rc) if 8 <= version <= 10 and req.include_cluster_authorized_operations \
        else NO_OPERATIONS
    quotas = ctx.quotas
    if quotas is None or not quotas.active:
        return answers.body(listener, version, brokers, topics, cluster_ops)
    # a client quota may throttle this request: the answer stays a dict for its throttle_time_ms
    return {"throttle_time_ms": 0, "brokers": brokers(), "cluster_id": cache.cluster_id,
            "controller_id": cache.controller_id if cache.controller_id is not None else -1,
            "topics": topics, "cluster_authorized_operations": cluster_ops}


def _answers(ctx: BrokerContext) -> MetadataAnswers:
    answers = ctx.metadata_answers
    if answers is None or answers.cache is not ctx.metadata_cache:
        answers = ctx.metadata_answers = MetadataAnswers(ctx.metadata_cache)
    return answers


def topic_metadata(cache: MetadataCache, name: str, listener: str, version: int) -> dict:
    """A topic's answer from the cache as it is now."""
    alive = cache.alive_broker_ids()
    partitions = []
    for index, st in sorted((cache.partitions(name) or {}).items()):
        replicas, isr = list(st.replicas), list(st.isr)
        leader_ep = cache.endpoint(st.leader, listener) if st.leader >= 0 else None
        if leader_ep is None:
            code = ErrorCode.LEADER_NOT_AVAILABLE
            if st.leader in alive and version >= 6:
                code = ErrorCode.LISTENER_NOT_FOUND
            leader = -1
        else:
            code, leader = ErrorCode.NONE, st.leader
            if version == 0 and (set(replicas) - alive or set(isr) - alive):
                code = ErrorCode.REPLICA_NOT_AVAILABLE
                replicas = [r for r in replicas if r in alive]
                isr = [r for r in isr if r in alive]
        partitions.append({"error_code": int(code), "partition_index": index, "leader_id": leader,
                           "leader_epoch": st.leader_epoch, "replica_nodes": replicas,
                           "isr_nodes": isr, "offline_replicas": list(st.offline_replicas)})
    return {"error_code": 0, "name": name, "topic_id": cache.topic_id(name) or ZERO_UUID,
            "is_internal": topic_rules.is_internal(name), "partitions": partitions}


def _missing_topic(ctx: BrokerContext, rc: RequestContext, name: str, allow_auto: bool) -> dict:
    def result(code: ErrorCode) -> dict:
        return {"error_code": int(code), "name": name, "is_internal": topic_rules.is_internal(name),
                "partitions": []}

    if allow_auto and ctx.config["auto.create.topics.enable"] and ctx.authorizer is not None and not (
            authorize(ctx, rc, CREATE, CLUSTER) or authorize(ctx, rc, CREATE, TOPIC, name)):
        return result(ErrorCode.TOPIC_AUTHORIZATION_FAILED)

    try:
        topic_rules.validate_topic_name(name)
    except KafkaError:
        return result(ErrorCode.INVALID_TOPIC_EXCEPTION)
    if not (allow_auto and ctx.config["auto.create.topics.enable"]) or topic_rules.is_internal(name) \
            or ctx.admin is None:
        return result(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    partitions = int(ctx.config["num.partitions"])
    rf = int(ctx.config["default.replication.factor"])
    if len(ctx.metadata_cache.alive_broker_ids()) < rf:
        return result(ErrorCode.INVALID_REPLICATION_FACTOR)
    _auto_create(ctx, name, partitions, rf)
    return result(ErrorCode.LEADER_NOT_AVAILABLE)


def _auto_create(ctx: BrokerContext, name: str, partitions: int, rf: int) -> None:
    if name in ctx.pending_auto_creates:
        return
    ctx.pending_auto_creates.add(name)

    def done(result):
        ctx.pending_auto_creates.discard(name)
        if hasattr(result, "check"):  # a Failure
            err = result.value
            if isinstance(err, KafkaError) and err.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                return None
            log.warning("auto-creating topic %s failed: %s", name, err)
        else:
            log.info("auto-created topic %s with %d partitions, replication factor %d", name, partitions, rf)
        return None

    admin = ctx.admin
    if admin is None:  # a broker still starting: the client retries its Metadata
        return None
    d = ctx.run_in_thread(admin.create_topic, name, partitions, rf, {})
    d.addBoth(done)


def error_response(req, version: int, code: ErrorCode) -> dict:
    topics = [] if req.topics is None else [
        {"error_code": int(code), "name": t.name, "partitions": []} for t in req.topics]
    return {"brokers": [], "controller_id": -1, "topics": topics}
