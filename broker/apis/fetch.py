"""Fetch (key 1, v0-12): consumers read up to the HW, followers up to the LEO,
read_committed consumers (isolation_level 1, v4+) up to the last stable offset with the
aborted transactions overlapping what they got (v4+ responses carry the LSO).
v12 (KIP-595, as Kafka 2.8's Partition.readRecords): a partition's ``last_fetched_epoch`` (-1 =
not sent) is checked against the leader-epoch cache; a fetcher whose log diverged gets no data
but ``diverging_epoch`` (that epoch's end here), answered without waiting, and its fetch state is
not recorded; an epoch the cache cannot place is OFFSET_OUT_OF_RANGE. ``current_leader`` and
``snapshot_id`` stay unset, as in Kafka 2.8's ZooKeeper mode.

Invariant: record bytes go from ``Log.read`` to the response untouched. Total
max_bytes and partition_max_bytes are honoured, with at least one batch for the
first non-empty partition. Fewer than min_bytes available → the request waits in
the fetch purgatory (woken by appends / HW moves / role changes) up to max_wait_ms.
v7+ fetches may keep an incremental fetch session (KIP-227, ``replication/fetch_sessions.py``):
the request then names only what changed, and the answer only partitions with something new;
a sessionless fetch (epoch -1, no session named) never touches the session cache. v0-3 cannot carry
magic-2 data: what was read is down-converted (``protocol/legacy_records.down_convert``, as
Kafka's LazyDownConversionRecords: v0-1 get magic 0, v2-3 magic 1, offsets kept, control
batches dropped, at least the first batch, then whole messages within the bytes read), unless
the topic's ``message.downconversion.enable`` is false: UNSUPPORTED_VERSION for a consumer, as
Kafka. A batch that cannot be down-converted (zstd) first: UNSUPPORTED_COMPRESSION_TYPE.
With an authorizer (KafkaApis.handleFetchRequest): a follower (replica id >= 0) needs
ClusterAction on the Cluster, else every partition answers TOPIC_AUTHORIZATION_FAILED (Kafka
2.8's code) and its fetch state is not recorded; a consumer needs Read on each topic, else that
topic's partitions answer TOPIC_AUTHORIZATION_FAILED and are not read.
"""
from __future__ import annotations

from odradek.protocol.apis import fetch as API
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.fetch_session_handler import FINAL_EPOCH, INVALID_SESSION_ID
from odradek.protocol.legacy_records import down_convert

from ..replication.delayed import FetchParams, FetchPartition
from ..replication.fetch_sessions import FetchContext
from ..replication.replica_manager import fetch_error
from .authz import CLUSTER, CLUSTER_ACTION, READ, TOPIC, authorize, denied
from .context import BrokerContext, RequestContext, respond_when

MIN_VERSION = 0
MAX_VERSION = 12


def handle(ctx: BrokerContext, rc: RequestContext, req):
    # Fields are read as items, once each: a decoded request is a dict, and its attribute access
    # (a failed lookup first) cost as much as the rest of this handler (issue 17).
    version = rc.api_version
    replica_id = req["replica_id"]
    partitions = [FetchPartition(t["topic"], p["partition"], p["fetch_offset"], p["partition_max_bytes"],
                                 p["current_leader_epoch"], p["log_start_offset"], p["last_fetched_epoch"])
                  for t in req["topics"] for p in t["partitions"]]
    session: FetchContext | None = None
    if version >= 7 and (req["session_epoch"] != FINAL_EPOCH or req["session_id"] != INVALID_SESSION_ID):
        forgotten = [(t["topic"], p) for t in req["forgotten_topics_data"] for p in t["partitions"]]
        found = ctx.fetch_sessions.context(req["session_id"], req["session_epoch"], partitions, forgotten,
                                           (replica_id, rc.principal), ctx.replica_manager.now_ms())
        if isinstance(found, ErrorCode):
            return _top_level_error(found)
        if found is not None:
            session = found
            partitions = found.partitions
    refused = _refused_topics(ctx, rc, replica_id, partitions)
    params = FetchParams(
        replica_id=replica_id, max_wait_ms=req["max_wait_ms"], min_bytes=req["min_bytes"],
        max_bytes=req["max_bytes"] if version >= 3 else 0x7FFFFFFF,
        isolation_level=req["isolation_level"] if version >= 4 else 0,
        partitions=[fp for fp in partitions if fp.topic not in refused] if refused else partitions)
    read_committed = params.isolation_level == 1
    quotas = ctx.quotas
    if quotas is not None and quotas.active and replica_id < 0:   # a consumer under consumer_byte_rate
        cap = quotas.fetch_max_bytes(rc.client_id, rc.principal)
        if cap is not None and cap < params.max_bytes:
            params.max_bytes = cap

    def build(results: list[tuple[FetchPartition, dict]]) -> dict:
        if refused:
            results = [(fp, fetch_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                       for fp in partitions if fp.topic in refused] + results
        session_id = INVALID_SESSION_ID
        if session is not None:
            session_id, results = session.answer(results)
        responses: list[dict] = []
        for fp, r in results:
            if not responses or responses[-1]["topic"] != fp.topic:
                responses.append({"topic": fp.topic, "partition_responses": []})
            parts = responses[-1]["partition_responses"]
            records = r["records"]
            code = r["error_code"]
            if version < 4 and records:
                code, records = _down_converted(ctx, replica_id, fp, records, 0 if version < 2 else 1)
                if code:
                    r = fetch_error(code)
            parts.append({"partition": fp.partition, "error_code": code,
                          "high_watermark": r["high_watermark"],
                          "last_stable_offset": r["last_stable_offset"],
                          "log_start_offset": r["log_start_offset"],
                          "aborted_transactions": r.get("aborted_transactions", []) if read_committed else None,
                          "preferred_read_replica": -1, "record_set": records})
            if "diverging_epoch" in r:
                epoch, end = r["diverging_epoch"]
                parts[-1]["diverging_epoch"] = {"epoch": epoch, "end_offset": end}
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": session_id, "responses": responses}

    if refused and not params.partitions:
        return build([])
    return respond_when(ctx.replica_manager.fetch_messages(params), build)


def _down_converted(ctx: BrokerContext, replica_id: int, fp: FetchPartition, records: bytes,
                    magic: int) -> tuple[int, bytes]:
    """(error code, records as a message set of ``magic``) for a Fetch v0-3."""
    config = ctx.replica_manager.log_config(fp.topic)
    if replica_id < 0 and config is not None and not config["message.downconversion.enable"]:
        return int(ErrorCode.UNSUPPORTED_VERSION), b""
    try:
        return 0, down_convert(records, magic, fp.fetch_offset, len(records))
    except KafkaError as e:
        return int(e.code), b""


def _refused_topics(ctx: BrokerContext, rc: RequestContext, replica_id: int,
                    partitions: list[FetchPartition]) -> set[str]:
    if ctx.authorizer is None:
        return set()
    if replica_id >= 0:
        return set() if authorize(ctx, rc, CLUSTER_ACTION, CLUSTER) else {fp.topic for fp in partitions}
    return denied(ctx, rc, READ, TOPIC, {fp.topic for fp in partitions})


def _top_level_error(code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "session_id": INVALID_SESSION_ID,
            "responses": []}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code) if version >= 7 else 0,
            "session_id": INVALID_SESSION_ID,
            "responses": [{"topic": t.topic, "partition_responses": [
                {"partition": p.partition, "error_code": int(code), "high_watermark": -1,
                 "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                 "preferred_read_replica": -1, "record_set": b""} for p in t.partitions]}
                for t in req.topics]}
