"""Produce (key 0, v0-8): append each partition's record batch on its leader.

Invariant: the records stay opaque (the log validates batch headers and CRCs and
appends them as received, or leaves the partition untouched on error). v0-2
(magic 0/1 message sets) get UNSUPPORTED_FOR_MESSAGE_FORMAT; v3+ must carry exactly
one batch per partition. acks=0 gets no response at all (but an error closes the
connection, as Kafka does); acks=-1 waits for the HW in the produce purgatory.
"""
from __future__ import annotations

from twisted.internet import defer

from odradek.protocol.apis import produce as API
from odradek.protocol.errors import ErrorCode

from ..partition import batch_count_is_one
from ..replica_manager import produce_error
from .context import BrokerContext, CloseConnection, RequestContext, sync_or_deferred

MIN_VERSION = 0
MAX_VERSION = 8


def handle(ctx: BrokerContext, rc: RequestContext, req):
    version = rc.api_version
    acks = req.acks
    order: list[tuple[str, list[int]]] = []
    early: dict[tuple[str, int], dict] = {}
    entries: dict[tuple[str, int], bytes] = {}
    for td in req.topic_data:
        indexes = []
        order.append((td.name, indexes))
        for pd in td.partition_data:
            tp = (td.name, pd.index)
            indexes.append(pd.index)
            records = pd.records
            if acks not in (0, 1, -1):
                early[tp] = produce_error(ErrorCode.INVALID_REQUIRED_ACKS)
            elif version < 3:
                early[tp] = produce_error(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT)
            elif not records or not batch_count_is_one(records):
                early[tp] = produce_error(ErrorCode.INVALID_RECORD)
            else:
                entries[tp] = records if type(records) is bytes else bytes(records)

    def start(respond):
        if not entries:
            respond({})
        else:
            ctx.replica_manager.append_records(req.timeout_ms, acks, entries, respond)

    def build(results: dict) -> dict | None:
        results = {**early, **results}
        if acks == 0:
            if any(r["error_code"] for r in results.values()):
                raise CloseConnection("acks=0 produce failed for some partition")
            return None
        return {"responses": [
            {"name": topic, "partition_responses": [dict(results[(topic, i)], index=i) for i in indexes]}
            for topic, indexes in order], "throttle_time_ms": 0}

    result = sync_or_deferred(start)
    if isinstance(result, defer.Deferred):
        return result.addCallback(build)
    return build(result)


def error_response(req, version: int, code: ErrorCode) -> dict | None:
    if req.acks == 0:
        return None
    return {"responses": [
        {"name": td.name, "partition_responses": [dict(produce_error(code), index=pd.index)
                                                   for pd in td.partition_data]}
        for td in req.topic_data], "throttle_time_ms": 0}
