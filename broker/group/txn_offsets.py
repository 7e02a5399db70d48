"""The transactional half of the group coordinator (Kafka 2.8's handleTxnCommitOffsets
and handleTxnCompletion), mixed into ``GroupCoordinator``.

Invariant: a transactional offset commit is never visible to OffsetFetch before its
transaction committed: TxnOffsetCommit only appends the offsets (one transactional
batch of the producer) and parks them in the group's ``pending_txn_offsets``; they
become committed offsets only when the producer's COMMIT marker has been written to the
group's ``__consumer_offsets`` partition (``on_txn_marker_written``), and an ABORT
marker drops them. A group holding pending transactional offsets is never removed by
expiry (``GroupMetadata.has_offsets``).
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping

from odradek.broker.completion import Completion
from odradek.protocol.errors import ErrorCode

from . import CommitOffset, Timer
from .metadata import GroupMetadata, GroupState, OffsetAndMetadata, TopicPartition
from .offsets import GroupMetadataManager

E = ErrorCode
S = GroupState
UNKNOWN_MEMBER_ID = ""

__all__ = ["TxnOffsetApis"]


class TxnOffsetApis:
    """TxnOffsetCommit and transaction completion; relies on the coordinator's
    ``manager``, ``timer`` and ``_validate``."""

    manager: GroupMetadataManager
    timer: Timer
    _validate: Callable[..., "ErrorCode | None"]

    def handle_txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                  member_id: str, group_instance_id: str | None,
                                  generation_id: int,
                                  offsets: Mapping[TopicPartition, CommitOffset]
                                  ) -> Completion[dict[TopicPartition, ErrorCode]]:
        """TxnOffsetCommit v0-3 (v0-2: member "", instance None, generation -1, which
        skip the member checks). An unknown group is created Empty; the answer comes
        after the append of the transactional batch."""
        def all_(error: ErrorCode) -> Completion[dict[TopicPartition, ErrorCode]]:
            return Completion.completed({tp: error for tp in offsets})

        error = self._validate(group_id, "txn_commit")
        if error is not None:
            return all_(error)
        group = self.manager.get_or_create_group(group_id, create=True)
        assert group is not None
        error = self._check_txn_member(group, member_id, group_instance_id, generation_id)
        if error is not None:
            return all_(error)
        now = self.timer.now_ms()
        values = {tp: OffsetAndMetadata(
            offset=c.offset, metadata=c.metadata if c.metadata is not None else "",
            commit_timestamp=now, leader_epoch=c.leader_epoch, expire_timestamp=-1)
            for tp, c in offsets.items()}
        return self.manager.store_txn_offsets(group, producer_id, producer_epoch, values)

    @staticmethod
    def _check_txn_member(group: GroupMetadata, member_id: str,
                          group_instance_id: str | None, generation_id: int) -> ErrorCode | None:
        """Kafka's doTxnCommitOffsets checks: member and generation only when given."""
        if group.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, group_instance_id):
            return E.FENCED_INSTANCE_ID
        if member_id != UNKNOWN_MEMBER_ID and not group.has(member_id):
            return E.UNKNOWN_MEMBER_ID
        if generation_id >= 0 and generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        return None

    def handle_txn_completion(self, producer_id: int, partitions: Iterable[int],
                              commit: bool) -> None:
        """The producer's transaction marker is written on these ``__consumer_offsets``
        partitions: commit or drop its pending offsets of the groups there."""
        self.manager.complete_txn(producer_id, partitions, commit)

    def on_txn_marker_written(self, partition_index: int, producer_id: int,
                              committed: bool) -> None:
        """WriteTxnMarkers hook (one partition): see ``handle_txn_completion``."""
        self.handle_txn_completion(producer_id, (partition_index,), committed)
