"""IncrementalAlterConfigs (key 44, v0-1): set, delete, append to or subtract from single topic
configs (KIP-339; brokers: refused).

Invariant: each resource answered in request order (``config_common``); its operations apply, in
request order, to the overrides ZooKeeper holds now, as Kafka's prepareIncrementalConfigs does:
APPEND and SUBTRACT only on LIST configs (from the default when not overridden), a null value
only with DELETE; any refusal leaves the topic's config as it was.
"""
from __future__ import annotations

from typing import Any

from odradek.protocol.apis import incremental_alter_configs as API
from odradek.protocol.errors import ErrorCode, KafkaError

from ..config.kafka_config import TOPIC_CONFIG
from ..config.describe import to_string
from ..config.types import LIST
from . import config_common

from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 1
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {APPEND: "append", SUBTRACT: "subtract"}


def apply_operations(current: dict[str, str], configs: list[Any]) -> dict[str, str]:
    """The overrides after ``configs``' operations; KafkaError for one Kafka refuses."""
    out = dict(current)
    for c in configs:
        if c.config_operation == SET:
            out[c.name] = c.value
        elif c.config_operation == DELETE:
            out.pop(c.name, None)
        elif c.config_operation in (APPEND, SUBTRACT):
            key = TOPIC_CONFIG.get(c.name)
            if key is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {c.name}")
            if key.type != LIST:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Config value {_OP_NAMES[c.config_operation]} is not allowed for config key: {c.name}")
            old = out.get(c.name, to_string(key, key.default) or "")
            items = [v for v in old.split(",") if v] if old else []
            given = c.value.split(",")
            if c.config_operation == APPEND:
                items += given
            else:
                items = [v for v in items if v not in given]
            out[c.name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {c.config_operation} for {c.name}")
    return out


def handle(ctx: BrokerContext, rc: RequestContext, req):
    async def alter_one(r: Any) -> dict:
        nulls = [c.name for c in r.configs if c.value is None and c.config_operation != DELETE]
        if nulls:
            return config_common.result(r, ErrorCode.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}")
        return await config_common.alter(ctx, r, req.validate_only, lambda current: apply_operations(current, r.configs))
    return config_common.run_all(ctx, rc, req, alter_one)


def error_response(req, version: int, code: ErrorCode) -> dict:
    return config_common.error_response(req, version, code)
