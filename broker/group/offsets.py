"""The group and offset cache of the ``__consumer_offsets`` partitions this broker leads
(Kafka 2.8's GroupMetadataManager), the records it reads and writes, and the offset
APIs of the coordinator (``OffsetApis``: commit, fetch, delete groups, expiry).

Invariant: a group lives in ``groups`` only while its partition
(``partition_for(group_id)``) is loading or owned; a partition is in at most one of
``loading_partitions`` / ``owned_partitions``. Loading replays the partition's records in
log order (the last record for a key wins, a null value deletes) and installs the
result in one step at ``finish_load``. Committed offsets enter a group only after their
append completed without error. Every write goes through the injected ``append`` and
its produce error is mapped to the error a Kafka coordinator would answer.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.group_records import (
    GroupKey, GroupRecordError, GroupValue, MemberValue, OffsetKey, OffsetValue, decode_record,
    encode_group_metadata, encode_offset_commit,
)
from odradek.protocol.records import BatchBuilder, iter_batches

from . import AppendFn, CommitOffset, Completion, FetchedOffset, GroupConfig, OffsetFetchResult, Timer
from .metadata import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState
GROUP_METADATA_TOPIC = "__consumer_offsets"


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units) as a signed int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``abs(Integer.MIN_VALUE)`` is 0."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(group_id: str, num_partitions: int = 50) -> int:
    return java_abs(java_string_hash(group_id)) % num_partitions


def java_string_length(s: str) -> int:
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


# Kafka's mapping of produce errors for group metadata writes (storeGroup) ...
_GROUP_WRITE_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.REQUEST_TIMED_OUT: E.REBALANCE_IN_PROGRESS,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.INVALID_FETCH_SIZE: E.UNKNOWN_SERVER_ERROR,
}
# ... and for offset commits (storeOffsets)
_OFFSET_WRITE_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.INVALID_COMMIT_OFFSET_SIZE,
    E.RECORD_LIST_TOO_LARGE: E.INVALID_COMMIT_OFFSET_SIZE,
    E.INVALID_FETCH_SIZE: E.INVALID_COMMIT_OFFSET_SIZE,
}


def group_write_error(code: int) -> ErrorCode:
    code = ErrorCode(code)
    return _GROUP_WRITE_ERRORS.get(code, code)


def offset_write_error(code: int) -> ErrorCode:
    code = ErrorCode(code)
    return _OFFSET_WRITE_ERRORS.get(code, code)


@dataclass
class _Load:
    """Records replayed so far for one partition being loaded."""

    epoch: int | None
    offsets: dict[tuple[str, TopicPartition], OffsetValue] = field(default_factory=dict)
    groups: dict[str, GroupValue] = field(default_factory=dict)
    removed_groups: set[str] = field(default_factory=set)


class GroupMetadataManager:
    """Groups and offsets per ``__consumer_offsets`` partition; builds and replays records."""

    def __init__(self, config: GroupConfig, timer: Timer, append: AppendFn):
        self.config = config
        self.timer = timer
        self._append_fn = append
        self.groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        self._epochs: dict[int, int] = {}
        self._loads: dict[int, _Load] = {}

    # --- ownership -----------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_partitions)

    def is_group_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    def is_group_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def get_or_create_group(self, group_id: str, create: bool) -> GroupMetadata | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.groups[group_id] = GroupMetadata(group_id, self.timer.now_ms)
        return group

    def group_not_exists(self, group_id: str) -> bool:
        if not self.is_group_local(group_id):
            return False
        group = self.groups.get(group_id)
        return group is None or group.is_(GroupState.DEAD)

    def _update_epoch(self, partition: int, epoch: int | None) -> bool:
        """Kafka's maybeUpdateCoordinatorEpoch: False if ``epoch`` is older than known."""
        current = self._epochs.get(partition)
        if epoch is not None and (current is None or epoch > current):
            self._epochs[partition] = current = epoch
        return epoch is None or epoch == current

    # --- writing -------------------------------------------------------------------
    def _batch(self, records: Iterable[tuple[bytes, bytes | None]]) -> bytes:
        builder = BatchBuilder(compression=self.config.compression)
        now = self.timer.now_ms()
        for key, value in records:
            builder.append(now, key, value)
        return builder.build()

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]]
               ) -> Completion[ErrorCode]:
        """Write records to ``__consumer_offsets-<partition>``; completes with the raw error."""
        return self.write(partition, self._batch(records))

    def write(self, partition: int, batch: bytes) -> Completion[ErrorCode]:
        """Append an already built batch (e.g. from ``expire_offsets``)."""
        try:
            return self._append_fn(partition, batch)
        except KafkaError as exc:
            return Completion.completed(ErrorCode(exc.code))

    def group_value(self, group: GroupMetadata, assignment: dict[str, bytes]) -> GroupValue:
        protocol = group.protocol_name
        return GroupValue(
            protocol_type=group.protocol_type or "", generation=group.generation_id,
            protocol=protocol, leader=group.leader_id,
            current_state_timestamp=(-1 if group.current_state_timestamp is None
                                     else group.current_state_timestamp),
            members=tuple(MemberValue(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
                subscription=m.metadata(protocol) if protocol is not None else b"",
                assignment=assignment.get(m.member_id, b"")) for m in group.members.values()))

    def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]
                    ) -> Completion[ErrorCode]:
        """Persist the group (with ``assignment``); completes with the mapped error."""
        record = encode_group_metadata(group.group_id, self.group_value(group, assignment))
        done: Completion[ErrorCode] = Completion()
        self.append(self.partition_for(group.group_id), [record]).add_callback(
            lambda error: done.complete(group_write_error(error)))
        return done

    def valid_metadata(self, metadata: str) -> bool:
        return java_string_length(metadata) <= self.config.offset_metadata_max_bytes

    def store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]
                      ) -> Completion[dict[TopicPartition, ErrorCode]]:
        """Append the commits with valid metadata; answer once the append completed."""
        valid = {tp: o for tp, o in offsets.items() if self.valid_metadata(o.metadata)}

        def answer(error: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return {tp: error if tp in valid else E.OFFSET_METADATA_TOO_LARGE for tp in offsets}

        if not valid:
            return Completion.completed(answer(E.NONE))
        group.prepare_offset_commit(valid)
        records = [encode_offset_commit(group.group_id, tp[0], tp[1], o) for tp, o in valid.items()]
        done: Completion[dict[TopicPartition, ErrorCode]] = Completion()

        def appended(raw: ErrorCode) -> None:
            error = offset_write_error(raw)
            if not group.is_(GroupState.DEAD):
                for tp, o in valid.items():
                    if error == E.NONE:
                        group.on_offset_commit_append(tp, o)
                    else:
                        group.fail_pending_offset_write(tp)
            done.complete(answer(error))

        self.append(self.partition_for(group.group_id), records).add_callback(appended)
        return done

    # --- loading -------------------------------------------------------------------
    def begin_load(self, partition: int, epoch: int | None = None) -> bool:
        """Start loading; False (and nothing changes) if stale, owned or already loading."""
        if not self._update_epoch(partition, epoch):
            return False
        if partition in self.owned_partitions or partition in self.loading_partitions:
            return False
        self.loading_partitions.add(partition)
        self._loads[partition] = _Load(epoch)
        return True

    def load_records(self, partition: int,
                     records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        """Replay (key, value) pairs in log order; undecodable records are skipped."""
        load = self._loads[partition]
        for key, value in records:
            if key is None:
                continue
            try:
                k, v = decode_record(key, value)
            except GroupRecordError as exc:
                log.warning("skipping __consumer_offsets-%d record: %s", partition, exc)
                continue
            if isinstance(k, OffsetKey):
                tp_key = (k.group, (k.topic, k.partition))
                if v is None:
                    load.offsets.pop(tp_key, None)
                else:
                    load.offsets[tp_key] = v  # type: ignore[assignment]
            elif isinstance(k, GroupKey):
                if v is None:
                    load.groups.pop(k.group, None)
                    load.removed_groups.add(k.group)
                else:
                    load.groups[k.group] = v  # type: ignore[assignment]
                    load.removed_groups.discard(k.group)

    def load_batches(self, partition: int, blob: bytes) -> None:
        """Replay the data records of RecordBatches as read from the log."""
        self.load_records(partition, _pairs(blob))

    def finish_load(self, partition: int) -> list[GroupMetadata]:
        """Install what was loaded and own the partition; returns the loaded groups."""
        load = self._loads.pop(partition, None)
        if load is None or partition not in self.loading_partitions:
            return []
        by_group: dict[str, dict[TopicPartition, OffsetValue]] = {}
        for (group_id, tp), value in load.offsets.items():
            by_group.setdefault(group_id, {})[tp] = value
        loaded = []
        for group_id, value in load.groups.items():
            loaded.append(self._load_group(group_id, value, by_group.pop(group_id, {})))
        for group_id, offsets in by_group.items():   # offsets-only ("simple") groups
            group = GroupMetadata(group_id, self.timer.now_ms)
            group.offsets = dict(offsets)
            loaded.append(group)
        for group in loaded:
            self.groups.setdefault(group.group_id, group)
        self.loading_partitions.discard(partition)
        self.owned_partitions.add(partition)
        return loaded

    def _load_group(self, group_id: str, value: GroupValue,
                    offsets: dict[TopicPartition, OffsetValue]) -> GroupMetadata:
        state = GroupState.STABLE if value.members else GroupState.EMPTY
        group = GroupMetadata(group_id, self.timer.now_ms, state)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.current_state_timestamp = (None if value.current_state_timestamp == -1
                                         else value.current_state_timestamp)
        for m in value.members:
            member = MemberMetadata(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout, session_timeout_ms=m.session_timeout,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", m.subscription)], assignment=m.assignment)
            group.add(member)
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.subscribed_topics = group.compute_subscribed_topics()
        group.offsets = dict(offsets)
        return group

    def remove_groups_for_partition(self, partition: int,
                                    epoch: int | None = None) -> list[GroupMetadata] | None:
        """Forget a partition we no longer lead; returns its groups (None if stale epoch)."""
        if not self._update_epoch(partition, epoch):
            return None
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        self._loads.pop(partition, None)
        removed = [g for g in self.groups.values() if self.partition_for(g.group_id) == partition]
        for group in removed:
            del self.groups[group.group_id]
        return removed

    # --- reading offsets -----------------------------------------------------------
    def get_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                    require_stable: bool = False
                    ) -> dict[TopicPartition, tuple[int, int, str, ErrorCode]]:
        """(offset, leader epoch, metadata, error) per partition; unknown ones are -1."""
        group = self.groups.get(group_id)
        missing = (-1, -1, "", E.NONE)
        if group is None or group.is_(GroupState.DEAD):
            return {tp: missing for tp in partitions or []}
        wanted = list(group.offsets) if partitions is None else partitions
        out = {}
        for tp in wanted:
            if require_stable and tp in group.pending_offset_commits:
                out[tp] = (-1, -1, "", E.UNSTABLE_OFFSET_COMMIT)
            elif tp in group.offsets:
                o = group.offsets[tp]
                out[tp] = (o.offset, o.leader_epoch, o.metadata, E.NONE)
            else:
                out[tp] = missing
        return out

    # --- expiry and deletion -------------------------------------------------------
    def cleanup_group_metadata(
            self, groups: Iterable[GroupMetadata],
            selector: Callable[[GroupMetadata], dict[TopicPartition, OffsetAndMetadata]],
    ) -> dict[int, list[tuple[bytes, None]]]:
        """Remove the selected offsets; Empty groups left without offsets become Dead and
        leave the cache. Returns the tombstones to write, per partition."""
        tombstones: dict[int, list[tuple[bytes, None]]] = {}
        for group in list(groups):
            removed = selector(group)
            if group.is_(GroupState.EMPTY) and not group.has_offsets():
                group.transition_to(GroupState.DEAD)
            out = tombstones.setdefault(self.partition_for(group.group_id), [])
            for (topic, part) in removed:
                out.append(encode_offset_commit(group.group_id, topic, part, None))  # type: ignore[arg-type]
            if (group.is_(GroupState.DEAD) and self.groups.get(group.group_id) is group):
                del self.groups[group.group_id]
                if group.generation_id > 0:   # offsets-only groups never wrote metadata
                    out.append(encode_group_metadata(group.group_id, None))  # type: ignore[arg-type]
        return {p: recs for p, recs in tombstones.items() if recs}

    def expire_offsets(self, now_ms: int | None = None) -> dict[int, bytes]:
        """Expire old offsets (offsets.retention.minutes); returns tombstone batches."""
        now = self.timer.now_ms() if now_ms is None else now_ms
        retention = self.config.offsets_retention_ms
        owned = [g for g in self.groups.values() if self.is_group_local(g.group_id)]
        records = self.cleanup_group_metadata(
            owned, lambda g: g.remove_expired_offsets(now, retention))
        return {p: self._batch(recs) for p, recs in records.items()}


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
        def all_(error: ErrorCode) -> Completion[dict[TopicPartition, ErrorCode]]:
            return Completion.completed({tp: error for tp in offsets})

        error = self._validate(group_id, "commit")
        if error is not None:
            return all_(error)
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                return all_(E.ILLEGAL_GENERATION)
            group = self.manager.get_or_create_group(group_id, create=True)
        assert group is not None
        if group.is_(S.DEAD):
            return all_(E.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return all_(E.FENCED_INSTANCE_ID)
        if not (generation_id < 0 and group.is_(S.EMPTY)):
            if not group.has(member_id):
                return all_(E.UNKNOWN_MEMBER_ID)
            if generation_id != group.generation_id:
                return all_(E.ILLEGAL_GENERATION)
            if group.is_(S.COMPLETING_REBALANCE):
                return all_(E.REBALANCE_IN_PROGRESS)
            self._schedule_heartbeat(group, group.get(member_id))
        now = self.timer.now_ms()
        expire = now + retention_time_ms if retention_time_ms != -1 else -1
        values = {tp: OffsetAndMetadata(
            offset=c.offset, metadata=c.metadata if c.metadata is not None else "",
            commit_timestamp=c.commit_timestamp if c.commit_timestamp != -1 else now,
            leader_epoch=c.leader_epoch, expire_timestamp=expire) for tp, c in offsets.items()}
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


def _pairs(blob: bytes) -> Iterator[tuple[bytes | None, bytes | None]]:
    for header, records in iter_batches(blob):
        if header.is_control:
            continue
        for record in records:
            yield record.key, record.value
