"""ElectLeaders (key 43, v0-2): preferred or unclean leader election, asked by an admin client.

Invariant: as KafkaApis.handleElectReplicaLeader with ReplicaManager.electLeaders: Alter on the
Cluster is needed (CLUSTER_AUTHORIZATION_FAILED for every partition otherwise); only the active
controller elects (NOT_CONTROLLER, top-level from v1 so clients look for it again); the
controller's event queue decides per partition (``ControllerCore.elect_leaders``) and the answer
waits, at most ``timeout_ms``, until this broker's metadata shows each new leader
(REQUEST_TIMED_OUT for those it did not). Null ``topic_partitions``: every partition.
"""
from __future__ import annotations

from twisted.internet import defer

from odradek.protocol.apis import elect_leaders as API
from odradek.protocol.errors import ErrorCode, KafkaError

from .authz import ALTER, CLUSTER, authorize
from .context import BrokerContext, RequestContext, wait_for_metadata

MIN_VERSION = 0
MAX_VERSION = 2
UNCLEAN = 1

Outcome = tuple[ErrorCode, "str | None"]


def _asked(req) -> list[tuple[str, int]] | None:
    if req.topic_partitions is None:
        return None
    return list(dict.fromkeys((t.topic, p) for t in req.topic_partitions for p in t.partition_id))


def _response(code: ErrorCode, results: dict[tuple[str, int], Outcome]) -> dict:
    topics: dict[str, list[dict]] = {}
    for (topic, partition), (c, message) in results.items():
        topics.setdefault(topic, []).append({"partition_id": partition, "error_code": int(c), "error_message": message})
    return {"throttle_time_ms": 0, "error_code": int(code), "replica_election_results": [
        {"topic": t, "partition_result": parts} for t, parts in topics.items()]}


def handle(ctx: BrokerContext, rc: RequestContext, req):
    if not authorize(ctx, rc, ALTER, CLUSTER):
        return error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = ctx.controller
    if controller is None or not controller.is_active:
        return error_response(req, rc.api_version, ErrorCode.NOT_CONTROLLER)
    unclean = rc.api_version >= 1 and req.election_type == UNCLEAN

    async def run() -> dict:
        try:
            decided = await defer.ensureDeferred(controller.elect_leaders(_asked(req), unclean))
        except KafkaError as e:
            return error_response(req, rc.api_version, e.code)
        expected = {tp: leader for tp, (code, _, leader) in decided.items() if code == ErrorCode.NONE}

        def shown() -> list[tuple[str, int]]:
            return [tp for tp, leader in expected.items()
                    if (st := ctx.metadata_cache.partition_state(*tp)) is not None and st.leader == leader]
        await wait_for_metadata(ctx, lambda: len(shown()) == len(expected), req.timeout_ms)
        seen = set(shown())
        results: dict[tuple[str, int], Outcome] = {}
        for tp, (code, message, _) in decided.items():
            if code == ErrorCode.NONE and tp not in seen:
                results[tp] = (ErrorCode.REQUEST_TIMED_OUT, None)
            else:
                results[tp] = (code, message)
        return _response(ErrorCode.NONE, results)
    return defer.Deferred.fromCoroutine(run())


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response(code, {tp: (code, None) for tp in _asked(req) or ()})
