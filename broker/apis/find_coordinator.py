"""FindCoordinator (key 10, v0-2): which broker coordinates a group.

Invariant: the answer comes from the MetadataCache only: the coordinator of group g is
the live leader of ``__consumer_offsets-<partition_for(g)>``, given by its endpoint on
the listener this connection arrived on. If ``__consumer_offsets`` does not exist yet
it is created (znodes written through AdminZkClient in a thread, with Kafka's internal
topic settings: offsets.topic.num.partitions, offsets.topic.replication.factor — never
capped: fewer live brokers than that fails as Kafka 2.8 does — cleanup.policy=compact,
segment.bytes=offsets.topic.segment.bytes, compression.type=producer) and the reply is
COORDINATOR_NOT_AVAILABLE, as it is while the partition has no live leader. Transaction
coordinators (key_type 1) do not exist here: COORDINATOR_NOT_AVAILABLE.
"""
from __future__ import annotations

import logging

from odradek.broker.group.offsets import GROUP_METADATA_TOPIC, partition_for
from odradek.protocol.apis import find_coordinator as API
from odradek.protocol.errors import ErrorCode, KafkaError

from .context import BrokerContext, RequestContext
from .group_common import coordinator

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 2

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1

_MESSAGES = {
    ErrorCode.NONE: "NONE",   # Kafka's Errors.NONE.message()
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
}


def _response(code: ErrorCode, node: tuple[int, str, int] = (-1, "", -1),
              message: str | None = None) -> dict:
    node_id, host, port = node
    return {"throttle_time_ms": 0, "error_code": int(code),
            "error_message": message if message is not None else _MESSAGES.get(code),
            "node_id": node_id, "host": host, "port": port}


def offsets_topic_configs(config) -> dict[str, str]:
    """The topic configs ``__consumer_offsets`` is created with (GroupMetadataManager.offsetsTopicConfigs)."""
    return {"cleanup.policy": "compact",
            "segment.bytes": str(int(config["offsets.topic.segment.bytes"])),
            "compression.type": "producer"}


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    key_type = req.key_type if rc.api_version >= 1 else GROUP_KEY_TYPE
    if key_type == TRANSACTION_KEY_TYPE:
        return _response(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if key_type != GROUP_KEY_TYPE:
        return _response(ErrorCode.INVALID_REQUEST, message=f"Unknown coordinator type: {key_type}")
    coord = coordinator(ctx)
    partition = (coord.partition_for(req.key) if coord is not None
                 else partition_for(req.key, int(ctx.config["offsets.topic.num.partitions"])))
    cache = ctx.metadata_cache
    if not cache.contains_topic(GROUP_METADATA_TOPIC):
        maybe_create_offsets_topic(ctx)
        return _response(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    state = cache.partition_state(GROUP_METADATA_TOPIC, partition)
    if state is None or state.leader < 0:
        return _response(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    endpoint = cache.endpoint(state.leader, rc.listener)   # None if the leader is not alive
    if endpoint is None:
        return _response(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return _response(ErrorCode.NONE, (state.leader, endpoint[0], endpoint[1]))


def maybe_create_offsets_topic(ctx: BrokerContext) -> None:
    """Kafka's createInternalTopic: ask for ``__consumer_offsets`` (once at a time)."""
    name = GROUP_METADATA_TOPIC
    if ctx.admin is None or name in ctx.pending_auto_creates:
        return
    partitions = int(ctx.config["offsets.topic.num.partitions"])
    rf = int(ctx.config["offsets.topic.replication.factor"])
    alive = len(ctx.metadata_cache.alive_broker_ids())
    if alive < rf:
        log.error("Number of alive brokers '%d' does not meet the required replication factor '%d' for the "
                  "offsets topic (configured via 'offsets.topic.replication.factor'). This error can be "
                  "ignored if the cluster is starting up and not all brokers are up yet.", alive, rf)
        return
    ctx.pending_auto_creates.add(name)

    def done(result):
        ctx.pending_auto_creates.discard(name)
        if hasattr(result, "check"):   # a Failure
            err = result.value
            if not (isinstance(err, KafkaError) and err.code == ErrorCode.TOPIC_ALREADY_EXISTS):
                log.warning("creating %s failed: %s", name, err)
        else:
            log.info("created internal topic %s with %d partitions, replication factor %d",
                     name, partitions, rf)
        return None

    d = ctx.run_in_thread(ctx.admin.create_topic, name, partitions, rf, offsets_topic_configs(ctx.config))
    d.addBoth(done)


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response(code)
