"""AddOffsetsToTxn (key 25, v0-3): add a group's ``__consumer_offsets`` partition to the
producer's transaction, so TxnOffsetCommit can write there and EndTxn sends it a marker.

Invariant: the partition is the group's coordinator partition
(abs(hashCode(group)) % offsets.topic.num.partitions); the answer is the
TransactionCoordinator's, given after the transaction log write; PRODUCER_FENCED becomes
INVALID_PRODUCER_EPOCH for v0-1.
With an authorizer: Write on the TransactionalId (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and
Read on the group (GROUP_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from odradek.broker.group.offsets import GROUP_METADATA_TOPIC, partition_for
from odradek.protocol.apis import add_offsets_to_txn as API
from odradek.protocol.errors import ErrorCode

from .authz import GROUP, READ, TRANSACTIONAL_ID, WRITE, authorize
from .context import BrokerContext, RequestContext, to_deferred
from .txn_common import coordinator, fenced_for_version

MIN_VERSION = 0
MAX_VERSION = 3
PRODUCER_FENCED_VERSION = 2


def _response(code: ErrorCode | int) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code)}


def handle(ctx: BrokerContext, rc: RequestContext, req):
    if not authorize(ctx, rc, WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return _response(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authorize(ctx, rc, READ, GROUP, req.group_id):
        return _response(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coord = coordinator(ctx)
    if coord is None:
        return _response(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    partition = partition_for(req.group_id, int(ctx.config["offsets.topic.num.partitions"]))

    def answer(code: ErrorCode) -> dict:
        return _response(fenced_for_version(code, rc.api_version, PRODUCER_FENCED_VERSION))
    return to_deferred(coord.handle_add_partitions(
        req.transactional_id, req.producer_id, req.producer_epoch,
        [(GROUP_METADATA_TOPIC, partition)])).addCallback(answer)


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response(code)
