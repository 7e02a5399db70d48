"""Produce (key 0, v0-9): append each partition's record batch on its leader.

Invariant: the records stay opaque (the log validates batch headers and CRCs and
appends them as received, or leaves the partition untouched on error). v0-2 may carry
magic 0/1 message sets (the log converts them to one magic-2 batch) or magic 2 (Kafka's
ProduceRequest.validateRecords constrains only v3+); v3+ must carry exactly one magic-2
batch per partition (else INVALID_RECORD). acks=0 gets no response at all (but an error closes the
connection, as Kafka does); acks=-1 waits for the HW in the produce purgatory.
Clients cannot write to internal topics (INVALID_TOPIC_EXCEPTION; the group coordinator
appends through the replica manager directly). What a batch must be (one per partition,
keys on a compacted topic, CRC, sizes, timestamps, sequences) the log decides
(``Log.append_as_leader``), under the partition's leadership checks. Transactional batches need the request's transactional_id (else
every partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka answers).
With an authorizer (KafkaApis.handleProduceRequest): transactional batches need Write on the
TransactionalId (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED everywhere), other idempotent
batches IdempotentWrite on the Cluster (else CLUSTER_AUTHORIZATION_FAILED everywhere), and each
topic Write (else TOPIC_AUTHORIZATION_FAILED for its partitions, nothing appended there).
"""
from __future__ import annotations

from typing import Callable

from odradek.broker.completion import Completion
from odradek.protocol.apis import produce as API
from odradek.protocol.errors import ErrorCode
from odradek.protocol.header import RequestHeader
from odradek.protocol.produce_one import OnePartitionProduce, encode_answer
from odradek.protocol.record_batch import HEADER_SIZE, MAGIC, TRANSACTIONAL_MASK
from odradek.zk.topics import is_internal

from ..replication.replica_manager import produce_error
from .authz import CLUSTER, IDEMPOTENT_WRITE, TOPIC, TRANSACTIONAL_ID, WRITE, authorize, denied
from .context import BrokerContext, CloseConnection, RequestContext, respond_when

MIN_VERSION = 0
MAX_VERSION = 9
PRODUCER_ID_AT = 43   # the producerId's first byte in a v2 batch header
MAGIC_AT = 16         # the magic byte of a batch (and of a magic 0/1 message)
ATTRIBUTES_LOW_AT = 22   # the low byte of a v2 batch's attributes


def handle(ctx: BrokerContext, rc: RequestContext, req):
    version = rc.api_version
    acks = req["acks"]
    topic_data = req["topic_data"]
    transactional = _has_transactional(topic_data)
    refused = _refusal(ctx, rc, req.get("transactional_id"), transactional,   # v0-2 have no transactional id
                       lambda: _has_idempotent(req))
    if refused:
        return error_response(req, version, refused)
    unauthorized = denied(ctx, rc, WRITE, TOPIC, (td["name"] for td in topic_data))
    order: list[tuple[str, list[int]]] = []
    early: dict[tuple[str, int], dict] = {}
    entries: dict[tuple[str, int], bytes | memoryview] = {}   # a lent frame's records are views into it
    for td in topic_data:
        name = td["name"]
        indexes: list[int] = []
        order.append((name, indexes))
        for pd in td["partition_data"]:
            index = pd["index"]
            tp = (name, index)
            indexes.append(index)
            records = pd["records"]
            code = _early_error(acks, version, name, records, name in unauthorized)
            if code:
                early[tp] = produce_error(code)
            else:
                entries[tp] = records

    def build(results: dict | None) -> dict | None:
        results = {**early, **(results or {})}
        if acks == 0:
            if any(r["error_code"] for r in results.values()):
                raise CloseConnection("acks=0 produce failed for some partition")
            return None
        return {"responses": [
            {"name": topic, "partition_responses": [dict(results[(topic, i)], index=i) for i in indexes]}
            for topic, indexes in order], "throttle_time_ms": 0}

    if not entries:
        return build({})
    return respond_when(ctx.replica_manager.append_records(req["timeout_ms"], acks, entries), build)


