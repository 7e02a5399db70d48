"""Transactional requests: the result a user waits on, the queued request, and its wire body.

Invariant: a ``TxnResult`` completes exactly once (success or one error); a
``TxnRequest`` holds everything needed to build its request again, so a retry
resends the same content (with the producer id/epoch current at send time).
"""
from __future__ import annotations

import threading
from types import ModuleType
from typing import Any, Callable, Mapping

from odradek.protocol.apis import add_offsets_to_txn as _add_offsets
from odradek.protocol.apis import add_partitions_to_txn as _add_partitions
from odradek.protocol.apis import end_txn as _end_txn
from odradek.protocol.apis import init_producer_id as _init_pid
from odradek.protocol.apis import txn_offset_commit as _txn_offset_commit
from odradek.protocol.errors import ErrorCode, KafkaError

from .structs import ConsumerGroupMetadata, KafkaTimeoutError, OffsetAndMetadata, TopicPartition

class TxnResult:
    """The outcome of one transactional operation; the user thread waits on it."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self._event = threading.Event()
        self.error: BaseException | None = None

    @property
    def is_done(self) -> bool:
        return self._event.is_set()

    def done(self, error: BaseException | None = None) -> None:
        if not self._event.is_set():
            self.error = error
            self._event.set()

    def wait(self, timeout: float | None) -> None:
        """Block until done; raise its error, or KafkaTimeoutError after ``timeout`` s."""
        if not self._event.wait(timeout):
            raise KafkaTimeoutError(f"timeout expired after {(timeout or 0) * 1000:.0f} ms while awaiting "
                                    f"{self.operation}")
        if self.error is not None:
            raise self.error


class TxnRequest:
    """One queued coordinator request (``kind``) with what it needs to be built and retried."""

    __slots__ = ("kind", "priority", "result", "coordinator_type", "coordinator_key", "not_before",
                 "partitions", "offsets", "group", "committed", "epoch_bump")

    def __init__(self, kind: str, priority: int, result: TxnResult, coordinator_type: int, coordinator_key: str,
                 **extra: Any) -> None:
        self.kind, self.priority, self.result = kind, priority, result
        self.coordinator_type, self.coordinator_key = coordinator_type, coordinator_key
        self.not_before = 0.0
        self.partitions: list[TopicPartition] = extra.get("partitions", [])
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = extra.get("offsets", {})
        self.group: ConsumerGroupMetadata | None = extra.get("group")
        self.committed: bool = extra.get("committed", False)
        self.epoch_bump: bool = extra.get("epoch_bump", False)

    def __repr__(self) -> str:
        return f"<TxnRequest {self.kind}>"


# priorities (Kafka's): lower goes first
P_INIT, P_ADD, P_END, P_BUMP = 1, 2, 3, 4


def normalize_offsets(offsets: Mapping[TopicPartition, Any]) -> dict[TopicPartition, OffsetAndMetadata]:
    out = {}
    for tp, v in offsets.items():
        om = v if isinstance(v, OffsetAndMetadata) else (
            OffsetAndMetadata(int(v)) if isinstance(v, int) else OffsetAndMetadata(*tuple(v)[:3]))
        out[TopicPartition(*tp)] = OffsetAndMetadata(int(om.offset), om.metadata or "",
                                                     -1 if om.leader_epoch is None else om.leader_epoch)
    return out


def build_request(req: TxnRequest, tid: str, pid: int, epoch: int, transaction_timeout_ms: int,
                  version_for: Callable[[ModuleType, int], int]) -> tuple[ModuleType, dict[str, Any], int]:
    """(api, body, version) of ``req``; ``version_for(api, max)`` is the connection's negotiation."""
    api: ModuleType
    if req.kind == "init":
        api = _init_pid
        body = {"transactional_id": tid, "transaction_timeout_ms": transaction_timeout_ms,
                "producer_id": pid if req.epoch_bump else -1,
                "producer_epoch": epoch if req.epoch_bump else -1}
    elif req.kind == "add_partitions":
        api = _add_partitions
        topics: dict[str, list[int]] = {}
        for tp in req.partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        body = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    elif req.kind == "add_offsets":
        api = _add_offsets
        body = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                "group_id": req.group.group_id}  # type: ignore[union-attr]
    elif req.kind == "txn_offset_commit":
        api = _txn_offset_commit
        g = req.group
        assert g is not None
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, om in req.offsets.items():
            by_topic.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": om.offset,
                "committed_leader_epoch": om.leader_epoch, "committed_metadata": om.metadata or ""})
        body = {"transactional_id": tid, "group_id": g.group_id, "producer_id": pid, "producer_epoch": epoch,
                "generation_id": g.generation_id, "member_id": g.member_id,
                "group_instance_id": g.group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
    else:
        api = _end_txn
        body = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                "committed": req.committed}
    version = version_for(api, api.MAX_VERSION)
    if req.kind == "txn_offset_commit" and version < 3 and (
            req.group.generation_id > 0 or req.group.member_id  # type: ignore[union-attr]
            or req.group.group_instance_id):  # type: ignore[union-attr]
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "the broker cannot commit offsets with consumer "
                         f"group metadata (TxnOffsetCommit v{version} < 3)")
    if req.kind == "init" and req.epoch_bump and version < 3:
        body["producer_id"], body["producer_epoch"] = -1, -1  # re-initializing bumps the epoch too
    return api, body, version
