"""WriteTxnMarkers (key 27, v0-1): the transaction coordinator ends a transaction on partitions.

Invariant: each (marker, partition) is appended as a control batch by the partition's
leader (``ReplicaManager.append_txn_markers``) and answered only once replicated
(acks=-1, request.timeout.ms at most), with its own error code: NOT_LEADER_OR_FOLLOWER /
UNKNOWN_TOPIC_OR_PARTITION (retriable for the coordinator), INVALID_PRODUCER_EPOCH,
TRANSACTION_COORDINATOR_FENCED, NOT_ENOUGH_REPLICAS... After a marker is replicated
on a ``__consumer_offsets`` partition the group coordinator is told
(``group_service.on_txn_marker_written``) so it completes the pending offset commits.
With an authorizer, the sender needs ClusterAction on the Cluster
(CLUSTER_AUTHORIZATION_FAILED otherwise, nothing changed).
"""
from __future__ import annotations

import logging
from functools import partial

from odradek.broker.completion import Completion
from odradek.protocol.apis import write_txn_markers as API
from odradek.protocol.errors import ErrorCode

from .authz import CLUSTER, CLUSTER_ACTION, authorize
from .context import BrokerContext, RequestContext, respond_when

log = logging.getLogger(__name__)

MIN_VERSION = 0
MAX_VERSION = 1

GROUP_METADATA_TOPIC = "__consumer_offsets"


def handle(ctx: BrokerContext, rc: RequestContext, req):
    if not authorize(ctx, rc, CLUSTER_ACTION, CLUSTER):
        return error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    timeout_ms = int(ctx.config["request.timeout.ms"])
    pending: list[Completion[None]] = []
    answers: list[tuple[int, list[tuple[str, list[tuple[int, dict]]]]]] = []
    for m in req.markers:
        entries: dict[tuple[str, int], tuple[int, int, bool, int]] = {}
        topics: list[tuple[str, list[tuple[int, dict]]]] = []
        for t in m.topics:
            parts: list[tuple[int, dict]] = []
            for index in t.partition_indexes:
                slot = {"error_code": 0}
                parts.append((index, slot))
                entries[(t.name, index)] = (m.producer_id, m.producer_epoch, bool(m.transaction_result),
                                            m.coordinator_epoch)
            topics.append((t.name, parts))
        answers.append((m.producer_id, topics))
        slots = {(name, index): slot for name, parts in topics for index, slot in parts}
        pending.append(ctx.replica_manager.append_txn_markers(timeout_ms, entries)
                       .map(partial(_done, ctx, m, slots=slots)))

    def build(_) -> dict:
        return {"markers": [
            {"producer_id": pid, "topics": [
                {"name": name, "partitions": [{"partition_index": i, "error_code": s["error_code"]}
                                              for i, s in parts]} for name, parts in topics]}
            for pid, topics in answers]}

    return respond_when(Completion.all_of(pending), build)


def _done(ctx: BrokerContext, marker, results: dict[tuple[str, int], dict], slots: dict) -> None:
    committed = bool(marker.transaction_result)
    for tp, r in results.items():
        code = int(r["error_code"])
        if tp in slots:
            slots[tp]["error_code"] = code
        if code == 0 and tp[0] == GROUP_METADATA_TOPIC:
            if ctx.group_service is not None:
                try:
                    ctx.group_service.on_txn_marker_written(tp[1], marker.producer_id, committed)
                except Exception:
                    log.exception("completing transactional offsets of producer %d on %s-%d failed",
                                  marker.producer_id, *tp)


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"markers": [
        {"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [{"partition_index": i, "error_code": int(code)}
                                            for i in t.partition_indexes]} for t in m.topics]}
        for m in req.markers]}
