"""Group and member state (Kafka 2.8's GroupMetadata / MemberMetadata).

Invariant: a group's state only changes through ``GroupMetadata.transition_to``, which
consults the single ``TRANSITIONS`` table (Kafka's ``validPreviousStates`` read from the
other side) and raises ``IllegalStateTransition`` on any other move. ``num_awaiting_join``
always equals the number of members holding a join completion, and
``supported_protocols[p]`` the number of members supporting protocol ``p``. Offsets hold
only appended (acknowledged) commits; in-flight ones are counted in
``pending_offset_commits`` until their append completes. Transactional commits wait in
``pending_txn_offsets[producer id]`` until their transaction ends; whichever commit of a
partition was written later to the log (``offset_positions``) is the committed one.
"""
from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Iterable

from odradek.protocol.group_records import OffsetValue

from . import assignment_protocol

OffsetAndMetadata = OffsetValue   # offset, metadata, commit/expire timestamps, leader epoch
TopicPartition = tuple[str, int]
UNKNOWN_POSITION = -1   # log offset of a commit record not (yet) known


@dataclass
class PendingTxnOffset:
    """A transactional commit: its value and the log offset of its batch once appended."""

    value: OffsetAndMetadata
    position: int | None = None   # None until the append completed


def is_newer(position: int, than: int | None) -> bool:
    """Kafka's ``olderThan`` read the other way: a commit written at ``position`` replaces
    one written at ``than`` unless both are known and ``position`` is the earlier one."""
    return than is None or than < 0 or position < 0 or position > than


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState
# from-state -> legal next states. Kafka's validPreviousStates, inverted:
#   PreparingRebalance <- Stable, CompletingRebalance, Empty
#   CompletingRebalance <- PreparingRebalance;  Stable <- CompletingRebalance
#   Empty <- PreparingRebalance;  Dead <- every state (Dead included)
TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE, S.DEAD}),
    S.PREPARING_REBALANCE: frozenset({S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE, S.STABLE, S.DEAD}),
    S.STABLE: frozenset({S.PREPARING_REBALANCE, S.DEAD}),
    S.DEAD: frozenset({S.DEAD}),
}


class IllegalStateTransition(Exception):
    """A move the transition table does not allow (a coordinator bug, never a client's)."""


