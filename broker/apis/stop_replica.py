"""StopReplica (key 5, v0-3): stop hosting (and maybe delete) partitions.

Invariant: served only from the controller ZooKeeper has now, to this broker's
current registration (``controller_common``: STALE_CONTROLLER_EPOCH or
STALE_BROKER_EPOCH otherwise, nothing deleted); the replica manager refuses a
controller epoch older than the newest it applied; v3 per-partition leader epochs fence
older requests (FENCED_LEADER_EPOCH). Deleting a partition deletes its log, and the topic's
cached config is forgotten once no partition of it is left here.
With an authorizer, the sender needs ClusterAction on the Cluster
(CLUSTER_AUTHORIZATION_FAILED otherwise, nothing changed).
"""
from __future__ import annotations

import logging

from odradek.protocol.apis import stop_replica as API
from odradek.protocol.errors import ErrorCode

from .authz import CLUSTER, CLUSTER_ACTION, authorize
from .context import BrokerContext, RequestContext
from .controller_common import from_the_controller

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 3


def partitions_of(req, version: int) -> list[tuple[tuple[str, int], bool, int]]:
    """(tp, delete, leader_epoch) per partition in the request."""
    if version == 0:
        return [((p.topic_name, p.partition_index), bool(req.delete_partitions), -1)
                for p in req.ungrouped_partitions]
    if version <= 2:
        return [((t.name, i), bool(req.delete_partitions), -1) for t in req.topics for i in t.partition_indexes]
    return [((t.topic_name, p.partition_index), bool(p.delete_partition), p.leader_epoch)
            for t in req.topic_states for p in t.partition_states]


def handle(ctx: BrokerContext, rc: RequestContext, req):
    if not authorize(ctx, rc, CLUSTER_ACTION, CLUSTER):
        return error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return from_the_controller(ctx, "StopReplica", req, rc.api_version >= 1, lambda: _stop(ctx, rc, req),
                               lambda code: error_response(req, rc.api_version, code))


def _stop(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    parts = partitions_of(req, rc.api_version)
    top, errors = ctx.replica_manager.stop_replicas(req.controller_epoch, parts)
    hosted = {t for t, _ in ctx.replica_manager.partitions}
    for (topic, _), delete, _ in parts:
        if delete and topic not in hosted:   # (a reassignment may delete one partition of many)
            ctx.topic_configs.pop(topic, None)
    return _response(top, parts, errors)


def _response(top: ErrorCode, parts, errors: dict) -> dict:
    return {"error_code": int(top), "partition_errors": [
        {"topic_name": tp[0], "partition_index": tp[1], "error_code": int(errors.get(tp, top))}
        for tp, _, _ in parts]}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response(code, partitions_of(req, version), {})
