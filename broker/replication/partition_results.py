"""What a produce or fetch answers for one partition when it fails, and the aborted
transactions a fetched range overlaps: the per-partition result bodies the replica manager hands
the Produce and Fetch handlers.

Invariant: plain functions of their arguments (no state); a failed partition's body carries the
error and -1 for every offset, as Kafka's do.
"""
from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import iter_headers

from ..log.validator import RecordValidationError


def produce_error(code: ErrorCode | int, error: KafkaError | None = None) -> dict:
    """A partition's failed produce; records refused one by one (``RecordValidationError``) are
    listed in ``record_errors`` with ``error_message`` set, as Kafka answers Produce v8."""
    out: dict[str, Any] = {"error_code": int(code), "base_offset": -1, "log_append_time_ms": -1,
                           "log_start_offset": -1}
    if isinstance(error, RecordValidationError):
        out["record_errors"] = [{"batch_index": i, "batch_index_error_message": m} for i, m in error.record_errors]
        out["error_message"] = error.message
    return out


def _aborted_in(log_: Any, fetch_offset: int, records: bytes) -> list[dict]:
    """Aborted transactions overlapping the fetched batches ([fetch offset, next offset after them))."""
    if not records:
        return []
    upper = fetch_offset
    for _, h in iter_headers(records):
        upper = h.next_offset
    return [{"producer_id": t.producer_id, "first_offset": t.first_offset}
            for t in log_.collect_aborted_transactions(fetch_offset, upper)]


def fetch_error(code: ErrorCode | int) -> dict:
    return {"error_code": int(code), "high_watermark": -1, "last_stable_offset": -1,
            "log_start_offset": -1, "records": b""}