@dataclass(eq=False)
class MemberMetadata:
    """One member. ``join_completion``/``sync_completion`` are its parked requests."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    is_new: bool = False
    join_completion: Any = None
    sync_completion: Any = None
    heartbeat_timer: Any = None          # the session timer, due at heartbeat_timer_due_ms
    heartbeat_timer_due_ms: int = 0
    heartbeat_deadline_ms: int = 0       # when the session expires unless heartbeated again

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_completion is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_completion is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(d)) for n, d in protocols] == [(n, bytes(d)) for n, d in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


class GroupMetadata:
    """A group: members, generation, selected protocol, committed offsets."""

    def __init__(self, group_id: str, clock: Callable[[], int],
                 state: GroupState = GroupState.EMPTY):
        self.group_id = group_id
        self._clock = clock
        self.state = state
        self.current_state_timestamp: int | None = clock()
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.pending_members: dict[str, Any] = {}      # member id -> expiry timer handle
        self.static_members: dict[str, str] = {}        # group instance id -> member id
        self.supported_protocols: Counter[str] = Counter()
        self.num_awaiting_join = 0
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self.join_timer: Any = None                     # the pending (Initial)DelayedJoin
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        self.offset_positions: dict[TopicPartition, int] = {}   # log offset of each commit
        self.pending_offset_commits: dict[TopicPartition, int] = {}   # a dict: Counter's misses and dels are Python calls
        self.pending_txn_offsets: dict[int, dict[TopicPartition, PendingTxnOffset]] = {}
        self.received_consumer_offset_commits = False
        self.received_txn_offset_commits = False

    # --- state ---------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def can_transition_to(self, target: GroupState) -> bool:
        return target in TRANSITIONS[self.state]

    def transition_to(self, target: GroupState) -> None:
        if not self.can_transition_to(target):
            raise IllegalStateTransition(
                f"group {self.group_id}: {self.state.value} -> {target.value} is illegal")
        self.state = target
        self.current_state_timestamp = self._clock()

    def can_rebalance(self) -> bool:
        return self.can_transition_to(GroupState.PREPARING_REBALANCE)

    # --- membership ----------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.members)

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    def add(self, member: MemberMetadata, join_completion: Any = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.join_completion = join_completion
        if member.is_awaiting_join:
            self.num_awaiting_join += 1

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names())
            self.supported_protocols += Counter()   # drop zero counts
            if member.is_awaiting_join:
                self.num_awaiting_join -= 1
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]],
                      join_completion: Any) -> None:
        """New protocols and join completion (None clears) for a known member."""
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = list(protocols)
        self.supported_protocols.update(member.protocol_names())
        self.supported_protocols += Counter()
        if join_completion is not None and not member.is_awaiting_join:
            self.num_awaiting_join += 1
        elif join_completion is None and member.is_awaiting_join:
            self.num_awaiting_join -= 1
        member.join_completion = join_completion

    def invoke_join(self, member: MemberMetadata, result: Any) -> None:
        """Answer the member's parked JoinGroup, if any."""
        completion = member.join_completion
        if completion is not None:
            member.join_completion = None
            self.num_awaiting_join -= 1
            completion.complete(result)

    def invoke_sync(self, member: MemberMetadata, result: Any) -> bool:
        """Answer the member's parked SyncGroup, if any; True if there was one."""
        completion = member.sync_completion
        if completion is None:
            return False
        member.sync_completion = None
        completion.complete(result)
        return True

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- static members ------------------------------------------------------------
    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self.static_members

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        return (group_instance_id is not None and self.has_static_member(group_instance_id)
                and self.static_members[group_instance_id] != member_id)

    def replace_static_member(self, old_member_id: str, new_member_id: str,
                              group_instance_id: str, fenced_join: Any,
                              fenced_sync: Any) -> MemberMetadata:
        """Give a static member a new member id; its parked requests get the fenced results."""
        member = self.members.pop(old_member_id)
        self.invoke_join(member, fenced_join)
        self.invoke_sync(member, fenced_sync)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    # --- protocol selection --------------------------------------------------------
    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        names = list(protocols)
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        return (self.protocol_type == protocol_type
                and any(self.supported_protocols[p] == len(self.members) for p in names))

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """Each member votes for its first candidate; most votes wins, ties by name."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return min(votes, key=lambda p: (-votes[p], p))

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a rejoined leader, else pick any rejoined member; False if none rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != assignment_protocol.PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        return assignment_protocol.subscribed_topics(
            [m.metadata(self.protocol_name) for m in self.members.values()])

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """(member id, group instance id, metadata) of every member, for the leader."""
        assert self.protocol_name is not None
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]

    # --- offsets -------------------------------------------------------------------
    def has_offsets(self) -> bool:
        return (bool(self.offsets) or bool(self.pending_offset_commits)
                or bool(self.pending_txn_offsets))

    def prepare_offset_commit(self, offsets: Iterable[TopicPartition]) -> None:
        self.received_consumer_offset_commits = True
        pending = self.pending_offset_commits
        for tp in offsets:
            pending[tp] = pending.get(tp, 0) + 1

    def _unpend(self, tp: TopicPartition) -> None:
        pending = self.pending_offset_commits
        left = pending[tp] - 1
        if left > 0:
            pending[tp] = left
        else:
            del pending[tp]

    def _put_offset(self, tp: TopicPartition, value: OffsetAndMetadata, position: int) -> bool:
        """Install a commit unless the current one was written later to the log."""
        if tp in self.offsets and not is_newer(position, self.offset_positions.get(tp)):
            return False
        self.offsets[tp] = value
        self.offset_positions[tp] = position
        return True

    def on_offset_commit_append(self, tp: TopicPartition, value: OffsetAndMetadata,
                                position: int = UNKNOWN_POSITION) -> None:
        if tp in self.pending_offset_commits:
            self._unpend(tp)
        self._put_offset(tp, value, position)

    def fail_pending_offset_write(self, tp: TopicPartition) -> None:
        if tp in self.pending_offset_commits:
            self._unpend(tp)

    def initialize_offsets(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                           positions: dict[TopicPartition, int],
                           pending: dict[int, dict[TopicPartition, PendingTxnOffset]]) -> None:
        """Install what loading ``__consumer_offsets`` found."""
        self.offsets.update(offsets)
        self.offset_positions.update({tp: positions.get(tp, UNKNOWN_POSITION) for tp in offsets})
        for producer_id, pending_offsets in pending.items():
            self.pending_txn_offsets.setdefault(producer_id, {}).update(pending_offsets)

    # --- transactional offsets (TxnOffsetCommit) ------------------------------------
    def prepare_txn_offset_commit(self, producer_id: int,
                                  offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.received_txn_offset_commits = True
        pending = self.pending_txn_offsets.setdefault(producer_id, {})
        for tp, value in offsets.items():
            pending[tp] = PendingTxnOffset(value)

    def on_txn_offset_commit_append(self, producer_id: int, tp: TopicPartition,
                                    value: OffsetAndMetadata, position: int) -> None:
        """The commit record is in the log at ``position`` (if still pending and the same)."""
        entry = self.pending_txn_offsets.get(producer_id, {}).get(tp)
        if entry is not None and entry.value == value:
            entry.position = position

    def fail_pending_txn_offset_commit(self, producer_id: int, tp: TopicPartition) -> None:
        """The commit record was not written: forget it (the client retries)."""
        pending = self.pending_txn_offsets.get(producer_id)
        if pending is not None:
            pending.pop(tp, None)
            if not pending:
                del self.pending_txn_offsets[producer_id]

    def complete_pending_txn_offset_commit(self, producer_id: int, commit: bool
                                           ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The producer's transaction ended (its marker is written): on commit its appended
        offsets become committed unless a later-written commit exists; on abort they are
        dropped. Returns the offsets that became committed."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        installed: dict[TopicPartition, OffsetAndMetadata] = {}
        if not commit or not pending:
            return installed
        for tp, entry in pending.items():
            if entry.position is None:
                continue   # its append never completed: the record is not before the marker
            if self._put_offset(tp, entry.value, entry.position):
                installed[tp] = entry.value
        return installed

    def has_pending_offset_commits_from_producer(self, producer_id: int) -> bool:
        return producer_id in self.pending_txn_offsets

    def has_pending_offset_commits_for(self, tp: TopicPartition) -> bool:
        return (tp in self.pending_offset_commits
                or any(tp in p for p in self.pending_txn_offsets.values()))

    @property
    def active_producers(self) -> set[int]:
        return set(self.pending_txn_offsets)

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.remove_offsets(list(self.offsets))

    def remove_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """Forget the committed (and pending) offsets of ``partitions``; the committed ones removed."""
        removed = {}
        for tp in partitions:
            if tp in self.offsets:
                removed[tp] = self.offsets.pop(tp)
            self.offset_positions.pop(tp, None)
            self.pending_offset_commits.pop(tp, None)
            for pending in self.pending_txn_offsets.values():
                pending.pop(tp, None)
        return removed

    def is_consumer_group(self) -> bool:
        return self.protocol_type == assignment_protocol.PROTOCOL_TYPE

    def is_subscribed_to(self, topic: str) -> bool:
        """Kafka's isSubscribedToTopic: a consumer group whose members' subscriptions name ``topic``."""
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def remove_expired_offsets(self, now_ms: int,
                               retention_ms: int) -> dict[TopicPartition, OffsetAndMetadata]:
        """Kafka 2.8's rules: Empty groups expire from the time they became Empty; a
        consumer group expires offsets of topics it no longer subscribes to; groups
        without a protocol type ("simple" commits) expire from the commit time."""
        def expired(base: Callable[[OffsetAndMetadata], int],
                    keep_topics: set[str] = frozenset()) -> dict:  # type: ignore[assignment]
            out = {}
            for tp, value in self.offsets.items():
                if tp[0] in keep_topics or tp in self.pending_offset_commits:
                    continue
                if value.expire_timestamp == -1:
                    if now_ms - base(value) >= retention_ms:
                        out[tp] = value
                elif now_ms >= value.expire_timestamp:
                    out[tp] = value
            return out

        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            ts = self.current_state_timestamp
            removed = expired(lambda v: ts if ts is not None else v.commit_timestamp)
        elif (self.protocol_type == assignment_protocol.PROTOCOL_TYPE
              and self.subscribed_topics is not None):
            removed = expired(lambda v: v.commit_timestamp, self.subscribed_topics)
        elif self.protocol_type is None:
            removed = expired(lambda v: v.commit_timestamp)
        else:
            removed = {}
        for tp in removed:
            del self.offsets[tp]
            self.offset_positions.pop(tp, None)
        return removed