def handle_one(ctx: BrokerContext, rc: RequestContext | None, header: RequestHeader, one: OnePartitionProduce
               ) -> bytes | dict | None | Completion:
    """``handle`` for the common request (``protocol/produce_one.py``: one partition, no
    transactional id), read straight from the frame: the same checks, the same append, the same
    answer, without the general path's per-request tables. ``rc`` is needed with an authorizer only.
    A plain answer comes back encoded whole, its response header included (``encode_answer``);
    any other as a body."""
    acks, topic, index, records = one.acks, one.topic, one.partition, one.records
    transactional = bool(_first_batch_attribute(records, ATTRIBUTES_LOW_AT, TRANSACTIONAL_MASK))
    unauthorized = False
    if transactional or ctx.authorizer is not None:
        refused = _refusal(ctx, rc, None, transactional,
                           lambda: _first_batch_attribute(records, PRODUCER_ID_AT, 0x80) == 0)
        if refused:   # as error_response answers: nothing at all for acks=0
            return None if acks == 0 else _one_answer(acks, header, topic, index, produce_error(refused))
        if ctx.authorizer is not None:
            assert rc is not None   # the dispatcher passes one whenever an authorizer is set
            unauthorized = bool(denied(ctx, rc, WRITE, TOPIC, (topic,)))
    code = _early_error(acks, header.api_version, topic, records, unauthorized)
    if code:
        return _one_answer(acks, header, topic, index, produce_error(code))
    tp = (topic, index)
    done = ctx.replica_manager.append_one(one.timeout_ms, acks, tp, records)
    if isinstance(done, dict):
        return _one_answer(acks, header, topic, index, done)
    return respond_when(done, lambda results: _one_answer(acks, header, topic, index, results[tp]))


def _refusal(ctx: BrokerContext, rc: RequestContext | None, transactional_id: str | None, transactional: bool,
             idempotent: Callable[[], bool]) -> ErrorCode | None:
    """What the whole request is answered when its batches may not be written at all: a
    transactional batch needs the request's transactional id and, with an authorizer, Write on
    it; an idempotent one IdempotentWrite on the cluster (KafkaApis.handleProduceRequest)."""
    if transactional_id is None and transactional:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if ctx.authorizer is None:
        return None
    assert rc is not None
    if transactional:
        if not authorize(ctx, rc, WRITE, TRANSACTIONAL_ID, transactional_id or ""):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif idempotent() and not authorize(ctx, rc, IDEMPOTENT_WRITE, CLUSTER):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None


def _one_answer(acks: int, header: RequestHeader, topic: str, index: int, result: dict) -> bytes | dict | None:
    if acks == 0:
        if result["error_code"]:
            raise CloseConnection("acks=0 produce failed for some partition")
        return None
    if "error_message" in result:   # records refused one by one (Produce v8+ lists them)
        return {"responses": [{"name": topic, "partition_responses": [dict(result, index=index)]}],
                "throttle_time_ms": 0}
    return encode_answer(header.api_version, header.correlation_id, topic, index, result["error_code"],
                         result["base_offset"], result["log_append_time_ms"], result["log_start_offset"])


def _early_error(acks: int, version: int, topic: str, records: bytes | memoryview | None,
                 unauthorized: bool = False) -> ErrorCode | None:
    """What a partition is answered before any append, or None to append it."""
    if acks not in (0, 1, -1):
        return ErrorCode.INVALID_REQUIRED_ACKS
    if unauthorized:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if not records or (version >= 3 and len(records) > MAGIC_AT and records[MAGIC_AT] != MAGIC):
        return ErrorCode.INVALID_RECORD
    if is_internal(topic):
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    return None


def _has_transactional(topic_data) -> bool:
    """Whether a partition's first batch has the transactional attribute (bit 4); plain loops:
    this runs on every produce."""
    for td in topic_data:
        for pd in td["partition_data"]:
            if _first_batch_attribute(pd["records"], ATTRIBUTES_LOW_AT, TRANSACTIONAL_MASK):
                return True
    return False


def _has_idempotent(req) -> bool:
    """Whether a partition's first batch carries a producer id (bytes 43-50 not negative)."""
    return any(_first_batch_attribute(pd["records"], PRODUCER_ID_AT, 0x80) == 0
               for td in req["topic_data"] for pd in td["partition_data"])


def _first_batch_attribute(records: bytes | memoryview | None, at: int, mask: int) -> int | None:
    """``records[at] & mask`` of a magic-2 first batch; None for no batch or another format."""
    if records is None or len(records) < HEADER_SIZE or records[MAGIC_AT] != MAGIC:
        return None
    return records[at] & mask


def error_response(req, version: int, code: ErrorCode) -> dict | None:
    if req.acks == 0:
        return None
    return {"responses": [
        {"name": td.name, "partition_responses": [dict(produce_error(code), index=pd.index)
                                                   for pd in td.partition_data]}
        for td in req.topic_data], "throttle_time_ms": 0}
