"""The group and offset cache of the ``__consumer_offsets`` partitions this broker leads
(Kafka 2.8's GroupMetadataManager) and the records it reads and writes.

Invariant: a group lives in ``groups`` only while its partition
(``partition_for(group_id)``) is loading or owned; a partition is in at most one of
``loading_partitions`` / ``owned_partitions``. Loading replays the partition's records in
log order (the last record for a key wins, a null value deletes) and installs the
result in one step at ``finish_load``; records of transactional batches stay pending per
producer id until that producer's control batch (COMMIT installs them unless a later
written commit exists, ABORT drops them). Committed offsets enter a group only after
their append completed without error; transactional ones only after their marker too.
``open_groups_for_producer`` lists, per producer id, the cached groups holding its
pending offsets. Every write goes through the injected ``append`` and its produce error
is mapped to the error a Kafka coordinator would answer.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable, Iterator

from odradek.broker.completion import Completion
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.group_records import (
    GroupKey, GroupRecordError, GroupValue, MemberValue, OffsetKey, OffsetValue, decode_record,
    encode_group_metadata, encode_offset_commit,
)
from odradek.protocol.control_records import parse_control_record
from odradek.protocol.record_batch import iter_headers
from odradek.protocol.records import BatchBuilder, batch_of, decode_batch

from . import AppendFn, AppendResult, GroupConfig, Timer
from .metadata import (
    UNKNOWN_POSITION, GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata,
    PendingTxnOffset, TopicPartition, is_newer,
)

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


@lru_cache(maxsize=65536)
def partition_for(group_id: str, num_partitions: int = 50) -> int:
    """Kafka's ``partitionFor``: the ``__consumer_offsets`` partition of a group (kept: every group
    request asks it several times, and the hash is a Python loop over the id)."""
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


def group_write_error(error: ErrorCode) -> ErrorCode:
    """The error a group write answers for an append's (``AppendResult.error``, an ErrorCode)."""
    return _GROUP_WRITE_ERRORS.get(error, error)


def offset_write_error(error: ErrorCode) -> ErrorCode:
    """The error an offset commit answers for an append's (``AppendResult.error``, an ErrorCode)."""
    return _OFFSET_WRITE_ERRORS.get(error, error)


GroupTopicPartition = tuple[str, TopicPartition]


