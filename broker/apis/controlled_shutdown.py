"""ControlledShutdown (key 7, v0-3): a broker asks the controller to move its leaderships away.

Invariant: only the active controller answers (others: NOT_CONTROLLER); the
controller's ``controlled_shutdown(broker_id, broker_epoch)`` returns the
partitions still led by that broker (empty = safe to stop) or raises KafkaError
(e.g. STALE_BROKER_EPOCH).
With an authorizer, the sender needs ClusterAction on the Cluster
(CLUSTER_AUTHORIZATION_FAILED otherwise, nothing changed).
"""
from __future__ import annotations

import logging

from twisted.internet import defer

from odradek.protocol.apis import controlled_shutdown as API
from odradek.protocol.errors import ErrorCode, KafkaError

from .authz import CLUSTER, CLUSTER_ACTION, authorize
from .context import BrokerContext, RequestContext

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 3


def handle(ctx: BrokerContext, rc: RequestContext, req):
    if not authorize(ctx, rc, CLUSTER_ACTION, CLUSTER):
        return error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = ctx.controller
    if controller is None or not controller.is_active:
        return error_response(req, rc.api_version, ErrorCode.NOT_CONTROLLER)

    async def run() -> dict:
        epoch = req.broker_epoch if rc.api_version >= 2 else -1
        try:
            remaining = await defer.ensureDeferred(controller.controlled_shutdown(req.broker_id, epoch))
        except KafkaError as e:
            return error_response(req, rc.api_version, e.code)
        return {"error_code": 0, "remaining_partitions": [
            {"topic_name": t, "partition_index": p} for t, p in (remaining or [])]}
    return defer.Deferred.fromCoroutine(run())


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"error_code": int(code), "remaining_partitions": []}
