"""What AlterConfigs and IncrementalAlterConfigs share (Kafka's ZkAdminManager): authorization,
the checks on a resource, and the ZooKeeper write that every broker then applies live.

Invariant: a topic's new overrides are validated in full (Kafka's LogConfig rules, INVALID_CONFIG
with a message) before anything is written; with ``validate_only`` nothing is; the write
(``AdminZkClient.change_topic_config``: /config/topics/<t> plus a /config/changes notification)
runs in a thread, and ``broker/config_changes.py`` on every broker applies it. Brokers: only
the dynamic configs odradek applies (``broker/config/dynamic.py``: the log defaults for one
broker id or the cluster default, the empty name; the replication throttle rates for one broker
id) are accepted, written to /config/brokers/<id> or /<default> and announced the same way; any
other broker config is refused with Kafka's INVALID_REQUEST "Cannot update these configs
dynamically" — never stored without effect. Not a handler module (it is not listed in the
registry).
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from twisted.internet import defer

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk import topics as topic_rules
from odradek.zk.config_entities import BROKERS, EntityConfigs
from odradek.zk.znodes import ConfigEntityZNode

from ..config import dynamic
from ..config.dynamic import DEFAULT_LEVEL
from ..config.kafka_config import ConfigError

from .authz import ALTER_CONFIGS, CLUSTER, TOPIC, authorize
from .context import BrokerContext, RequestContext

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4


def result(resource: Any, code: ErrorCode | int = ErrorCode.NONE, message: str | None = None) -> dict:
    return {"error_code": int(code), "error_message": message, "resource_type": resource.resource_type,
            "resource_name": resource.resource_name}


def refusal(ctx: BrokerContext, rc: RequestContext, resource: Any) -> dict | None:
    """The answer for a resource the principal may not alter or that cannot be altered; None if it may."""
    t = resource.resource_type
    if t == TOPIC_RESOURCE:
        if not authorize(ctx, rc, ALTER_CONFIGS, TOPIC, resource.resource_name):
            return result(resource, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    elif t == BROKER_RESOURCE:
        if not authorize(ctx, rc, ALTER_CONFIGS, CLUSTER):
            return result(resource, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    else:
        return result(resource, ErrorCode.INVALID_REQUEST,
                      f"AlterConfigs is only supported for topics and brokers, but resource type is {t}")
    names = [c.name for c in resource.configs]
    if len(names) != len(set(names)):
        return result(resource, ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    return None


async def alter(ctx: BrokerContext, resource: Any, validate_only: bool,
                new_overrides: Callable[[dict[str, str]], dict[str, str]]) -> dict:
    """Apply ``new_overrides(current)`` to the resource; its result entry."""
    name = resource.resource_name
    try:
        if resource.resource_type == BROKER_RESOURCE:
            return await _alter_broker(ctx, resource, validate_only, new_overrides)
        topic_rules.validate_topic_name(name)
        if not ctx.metadata_cache.contains_topic(name):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        current = await ctx.run_in_thread(ctx.zk.get_entity_config, "topics", name) if ctx.zk is not None else {}
        overrides = new_overrides(dict(current))
        topic_rules.validate_topic_config(overrides)
        topic_rules.check_znode_size(ConfigEntityZNode.encode(overrides), ErrorCode.INVALID_CONFIG, "topic's config")
        if not validate_only:
            if ctx.admin is None:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "this broker has no ZooKeeper client")
            await ctx.run_in_thread(ctx.admin.change_topic_config, name, overrides)
    except KafkaError as e:
        return result(resource, e.code, e.message)
    return result(resource)


async def _alter_broker(ctx: BrokerContext, resource: Any, validate_only: bool,
                        new_overrides: Callable[[dict[str, str]], dict[str, str]]) -> dict:
    """Kafka 2.8's ZkAdminManager.alterBrokerConfigs: a broker's own configs only on that broker
    (so its keystores are checked where they live), validated by the parts that would take them."""
    name = resource.resource_name
    if name and not name.isdigit():
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid broker id {name}")
    if name and int(name) != ctx.broker_id:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Unexpected broker id, expected {ctx.broker_id} or empty string, but received {name}")
    entity = name or DEFAULT_LEVEL
    static = ctx.static_config or ctx.config
    try:
        dynamic.validate({c.name: None for c in resource.configs}, broker_level=bool(name))   # the names
        current = await ctx.run_in_thread(ctx.zk.get_entity_config, BROKERS, entity) if ctx.zk is not None else {}
        current = dynamic.decode_passwords(static, current)
        overrides = new_overrides(dict(current))
        dynamic.validate(overrides, broker_level=bool(name))
        layers = ((ctx.dynamic_default_broker_config, overrides) if name
                  else (overrides, ctx.dynamic_broker_config))
        new_config = dynamic.effective_config(static, *layers)
        # a keystore setting repeated unchanged re-reads its files (a certificate renewed in place)
        reload_files = bool(name) and any(dynamic.split_listener(c.name)[1] in dynamic.SSL_STORES
                                          and current.get(c.name) == overrides.get(c.name) for c in resource.configs)
        appliers = [a for a in (p.prepare(ctx.config, new_config, reload_files) for p in ctx.reconfigurables) if a]
        stored = dynamic.encode_passwords(static, overrides)
    except ConfigError as e:
        code = ErrorCode.INVALID_REQUEST if "Cannot update these configs" in str(e) else ErrorCode.INVALID_CONFIG
        raise KafkaError(code, str(e)) from None
    if not validate_only:
        if ctx.admin is None:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "this broker has no ZooKeeper client")
        await ctx.run_in_thread(EntityConfigs(ctx.admin).change, BROKERS, entity, stored)
        if reload_files:
            for apply in appliers:
                apply()
    return result(resource)


def run_all(ctx: BrokerContext, rc: RequestContext, req: Any,
            alter_one: Callable[[Any], Awaitable[dict]]) -> Any:
    """Every resource of ``req`` in order: refused at once, or altered in turn."""
    async def run() -> dict:
        responses = []
        for r in req.resources:
            refused = refusal(ctx, rc, r)
            responses.append(refused if refused is not None else await alter_one(r))
        return {"throttle_time_ms": 0, "responses": responses}
    return defer.Deferred.fromCoroutine(run())


def error_response(req: Any, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "responses": [result(r, code) for r in req.resources]}
