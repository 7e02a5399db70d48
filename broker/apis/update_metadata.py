"""UpdateMetadata (key 6, v0-7): the controller's view of brokers and partitions.

Invariant: the only writer of the MetadataCache, served only from the controller
ZooKeeper has now, to this broker's current registration (``controller_common``:
STALE_CONTROLLER_EPOCH or STALE_BROKER_EPOCH otherwise, the cache untouched); a
controller epoch older than the newest seen → STALE_CONTROLLER_EPOCH; otherwise the cache takes the live brokers (endpoints per
listener), the controller id and the partition states (leader -2 = deleted), and
parked fetches/produces of deleted partitions are woken.
With an authorizer, the sender needs ClusterAction on the Cluster
(CLUSTER_AUTHORIZATION_FAILED otherwise, nothing changed).
"""
from __future__ import annotations

import logging
import uuid
from typing import Any

from odradek.protocol.apis import update_metadata as API
from odradek.protocol.errors import ErrorCode

from ..metadata_cache import BrokerMetadata, PartitionMetadata
from .authz import CLUSTER, CLUSTER_ACTION, authorize
from .context import BrokerContext, RequestContext
from .controller_common import from_the_controller

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 7

# SecurityProtocol ids -> names (v1-2 endpoints carry no listener name)
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


def brokers_of(req, version: int) -> list[BrokerMetadata]:
    out = []
    for b in req.live_brokers:
        if version == 0:
            endpoints = {"PLAINTEXT": (b.v0_host, b.v0_port)}
        else:
            endpoints = {}
            for e in b.endpoints:
                name = e.listener if version >= 3 else SECURITY_PROTOCOLS.get(e.security_protocol, "PLAINTEXT")
                endpoints[name] = (e.host, e.port)
        out.append(BrokerMetadata(b.id, endpoints, b.get("rack")))
    return out


def known_id(topic_id: uuid.UUID | None) -> uuid.UUID | None:
    """A topic id as sent, None for none or the zero UUID (a topic without an id)."""
    return topic_id if topic_id is not None and topic_id.int else None


def partition_states(req, version: int) -> list[PartitionMetadata]:
    groups: list[tuple[str | None, uuid.UUID | None, Any]]
    if version <= 4:
        groups = [(None, None, req.ungrouped_partition_states)]
    else:
        groups = [(t.topic_name, known_id(t.get("topic_id")), t.partition_states) for t in req.topic_states]
    return [PartitionMetadata(topic if topic is not None else s.topic_name, s.partition_index, s.controller_epoch,
                           s.leader, s.leader_epoch, list(s.isr), s.zk_version, list(s.replicas),
                           list(s.get("offline_replicas") or []), topic_id)
            for topic, topic_id, states in groups for s in states]


def handle(ctx: BrokerContext, rc: RequestContext, req):
    if not authorize(ctx, rc, CLUSTER_ACTION, CLUSTER):
        return error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return from_the_controller(ctx, "UpdateMetadata", req, rc.api_version >= 5, lambda: _update(ctx, rc, req),
                               lambda code: error_response(req, rc.api_version, code))


def _update(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    version = rc.api_version
    cache = ctx.metadata_cache
    rm = ctx.replica_manager
    newest = max(cache.controller_epoch, rm.controller_epoch if rm is not None else -1)
    if req.controller_epoch < newest:
        log.info("ignoring UpdateMetadata from controller %d with stale epoch %d (newest %d)",
                 req.controller_id, req.controller_epoch, newest)
        return {"error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH)}
    if rm is not None:
        rm.controller_epoch = req.controller_epoch
    deleted = cache.update(req.controller_id, req.controller_epoch, brokers_of(req, version),
                           partition_states(req, version))
    for tp in deleted:
        ctx.topic_configs.pop(tp[0], None)
        if rm is not None:
            rm.fetch_purgatory.check_and_complete(tp)
            rm.produce_purgatory.check_and_complete(tp)
    return {"error_code": 0}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"error_code": int(code)}