@dataclass
class _Load:
    """Records replayed so far for one partition being loaded."""

    epoch: int | None
    offsets: dict[GroupTopicPartition, OffsetValue] = field(default_factory=dict)
    positions: dict[GroupTopicPartition, int] = field(default_factory=dict)
    pending: dict[int, dict[GroupTopicPartition, PendingTxnOffset]] = field(default_factory=dict)
    groups: dict[str, GroupValue] = field(default_factory=dict)
    removed_groups: set[str] = field(default_factory=set)

    def end_txn(self, producer_id: int, commit: bool) -> None:
        """A control batch of ``producer_id``: install (COMMIT) or drop its pending offsets."""
        pending = self.pending.pop(producer_id, {})
        if not commit:
            return
        for key, entry in pending.items():
            position = UNKNOWN_POSITION if entry.position is None else entry.position
            if key not in self.offsets or is_newer(position, self.positions.get(key)):
                self.offsets[key] = entry.value
                self.positions[key] = position


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
        self.open_groups_for_producer: dict[int, set[str]] = {}

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
        return batch_of(self.timer.now_ms(), records, self.config.compression)

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]]
               ) -> Completion[AppendResult]:
        """Write records to ``__consumer_offsets-<partition>``; completes with the raw error."""
        return self.write(partition, self._batch(records))

    def write(self, partition: int, batch: bytes) -> Completion[AppendResult]:
        """Append an already built batch (e.g. from ``expire_offsets``)."""
        try:
            return self._append_fn(partition, batch)
        except KafkaError as exc:
            return Completion.completed(AppendResult(ErrorCode(exc.code)))

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
            lambda result: done.complete(group_write_error(result.error)))
        return done

    def valid_metadata(self, metadata: str) -> bool:
        """At most ``offset.metadata.max.bytes`` UTF-16 units, as Java counts them (a code point
        counts one or two: text of up to half the limit needs no count)."""
        limit = self.config.offset_metadata_max_bytes
        return len(metadata) <= limit >> 1 or java_string_length(metadata) <= limit

    def store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]
                      ) -> Completion[dict[TopicPartition, ErrorCode]]:
        """Append the commits with valid metadata; answer once the append completed."""
        group_id = group.group_id
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        records = []
        for tp, o in offsets.items():
            if self.valid_metadata(o.metadata):
                valid[tp] = o
                records.append(encode_offset_commit(group_id, tp[0], tp[1], o))

        if not valid:
            return Completion.completed(dict.fromkeys(offsets, E.OFFSET_METADATA_TOO_LARGE))
        group.prepare_offset_commit(valid)
        _warn_if_mixed(group)

        def appended(result: AppendResult) -> dict[TopicPartition, ErrorCode]:
            error = offset_write_error(result.error)
            if group.state is not GroupState.DEAD:
                for tp, o in valid.items():
                    if error == E.NONE:
                        group.on_offset_commit_append(tp, o, result.base_offset)
                    else:
                        group.fail_pending_offset_write(tp)
            if len(valid) == len(offsets):
                return dict.fromkeys(offsets, error)
            return {tp: error if tp in valid else E.OFFSET_METADATA_TOO_LARGE for tp in offsets}

        return self.append(self.partition_for(group_id), records).map(appended)

    def store_txn_offsets(self, group: GroupMetadata, producer_id: int, producer_epoch: int,
                          offsets: dict[TopicPartition, OffsetAndMetadata]
                          ) -> Completion[dict[TopicPartition, ErrorCode]]:
        """TxnOffsetCommit: append the commits as ONE transactional batch of the producer
        (base sequence -1); they stay pending in the group until its marker is written."""
        valid = {tp: o for tp, o in offsets.items() if self.valid_metadata(o.metadata)}

        def answer(error: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return {tp: error if tp in valid else E.OFFSET_METADATA_TOO_LARGE for tp in offsets}

        if not valid:
            return Completion.completed(answer(E.NONE))
        self.add_producer_group(producer_id, group.group_id)
        group.prepare_txn_offset_commit(producer_id, valid)
        _warn_if_mixed(group)
        builder = BatchBuilder(compression=self.config.compression, producer_id=producer_id,
                               producer_epoch=producer_epoch, base_sequence=-1,
                               is_transactional=True)
        now = self.timer.now_ms()
        for tp, o in valid.items():
            key, value = encode_offset_commit(group.group_id, tp[0], tp[1], o)
            builder.append(now, key, value)
        done: Completion[dict[TopicPartition, ErrorCode]] = Completion()

        def appended(result: AppendResult) -> None:
            error = offset_write_error(result.error)
            if not group.is_(GroupState.DEAD):
                for tp, o in valid.items():
                    if error == E.NONE:
                        group.on_txn_offset_commit_append(producer_id, tp, o, result.base_offset)
                    else:
                        group.fail_pending_txn_offset_commit(producer_id, tp)
                if not group.has_pending_offset_commits_from_producer(producer_id):
                    self.remove_producer_group(producer_id, group.group_id)
            # a Dead group was unloaded or deleted: its successor (if any) has its own state
            done.complete(answer(error))

        self.write(self.partition_for(group.group_id), builder.build()).add_callback(appended)
        return done

    # --- producers with pending transactional offsets ------------------------------
    def add_producer_group(self, producer_id: int, group_id: str) -> None:
        self.open_groups_for_producer.setdefault(producer_id, set()).add(group_id)

    def remove_producer_group(self, producer_id: int, group_id: str) -> None:
        groups = self.open_groups_for_producer.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self.open_groups_for_producer[producer_id]

    def _remove_group_from_all_producers(self, group_id: str) -> None:
        for producer_id in list(self.open_groups_for_producer):
            self.remove_producer_group(producer_id, group_id)

    def complete_txn(self, producer_id: int, partitions: Iterable[int], commit: bool) -> None:
        """Kafka's handleTxnCompletion: the producer's marker is written on ``partitions``;
        its pending offsets of the groups there are committed or dropped."""
        wanted = set(partitions)
        for group_id in sorted(self.open_groups_for_producer.get(producer_id, set())):
            if self.partition_for(group_id) not in wanted:
                continue
            group = self.groups.get(group_id)
            if group is not None and not group.is_(GroupState.DEAD):
                group.complete_pending_txn_offset_commit(producer_id, commit)
            self.remove_producer_group(producer_id, group_id)   # (a deleted group: nothing)

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
                     records: Iterable[tuple[bytes | None, bytes | None]],
                     position: int = UNKNOWN_POSITION) -> None:
        """Replay non-transactional (key, value) pairs in log order (``position``: their
        batch's base offset); undecodable records are skipped."""
        load = self._loads[partition]
        for k, v in _decoded(partition, records):
            if isinstance(k, OffsetKey):
                tp_key = (k.group, (k.topic, k.partition))
                if v is None:
                    load.offsets.pop(tp_key, None)
                    load.positions.pop(tp_key, None)
                else:
                    load.offsets[tp_key] = v  # type: ignore[assignment]
                    load.positions[tp_key] = position
            elif isinstance(k, GroupKey):
                self._load_group_record(load, k, v)  # type: ignore[arg-type]

    @staticmethod
    def _load_group_record(load: _Load, k: GroupKey, v: GroupValue | None) -> None:
        if v is None:
            load.groups.pop(k.group, None)
            load.removed_groups.add(k.group)
        else:
            load.groups[k.group] = v
            load.removed_groups.discard(k.group)

    def load_batches(self, partition: int, blob: bytes) -> None:
        """Replay RecordBatches as read from the log: plain batches as ``load_records``,
        transactional ones into the producer's pending offsets, control batches (markers)
        commit or abort them."""
        load = self._loads[partition]
        for pos, header in iter_headers(blob):
            if header.is_control:
                try:
                    commit, _ = parse_control_record(blob, pos)
                except KafkaError as exc:   # not a marker Kafka knows: it is not a COMMIT
                    log.warning("__consumer_offsets-%d control batch at %d: %s", partition,
                                header.base_offset, exc)
                    commit = False
                load.end_txn(header.producer_id, commit)
                continue
            _, records = decode_batch(blob, pos)
            pairs = ((r.key, r.value) for r in records)
            if header.is_transactional:
                self._load_txn_records(partition, load, header.producer_id, header.base_offset,
                                       pairs)
            else:
                self.load_records(partition, pairs, header.base_offset)

    def _load_txn_records(self, partition: int, load: _Load, producer_id: int, position: int,
                          records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        pending = load.pending.setdefault(producer_id, {})
        for k, v in _decoded(partition, records):
            if isinstance(k, OffsetKey):
                key = (k.group, (k.topic, k.partition))
                if v is None:
                    pending.pop(key, None)
                else:
                    pending[key] = PendingTxnOffset(v, position)  # type: ignore[arg-type]
            elif isinstance(k, GroupKey):   # never written transactionally; replay anyway
                self._load_group_record(load, k, v)  # type: ignore[arg-type]

    def finish_load(self, partition: int) -> list[GroupMetadata]:
        """Install what was loaded and own the partition; returns the loaded groups."""
        load = self._loads.pop(partition, None)
        if load is None or partition not in self.loading_partitions:
            return []
        by_group: dict[str, dict[TopicPartition, OffsetValue]] = {}
        positions: dict[str, dict[TopicPartition, int]] = {}
        for (group_id, tp), value in load.offsets.items():
            by_group.setdefault(group_id, {})[tp] = value
            positions.setdefault(group_id, {})[tp] = load.positions.get((group_id, tp),
                                                                        UNKNOWN_POSITION)
        pending: dict[str, dict[int, dict[TopicPartition, PendingTxnOffset]]] = {}
        for producer_id, producer_offsets in load.pending.items():   # still open txns
            for (group_id, tp), entry in producer_offsets.items():
                pending.setdefault(group_id, {}).setdefault(producer_id, {})[tp] = entry
        loaded = [self._load_group(group_id, value) for group_id, value in load.groups.items()]
        loaded += [GroupMetadata(group_id, self.timer.now_ms)   # offsets-only ("simple")
                   for group_id in sorted((set(by_group) | set(pending)) - set(load.groups))]
        for group in loaded:
            group_id = group.group_id
            group.initialize_offsets(by_group.get(group_id, {}), positions.get(group_id, {}),
                                     pending.get(group_id, {}))
            if self.groups.setdefault(group_id, group) is group:
                for producer_id in group.active_producers:
                    self.add_producer_group(producer_id, group_id)
        self.loading_partitions.discard(partition)
        self.owned_partitions.add(partition)
        return loaded

    def _load_group(self, group_id: str, value: GroupValue) -> GroupMetadata:
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
            self._remove_group_from_all_producers(group.group_id)
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
            if require_stable and group.has_pending_offset_commits_for(tp):
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
    ) -> dict[int, list[tuple[bytes, bytes | None]]]:
        """Remove the selected offsets; Empty groups left without offsets become Dead and
        leave the cache. Returns the tombstones to write, per partition."""
        tombstones: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for group in list(groups):
            removed = selector(group)
            if group.is_(GroupState.EMPTY) and not group.has_offsets():
                group.transition_to(GroupState.DEAD)
            out = tombstones.setdefault(self.partition_for(group.group_id), [])
            for (topic, part) in removed:
                out.append(encode_offset_commit(group.group_id, topic, part, None))
            if (group.is_(GroupState.DEAD) and self.groups.get(group.group_id) is group):
                del self.groups[group.group_id]
                if group.generation_id > 0:   # offsets-only groups never wrote metadata
                    out.append(encode_group_metadata(group.group_id, None))
        return {p: recs for p, recs in tombstones.items() if recs}

    def expire_offsets(self, now_ms: int | None = None) -> dict[int, bytes]:
        """Expire old offsets (offsets.retention.minutes); returns tombstone batches."""
        now = self.timer.now_ms() if now_ms is None else now_ms
        retention = self.config.offsets_retention_ms
        owned = [g for g in self.groups.values() if self.is_group_local(g.group_id)]
        records = self.cleanup_group_metadata(
            owned, lambda g: g.remove_expired_offsets(now, retention))
        return {p: self._batch(recs) for p, recs in records.items()}


def _warn_if_mixed(group: GroupMetadata) -> None:
    if group.received_consumer_offset_commits and group.received_txn_offset_commits:
        log.warning("group %s gets offset commits from consumers and from transactional "
                    "producers: mixing both generally results in surprises", group.group_id)


def _decoded(partition: int, records: Iterable[tuple[bytes | None, bytes | None]]
             ) -> Iterator[tuple[Any, Any]]:
    """Decoded (key, value) of group records; keyless and undecodable ones are skipped."""
    for key, value in records:
        if key is None:
            continue
        try:
            yield decode_record(key, value)
        except GroupRecordError as exc:
            log.warning("skipping __consumer_offsets-%d record: %s", partition, exc)
