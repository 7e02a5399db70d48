"""AlterPartitionReassignments (key 45, v0): start, change or cancel partition reassignments.

Invariant: as KafkaApis.handleAlterPartitionReassignmentsRequest: Alter on the Cluster is needed
(CLUSTER_AUTHORIZATION_FAILED otherwise, nothing started); only the active controller acts
(NOT_CONTROLLER, top-level, so the admin client looks for it again); the controller's event
queue validates and starts each partition's reassignment (``PartitionReassignments.alter``) and
the answer comes once they are started, not finished (ListPartitionReassignments follows them).
A partition named twice keeps its last entry, as Kafka's map does.
"""
from __future__ import annotations

from twisted.internet import defer

from odradek.protocol.apis import alter_partition_reassignments as API
from odradek.protocol.errors import ErrorCode, KafkaError

from .authz import ALTER, CLUSTER, authorize
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 0


def _asked(req) -> dict[tuple[str, int], list[int] | None]:
    return {(t.name, p.partition_index): (None if p.replicas is None else list(p.replicas))
            for t in req.topics for p in t.partitions}


def _response(code: ErrorCode, message: str | None, results: dict[tuple[str, int], tuple[ErrorCode, str | None]]
              ) -> dict:
    topics: dict[str, list[dict]] = {}
    for (topic, partition), (c, m) in results.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": int(c), "error_message": m})
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message,
            "responses": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def handle(ctx: BrokerContext, rc: RequestContext, req):
    if not authorize(ctx, rc, ALTER, CLUSTER):
        return error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = ctx.controller
    if controller is None or not controller.is_active:
        return _response(ErrorCode.NOT_CONTROLLER, None, {})

    async def run() -> dict:
        try:
            results = await defer.ensureDeferred(controller.alter_partition_reassignments(_asked(req)))
        except KafkaError as e:
            return _response(e.code, e.message, {})
        return _response(ErrorCode.NONE, None, results)
    return defer.Deferred.fromCoroutine(run())


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response(code, None, {tp: (code, None) for tp in _asked(req)})
