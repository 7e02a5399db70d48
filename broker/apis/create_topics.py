"""CreateTopics (key 19, v0-7): validate, write the topic znodes, wait for leaders.

Invariant: only the active controller creates topics (others: NOT_CONTROLLER per
topic). Each topic is validated as Kafka's ZkAdminManager does (duplicate names →
INVALID_REQUEST, existing → TOPIC_ALREADY_EXISTS, name, partitions, replication
factor vs live brokers, manual assignment, configs, and znodes that fit ZooKeeper's
jute.maxbuffer — all before anything is written); znodes are written through
AdminZkClient in a thread (``validate_only`` writes nothing). Successful topics are
answered once the metadata cache shows them with leaders, or REQUEST_TIMED_OUT. With an
authorizer, Create on the Cluster or on the topic is needed (TOPIC_AUTHORIZATION_FAILED).
From v5 a created (or validated) topic's answer carries its partition count, replication factor
and every config as DescribeConfigs would show it (KIP-525; without DescribeConfigs on the topic,
topic_config_error_code TOPIC_AUTHORIZATION_FAILED and no configs), from v7 its topic id.
A client's controller_mutation_rate quota (KIP-599, ``broker/quotas/``) counts the partitions
each created topic has; from v6 a topic arriving while over it is THROTTLING_QUOTA_EXCEEDED and changes nothing.
"""
from __future__ import annotations

import logging

from twisted.internet import defer

from odradek.protocol.apis import create_topics as API
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.primitives import ZERO_UUID
from odradek.zk import assignment as assign
from odradek.zk import topics as topic_rules
from odradek.zk.znodes import ConfigEntityZNode, TopicZNode

from ..config import describe
from ..quotas.request_quotas import THROTTLED_MESSAGE, mutation_quota
from .authz import CLUSTER, CREATE, DESCRIBE_CONFIGS, TOPIC, authorize, denied
from .context import BrokerContext, RequestContext, admin_error, await_leaders

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 7


def _result(name: str, code: ErrorCode | int, message: str | None = None) -> dict:
    return {"name": name, "error_code": int(code), "error_message": message}


def handle(ctx: BrokerContext, rc: RequestContext, req):
    return defer.Deferred.fromCoroutine(_handle(ctx, rc, req))


def plan(ctx: BrokerContext, topic, validate_only: bool) -> tuple[dict[int, list[int]], dict[str, str]]:
    """(assignment, configs) for one requested topic, or KafkaError."""
    name = topic.name
    if ctx.metadata_cache.contains_topic(name):
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    topic_rules.validate_topic_name(name)
    configs: dict[str, str] = {}
    for c in topic.configs:
        if c.value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Null value not supported for topic configs: " + c.name)
        configs[c.name] = c.value
    topic_rules.validate_topic_config(configs)
    topic_rules.check_znode_size(ConfigEntityZNode.encode(configs), ErrorCode.INVALID_CONFIG, "topic's config")
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "Both numPartitions or replicationFactor and replicasAssignments were set. "
                             "Both cannot be used at the same time.")
        assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        if sorted(assignment) != list(range(len(assignment))):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "partitions should be a consecutive 0-based integer sequence")
        assign.validate_topic_assignment(assignment)
        topic_rules.check_znode_size(TopicZNode.encode(assignment), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "replica assignment")
        return assignment, configs
    partitions = topic.num_partitions if topic.num_partitions != -1 else int(ctx.config["num.partitions"])
    rf = topic.replication_factor if topic.replication_factor != -1 else \
        int(ctx.config["default.replication.factor"])
    brokers = sorted(ctx.metadata_cache.alive_broker_ids())
    if rf > len(brokers) and partitions > 0 and rf > 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Replication factor: {rf} larger than available brokers: {len(brokers)}.")
    topic_rules.check_partition_count(partitions)
    assignment = assign.assign_replicas_to_brokers(partitions, rf, brokers)
    topic_rules.check_znode_size(TopicZNode.encode(assignment), ErrorCode.INVALID_PARTITIONS, "replica assignment")
    return assignment, configs


async def _handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    version = rc.api_version
    validate_only = bool(req.get("validate_only", False)) if version >= 1 else False
    names = [t.name for t in req.topics]
    dups = {n for n in names if names.count(n) > 1}
    refused = set() if authorize(ctx, rc, CREATE, CLUSTER) else denied(ctx, rc, CREATE, TOPIC, names)
    results: dict[str, dict] = {}
    created: dict[str, int] = {}
    mutations = mutation_quota(ctx.quotas, rc)
    for topic in req.topics:
        name = topic.name
        if name in dups:
            results[name] = _result(name, ErrorCode.INVALID_REQUEST,
                                    f"Create topics request contains multiple entries for the topic {name}.")
            continue
        if name in refused:
            results[name] = _result(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            continue
        admin = ctx.controller_admin()
        if admin is None:
            results[name] = _result(name, ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
            continue
        try:
            assignment, configs = plan(ctx, topic, validate_only)
            topic_id = ZERO_UUID
            if not validate_only and not mutations.admit(len(assignment)):
                results[name] = _result(name, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
                continue
            if validate_only:
                await ctx.run_in_thread(admin.validate_topic_create, name, assignment, configs)
            else:
                topic_id = await ctx.run_in_thread(admin.create_topic_with_assignment, name, configs, assignment)
                created[name] = len(assignment)
                log.info("created topic %s with %d partitions (replicas %s)", name, len(assignment), assignment)
            results[name] = dict(_result(name, ErrorCode.NONE), topic_id=topic_id,
                                 **_described(ctx, rc, name, assignment, configs))
        except Exception as e:
            code, message = admin_error(e)
            if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("creating topic %s failed", name)
            results[name] = _result(name, code, message)
    for t in await await_leaders(ctx, created, req.timeout_ms):
        results[t] = _result(t, ErrorCode.REQUEST_TIMED_OUT,
                             "Timed out waiting for the topic's partitions to get leaders.")
    seen: set[str] = set()
    topics = []
    for n in names:
        if n not in seen:
            seen.add(n)
            topics.append(results[n])
    return {"throttle_time_ms": mutations.throttle_ms, "topics": topics}


def _described(ctx: BrokerContext, rc: RequestContext, name: str, assignment: dict[int, list[int]],
               configs: dict[str, str]) -> dict:
    """What v5+ tells of a created topic: its size and its configs (KIP-525)."""
    out = {"num_partitions": len(assignment), "replication_factor": len(next(iter(assignment.values())))}
    if not authorize(ctx, rc, DESCRIBE_CONFIGS, TOPIC, name):
        return dict(out, topic_config_error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), configs=None)
    layers = describe.BrokerLayers(ctx.static_config or ctx.config, ctx.dynamic_broker_config,
                                   ctx.dynamic_default_broker_config)
    return dict(out, configs=[{"name": c.name, "value": c.value, "read_only": c.read_only,
                               "config_source": c.source, "is_sensitive": c.sensitive}
                              for c in describe.topic_configs(layers, configs, False, False)])


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "topics": [_result(t.name, code) for t in req.topics]}
