"""What the transaction API handlers share: the coordinator lookup,
and Kafka's mapping of PRODUCER_FENCED for request versions that predate it.

Invariant: a handler reaches the transaction coordinator only through ``coordinator(ctx)``,
which is None until the broker started it (handlers then answer
COORDINATOR_NOT_AVAILABLE). Not a handler module (it is not listed in the registry).
"""
from __future__ import annotations

from odradek.broker.txn import TransactionCoordinator
from odradek.protocol.errors import ErrorCode

from .context import BrokerContext


def coordinator(ctx: BrokerContext) -> TransactionCoordinator | None:
    """The broker's running TransactionCoordinator, or None (not started / shut down)."""
    coord = ctx.txn_coordinator
    return coord if coord is not None and coord.active else None


def fenced_for_version(code: ErrorCode | int, version: int, first_version: int) -> ErrorCode:
    """KafkaApis: clients older than ``first_version`` do not know PRODUCER_FENCED and get
    INVALID_PRODUCER_EPOCH (same handling on their side)."""
    code = ErrorCode(code)
    if code == ErrorCode.PRODUCER_FENCED and version < first_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code
