"""The offset APIs of the group coordinator (``OffsetApis``, mixed into
``GroupCoordinator``): OffsetCommit, OffsetFetch, DeleteGroups and offset expiry.

Invariant: every call is validated first (``_validate``); a commit is answered only
after its append to ``__consumer_offsets`` completed, and OffsetFetch returns only
committed offsets (never in-flight or pending transactional ones).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from odradek.broker.completion import Completion
from odradek.protocol.errors import ErrorCode

from . import CommitOffset, FetchedOffset, GroupConfig, OffsetFetchResult, Timer
from .metadata import GroupMetadata, GroupState, OffsetAndMetadata, TopicPartition
from .offsets import GroupMetadataManager

E = ErrorCode
S = GroupState


class OffsetApis:
    """The offset half of the GroupCoordinator (mixed into it): OffsetCommit, OffsetFetch,
    DeleteGroups and offset expiry. Relies on the coordinator's ``manager``, ``timer``,
    ``config``, ``active``, ``_validate`` and ``_schedule_heartbeat``."""

    manager: GroupMetadataManager
    timer: Timer
    config: GroupConfig
    active: bool
    _expiry_timer: Any
    _validate: Callable[..., "ErrorCode | None"]
    _schedule_heartbeat: Callable[..., None]

    def handle_commit_offsets(self, group_id: str, member_id: str,
                              group_instance_id: str | None, generation_id: int,
                              offsets: Mapping[TopicPartition, CommitOffset],
                              retention_time_ms: int = -1
                              ) -> Completion[dict[TopicPartition, ErrorCode]]:
        """OffsetCommit v0-7 (v0: generation -1, member ""); answered after the append."""
        error = self._validate(group_id, "commit")
        if error is not None:
            return _all(offsets, error)
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                return _all(offsets, E.ILLEGAL_GENERATION)
            group = self.manager.get_or_create_group(group_id, create=True)
        assert group is not None
        state = group.state
        if state is S.DEAD:
            return _all(offsets, E.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return _all(offsets, E.FENCED_INSTANCE_ID)
        if not (generation_id < 0 and state is S.EMPTY):
            if not group.has(member_id):
                return _all(offsets, E.UNKNOWN_MEMBER_ID)
            if generation_id != group.generation_id:
                return _all(offsets, E.ILLEGAL_GENERATION)
            if state is S.COMPLETING_REBALANCE:
                return _all(offsets, E.REBALANCE_IN_PROGRESS)
            self._schedule_heartbeat(group, group.get(member_id))
        now = self.timer.now_ms()
        # a retention near 2**63 ms means "never": kept within the record's int64 (it overflowed)
        expire = min(now + retention_time_ms, 2**63 - 1) if retention_time_ms != -1 else -1
        values = {tp: OffsetAndMetadata(offset, "" if metadata is None else metadata,
                                        now if commit_timestamp == -1 else commit_timestamp, leader_epoch, expire)
                  for tp, (offset, metadata, leader_epoch, commit_timestamp) in offsets.items()}
        return self.manager.store_offsets(group, values)

    def handle_fetch_offsets(self, group_id: str,
                             partitions: list[TopicPartition] | None = None,
                             require_stable: bool = False) -> OffsetFetchResult:
        """OffsetFetch v0-5; ``partitions=None`` (v2+ null topics) means all committed."""
        error = self._validate(group_id, "fetch")
        if error is not None:
            return OffsetFetchResult(error)
        found = self.manager.get_offsets(group_id, partitions, require_stable)
        return OffsetFetchResult(E.NONE, {tp: FetchedOffset(*v) for tp, v in found.items()})


    def handle_delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """DeleteGroups v0-1: Empty groups become Dead; their tombstones are appended
        without waiting (as Kafka, which writes them with acks=0)."""
        errors: dict[str, ErrorCode] = {}
        eligible: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self._validate(group_id, "delete")
            group = self.manager.get_group(group_id) if error is None else None
            if error is not None:
                errors[group_id] = error
            elif group is None or group.is_(S.DEAD):
                errors[group_id] = (E.GROUP_ID_NOT_FOUND if self.manager.group_not_exists(group_id)
                                    else E.NOT_COORDINATOR)
            elif group.is_(S.EMPTY):
                group.transition_to(S.DEAD)
                eligible.append(group)
            else:
                errors[group_id] = E.NON_EMPTY_GROUP
        if eligible:
            tombstones = self.manager.cleanup_group_metadata(eligible,
                                                             lambda g: g.remove_all_offsets())
            for partition, records in tombstones.items():
                self.manager.append(partition, records)
            errors.update({g.group_id: E.NONE for g in eligible})
        return errors

    def handle_delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                              ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete v0 (Kafka's handleDeleteOffsets): an Empty group loses the offsets of
        ``partitions``; a consumer group with members only those of topics none of its members
        subscribes to (GROUP_SUBSCRIBED_TO_TOPIC for the rest); any other group with members is
        NON_EMPTY_GROUP. Tombstones are appended without waiting, as for DeleteGroups. With a
        group error the partition map is empty."""
        error = self._validate(group_id, "offset_delete")
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_(S.DEAD):
            return (E.GROUP_ID_NOT_FOUND if self.manager.group_not_exists(group_id) else E.NOT_COORDINATOR), {}
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_(S.EMPTY):
            eligible = partitions
        elif group.is_consumer_group():
            eligible = [tp for tp in partitions if not group.is_subscribed_to(tp[0])]
            errors = {tp: E.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if group.is_subscribed_to(tp[0])}
        else:
            return E.NON_EMPTY_GROUP, {}
        if eligible:
            tombstones = self.manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible))
            for partition, records in tombstones.items():
                self.manager.append(partition, records)
            errors.update({tp: E.NONE for tp in eligible})
        return E.NONE, errors

    def expire_offsets(self, now_ms: int | None = None) -> dict[int, bytes]:
        """Expire offsets and dead groups; returns {partition: tombstone batch} to append."""
        return self.manager.expire_offsets(now_ms)

    def run_expiry(self) -> int:
        """``expire_offsets`` and append the tombstones; returns the number of batches."""
        batches = self.expire_offsets()
        for partition, batch in batches.items():
            self.manager.write(partition, batch)
        return len(batches)

    def _schedule_expiry(self) -> None:
        def tick() -> None:
            self._expiry_timer = None
            if self.active:
                self.run_expiry()
                self._schedule_expiry()
        self._expiry_timer = self.timer.schedule(
            self.config.offsets_retention_check_interval_ms, tick)


def _all(offsets: Mapping[TopicPartition, Any], error: ErrorCode) -> Completion[dict[TopicPartition, ErrorCode]]:
    """The same ``error`` for every partition of a commit, answered at once."""
    return Completion.completed(dict.fromkeys(offsets, error))
