"""FindCoordinator (key 10, v0-3): which broker coordinates a group or a transactional id.

Invariant: the answer comes from the MetadataCache only: the coordinator of group g
(key_type 0) is the live leader of ``__consumer_offsets-<partition_for(g)>``, that of
transactional id t (key_type 1) the live leader of ``__transaction_state-<partition_for(t)>``
(same abs(String.hashCode) % partitions), given by its endpoint on the listener this
connection arrived on. If the internal topic does not exist yet it is created (znodes
written through AdminZkClient in a thread, with Kafka's internal topic settings — never
capped: fewer live brokers than the replication factor fails as Kafka 2.8 does):
``__consumer_offsets`` with offsets.topic.num.partitions / replication.factor,
cleanup.policy=compact, segment.bytes=offsets.topic.segment.bytes,
compression.type=producer; ``__transaction_state`` with transaction.state.log.num.partitions
/ replication.factor, cleanup.policy=compact, compression.type=uncompressed,
min.insync.replicas=transaction.state.log.min.isr,
segment.bytes=transaction.state.log.segment.bytes, unclean.leader.election.enable=false.
The reply is then COORDINATOR_NOT_AVAILABLE, as it is while the partition has no live leader.
With an authorizer, Describe on the group (GROUP_AUTHORIZATION_FAILED) or on the
TransactionalId (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) is needed.
"""
from __future__ import annotations

import logging

from odradek.broker.group.offsets import GROUP_METADATA_TOPIC, partition_for
from odradek.broker.txn import TRANSACTION_STATE_TOPIC
from odradek.protocol.apis import find_coordinator as API
from odradek.protocol.errors import ErrorCode, KafkaError

from .authz import DESCRIBE, GROUP, TRANSACTIONAL_ID, authorize
from .context import BrokerContext, RequestContext
from .group_common import coordinator

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 3

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


def transaction_topic_configs(config) -> dict[str, str]:
    """The topic configs ``__transaction_state`` is created with (transactionTopicConfigs)."""
    return {"unclean.leader.election.enable": "false", "compression.type": "uncompressed",
            "cleanup.policy": "compact",
            "min.insync.replicas": str(int(config["transaction.state.log.min.isr"])),
            "segment.bytes": str(int(config["transaction.state.log.segment.bytes"]))}


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    key_type = req.key_type if rc.api_version >= 1 else GROUP_KEY_TYPE
    if key_type == TRANSACTION_KEY_TYPE:
        if not authorize(ctx, rc, DESCRIBE, TRANSACTIONAL_ID, req.key):
            return _response(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        topic = TRANSACTION_STATE_TOPIC
        partition = partition_for(req.key, int(ctx.config["transaction.state.log.num.partitions"]))
    elif key_type == GROUP_KEY_TYPE:
        if not authorize(ctx, rc, DESCRIBE, GROUP, req.key):
            return _response(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        topic = GROUP_METADATA_TOPIC
        coord = coordinator(ctx)
        partition = (coord.partition_for(req.key) if coord is not None
                     else partition_for(req.key, int(ctx.config["offsets.topic.num.partitions"])))
    else:
        return _response(ErrorCode.INVALID_REQUEST, message=f"Unknown coordinator type: {key_type}")
    cache = ctx.metadata_cache
    if not cache.contains_topic(topic):
        if topic == GROUP_METADATA_TOPIC:
            maybe_create_offsets_topic(ctx)
        else:
            maybe_create_transaction_topic(ctx)
        return _response(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    state = cache.partition_state(topic, partition)
    if state is None or state.leader < 0:
        return _response(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    endpoint = cache.endpoint(state.leader, rc.listener)   # None if the leader is not alive
    if endpoint is None:
        return _response(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return _response(ErrorCode.NONE, (state.leader, endpoint[0], endpoint[1]))


def maybe_create_offsets_topic(ctx: BrokerContext) -> None:
    """Kafka's createInternalTopic: ask for ``__consumer_offsets`` (once at a time)."""
    _maybe_create_internal_topic(ctx, GROUP_METADATA_TOPIC, int(ctx.config["offsets.topic.num.partitions"]),
                                 "offsets.topic.replication.factor", "offsets topic",
                                 offsets_topic_configs(ctx.config))


def maybe_create_transaction_topic(ctx: BrokerContext) -> None:
    """Kafka's createInternalTopic: ask for ``__transaction_state`` (once at a time)."""
    _maybe_create_internal_topic(ctx, TRANSACTION_STATE_TOPIC,
                                 int(ctx.config["transaction.state.log.num.partitions"]),
                                 "transaction.state.log.replication.factor", "transactions state topic",
                                 transaction_topic_configs(ctx.config))


def _maybe_create_internal_topic(ctx: BrokerContext, name: str, partitions: int, rf_key: str, what: str,
                                 configs: dict[str, str]) -> None:
    if ctx.admin is None or name in ctx.pending_auto_creates:
        return
    rf = int(ctx.config[rf_key])
    alive = len(ctx.metadata_cache.alive_broker_ids())
    if alive < rf:
        log.error("Number of alive brokers '%d' does not meet the required replication factor '%d' for the "
                  "%s (configured via '%s'). This error can be ignored if the cluster is starting up "
                  "and not all brokers are up yet.", alive, rf, what, rf_key)
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

    d = ctx.run_in_thread(ctx.admin.create_topic, name, partitions, rf, configs)
    d.addBoth(done)


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response(code)
