"""DescribeConfigs (key 32, v0-4): a topic's, this broker's or its loggers' configuration.

Invariant: as KafkaApis.handleDescribeConfigsRequest with ConfigHelper: a TOPIC needs
DescribeConfigs on the topic (TOPIC_AUTHORIZATION_FAILED), a BROKER or BROKER_LOGGER
DescribeConfigs on the Cluster (CLUSTER_AUTHORIZATION_FAILED); the refused resources come
after the answered ones. A topic's overrides are read from ZooKeeper for each request (in a
thread, never a cached copy), so the answer is what ZooKeeper holds; an invalid topic name is
INVALID_TOPIC_EXCEPTION, a topic the MetadataCache does not know UNKNOWN_TOPIC_OR_PARTITION.
A broker resource names this broker (its id) or the cluster default (empty name); another id
is INVALID_REQUEST. ``configuration_keys`` (null or empty: all) selects entries. What each
entry says (value, source, synonyms, sensitivity) is ``broker/config/describe.py``'s.
"""
from __future__ import annotations

from typing import Any

from odradek.protocol.apis import describe_configs as API
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.topics import validate_topic_name

from ..config import describe
from ..topic_configs import read_topic_configs
from .authz import CLUSTER, DESCRIBE_CONFIGS, TOPIC, authorize
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 4
TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE = 2, 4, 8


def _result(resource: Any, code: ErrorCode | int = ErrorCode.NONE, message: str | None = None,
            configs: list[describe.DescribedConfig] | None = None) -> dict:
    return {"error_code": int(code), "error_message": message, "resource_type": resource.resource_type,
            "resource_name": resource.resource_name, "configs": [
                {"name": c.name, "value": c.value, "read_only": c.read_only, "is_default": False,
                 "config_source": c.source, "is_sensitive": c.sensitive,
                 "synonyms": [{"name": s.name, "value": s.value, "source": s.source} for s in c.synonyms],
                 "config_type": c.type_id, "documentation": c.documentation} for c in configs or ()]}


def _selected(resource: Any, configs: list[describe.DescribedConfig]) -> list[describe.DescribedConfig]:
    keys = resource.configuration_keys
    return configs if not keys else [c for c in configs if c.name in keys]


def _broker_id(name: str) -> int:
    try:
        return int(name)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None


def handle(ctx: BrokerContext, rc: RequestContext, req):
    synonyms = bool(rc.api_version >= 1 and req.include_synonyms)
    docs = bool(rc.api_version >= 3 and req.include_documentation)
    allowed: list[Any] = []
    refused: list[Any] = []
    for r in req.resources:
        if r.resource_type == TOPIC_RESOURCE:
            ok = authorize(ctx, rc, DESCRIBE_CONFIGS, TOPIC, r.resource_name)
        elif r.resource_type in (BROKER_RESOURCE, BROKER_LOGGER_RESOURCE):
            ok = authorize(ctx, rc, DESCRIBE_CONFIGS, CLUSTER)
        else:
            ok = True  # answered INVALID_REQUEST below
        (allowed if ok else refused).append(r)
    topics = sorted({r.resource_name for r in allowed
                     if r.resource_type == TOPIC_RESOURCE and ctx.metadata_cache.contains_topic(r.resource_name)})

    def answer(read: tuple[dict[str, dict[str, str]], dict[str, Exception]]) -> dict:
        overrides, unread = read
        results = []
        for r in allowed:
            try:
                results.append(_describe(ctx, r, overrides, unread, synonyms, docs))
            except KafkaError as e:
                results.append(_result(r, e.code, e.message))
        for r in refused:
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED if r.resource_type == TOPIC_RESOURCE \
                else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            results.append(_result(r, code))
        return {"throttle_time_ms": 0, "results": results}

    if topics and ctx.zk is not None:   # the topics' overrides as ZooKeeper holds them now
        return ctx.run_in_thread(read_topic_configs, ctx.zk, topics).addCallback(answer)
    return answer(({t: {} for t in topics}, {}))


def _describe(ctx: BrokerContext, r: Any, overrides: dict[str, dict[str, str]], unread: dict[str, Exception],
              synonyms: bool, docs: bool) -> dict:
    name, config = r.resource_name, ctx.config
    layers = describe.BrokerLayers(ctx.static_config or config, ctx.dynamic_broker_config,
                                   ctx.dynamic_default_broker_config)
    if r.resource_type == TOPIC_RESOURCE:
        validate_topic_name(name)
        if name in unread:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"reading the config of {name} from ZooKeeper failed: {unread[name]}")
        if name not in overrides:
            return _result(r, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return _result(r, configs=_selected(r, describe.topic_configs(layers, overrides[name], synonyms, docs)))
    if r.resource_type == BROKER_RESOURCE:
        if not name:
            return _result(r, configs=_selected(r, describe.default_broker_configs(layers, synonyms, docs)))
        if _broker_id(name) != config.broker_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {config.broker_id} or empty string, but received {name}")
        return _result(r, configs=_selected(r, describe.broker_configs(layers, synonyms, docs)))
    if r.resource_type == BROKER_LOGGER_RESOURCE:
        if not name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        if _broker_id(name) != config.broker_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {config.broker_id} but received {name}")
        return _result(r, configs=_selected(r, describe.logger_configs()))
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {r.resource_type}")


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "results": [_result(r, code) for r in req.resources]}
