"""ListPartitionReassignments (key 46, v0): the partition reassignments in progress.

Invariant: as KafkaApis.handleListPartitionReassignmentsRequest: Describe on the Cluster is
needed (CLUSTER_AUTHORIZATION_FAILED otherwise); only the active controller answers
(NOT_CONTROLLER); each ongoing reassignment is listed with its full replica set and the replicas
being added and removed, as the controller's context holds them. Partitions asked for that are
not being reassigned (or do not exist) are left out.
"""
from __future__ import annotations

from twisted.internet import defer

from odradek.protocol.apis import list_partition_reassignments as API
from odradek.protocol.errors import ErrorCode, KafkaError

from .authz import CLUSTER, DESCRIBE, authorize
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 0


def _asked(req) -> list[tuple[str, int]] | None:
    if req.topics is None:
        return None
    return [(t.name, p) for t in req.topics for p in t.partition_indexes]


def _response(code: ErrorCode, ongoing: dict) -> dict:
    topics: dict[str, list[dict]] = {}
    for (topic, partition), ra in ongoing.items():
        topics.setdefault(topic, []).append({
            "partition_index": partition, "replicas": list(ra.replicas),
            "adding_replicas": list(ra.adding_replicas), "removing_replicas": list(ra.removing_replicas)})
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def handle(ctx: BrokerContext, rc: RequestContext, req):
    if not authorize(ctx, rc, DESCRIBE, CLUSTER):
        return error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = ctx.controller
    if controller is None or not controller.is_active:
        return error_response(req, rc.api_version, ErrorCode.NOT_CONTROLLER)

    async def run() -> dict:
        try:
            ongoing = await defer.ensureDeferred(controller.list_partition_reassignments(_asked(req)))
        except KafkaError as e:
            return error_response(req, rc.api_version, e.code)
        return _response(ErrorCode.NONE, ongoing)
    return defer.Deferred.fromCoroutine(run())


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response(code, {})
