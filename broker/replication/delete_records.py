"""DeleteRecords on the leader (Kafka's ReplicaManager.deleteRecords with DelayedDeleteRecords).

Invariant: a partition's log start moves only on its leader, only to an offset in [0, HW] (-1
means the HW), only forward, and only if its cleanup.policy has ``delete``; anything else is
answered with Kafka's error and changes nothing. The answer for a partition whose start moved
waits in the replica manager's ``delete_records_purgatory`` until its low watermark (the lowest
log start of its replicas on live brokers, which followers report in each Fetch) reaches the
offset, or the timeout (REQUEST_TIMED_OUT).
"""
from __future__ import annotations

import logging
from typing import Any

from odradek.broker.completion import Completion
from odradek.protocol.errors import ErrorCode, KafkaError

from .delayed import DelayedDeleteRecords, ProducePartitionStatus

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def delete_records(rm: Any, timeout_ms: int, offsets: dict[TopicPartition, int]
                   ) -> Completion[dict[TopicPartition, dict]]:
    """Move each partition's log start (at once) and complete with {"low_watermark",
    "error_code"} per partition once every live replica's log starts there too."""
    results: dict[TopicPartition, dict] = {}
    required: dict[TopicPartition, int] = {}
    for tp, offset in offsets.items():
        results[tp] = {"low_watermark": -1, "error_code": 0}
        try:
            required[tp] = _delete_on_leader(rm, tp, offset)
        except KafkaError as e:
            results[tp]["error_code"] = int(e.code)
    done: Completion[dict[TopicPartition, dict]] = Completion()
    statuses = {tp: ProducePartitionStatus(required.get(tp, -1), res, pending=tp in required)
                for tp, res in results.items()}

    def low_watermark(tp: TopicPartition) -> tuple[int, ErrorCode]:
        p = rm.partitions.get(tp)
        if p is None or not p.is_leader:
            return -1, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return p.low_watermark(rm.metadata_cache.alive_broker_ids()), ErrorCode.NONE
    op = DelayedDeleteRecords(timeout_ms, statuses, low_watermark, done.complete)
    rm.delete_records_purgatory.try_complete_else_watch(op, list(required))
    return done


def _delete_on_leader(rm: Any, tp: TopicPartition, offset: int) -> int:
    p = rm.leader_partition(tp)
    if not p.log.config.delete_enabled:
        raise KafkaError(ErrorCode.POLICY_VIOLATION,
                         f"Records of partition {tp[0]}-{tp[1]} can not be deleted due to the configured policy")
    target = p.high_watermark if offset == -1 else offset
    if target < 0:
        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"The offset {target} for partition {tp[0]}-{tp[1]} is not valid")
    if target > p.high_watermark:
        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"Cannot increment the log start offset to {target} of "
                         f"partition {tp[0]}-{tp[1]} since it is larger than the high watermark {p.high_watermark}")
    with p.io_guard("moving the log start offset of"):
        if p.log.maybe_increment_log_start_offset(target):
            log.info("log start offset of %s-%d moved to %d (DeleteRecords)", tp[0], tp[1], target)
    rm.fetch_purgatory.check_and_complete(tp)
    return target
