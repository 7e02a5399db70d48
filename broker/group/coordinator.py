"""GroupCoordinator: Kafka 2.8's group membership and offset protocol, sans-IO.

Invariant: every request is first checked by ``_validate`` (INVALID_GROUP_ID,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR in that order);
every parked JoinGroup/SyncGroup completes exactly once (answered, fenced, rejected or
NOT_COORDINATOR on unload); every member has at most one live session timer, a group
at most one rebalance timer, each pending member one expiry timer; and a client hears
about a write (SyncGroup, OffsetCommit, static rejoin) only after its append completed.
Slow calls return ``Completion``s; heartbeat, leave, fetch, list, describe and delete
answer at once. Rebalance timing mirrors DelayedJoin / InitialDelayedJoin. The offset
APIs (commit, fetch, delete groups, expiry) are mixed in from ``offset_apis.OffsetApis``, the
transactional ones (TxnOffsetCommit, marker completion) from ``txn_offsets.TxnOffsetApis``, the
members' session timers from ``session_timers.SessionTimers``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from odradek.broker.completion import Completion
from odradek.protocol.errors import ErrorCode

from . import (
    AppendFn, GroupConfig, JoinGroupMember, JoinGroupResult, LeaveGroupResult,
    LeaveMember, SyncGroupResult, Timer,
)
from .metadata import GroupMetadata, GroupState, MemberMetadata
from .group_queries import GroupQueryApis
from .offset_apis import OffsetApis
from .offsets import GroupMetadataManager
from .session_timers import SessionTimers
from .txn_offsets import TxnOffsetApis

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
UNKNOWN_MEMBER_ID = ""
# APIs that refuse an empty group id (commit/fetch/describe/delete accept "")
_NON_EMPTY_ID_APIS = {"join", "sync", "heartbeat", "leave", "txn_commit", "offset_delete"}


@dataclass
class _DelayedJoin:
    handle: Any
    initial: bool


def _join_error(member_id: str, error: ErrorCode) -> JoinGroupResult:
    return JoinGroupResult(error_code=error, member_id=member_id)


class GroupCoordinator(SessionTimers, OffsetApis, TxnOffsetApis, GroupQueryApis):
    """Drive with ``handle_*``; feed partition leadership with ``on_elected``/``on_resigned``."""

    def __init__(self, config: GroupConfig, timer: Timer, append: AppendFn):
        self.config = config
        self.timer = timer
        self.manager = GroupMetadataManager(config, timer, append)
        self.active = False
        self._expiry_timer: Any = None

    # === lifecycle and partition leadership ========================================
    def startup(self, periodic_expiry: bool = True) -> None:
        self.active = True
        if periodic_expiry:
            self._schedule_expiry()

    def shutdown(self) -> None:
        self.active = False
        if self._expiry_timer is not None:
            self.timer.cancel(self._expiry_timer)
            self._expiry_timer = None
        for partition in sorted(self.manager.owned_partitions | self.manager.loading_partitions):
            self.on_resigned(partition)

    def partition_for(self, group_id: str) -> int:
        return self.manager.partition_for(group_id)

    def on_elected(self, partition: int, epoch: int | None = None) -> bool:
        """This broker leads ``__consumer_offsets-<partition>``: start loading it. Then call
        ``load_batches``/``load_records`` (any number of times) and ``finish_loading``."""
        return self.manager.begin_load(partition, epoch)

    def load_batches(self, partition: int, blob: bytes) -> None:
        self.manager.load_batches(partition, blob)

    def load_records(self, partition: int,
                     records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        self.manager.load_records(partition, records)

    def finish_loading(self, partition: int) -> None:
        for group in self.manager.finish_load(partition):
            self._on_group_loaded(group)

    def load_partition(self, partition: int, records: Iterable[tuple[bytes | None, bytes | None]],
                       epoch: int | None = None) -> None:
        """``on_elected`` + ``load_records`` + ``finish_loading`` in one call."""
        if self.on_elected(partition, epoch):
            self.load_records(partition, records)
            self.finish_loading(partition)

    def on_resigned(self, partition: int, epoch: int | None = None) -> None:
        """This broker no longer leads the partition: unload its groups."""
        for group in self.manager.remove_groups_for_partition(partition, epoch) or []:
            self._on_group_unloaded(group)

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        if group.size > self.config.max_size:
            self._prepare_rebalance(group)
        for member in list(group.members.values()):
            self._schedule_heartbeat(group, member)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        previous = group.state
        group.transition_to(S.DEAD)
        self._cancel_join_timer(group)
        for handle in group.pending_members.values():
            self.timer.cancel(handle)
        group.pending_members.clear()
        for member in list(group.members.values()):
            if previous is S.PREPARING_REBALANCE:
                group.invoke_join(member, _join_error(member.member_id, E.NOT_COORDINATOR))
            group.invoke_sync(member, SyncGroupResult(E.NOT_COORDINATOR))
            self._cancel_heartbeat(member)

    # === validation ================================================================
    def _validate(self, group_id: str | None, api: str) -> ErrorCode | None:
        if group_id is None or (group_id == "" and api in _NON_EMPTY_ID_APIS):
            return E.INVALID_GROUP_ID
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        if self.manager.is_group_loading(group_id):
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.is_group_local(group_id):
            return E.NOT_COORDINATOR
        return None

    @staticmethod
    def _validate_member(group: GroupMetadata, member_id: str,
                         group_instance_id: str | None) -> ErrorCode | None:
        if group_instance_id is not None:
            current = group.static_member_id(group_instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if current != member_id:
                return E.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return E.UNKNOWN_MEMBER_ID
        return None

    # === JoinGroup =================================================================
    def handle_join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                          client_id: str, client_host: str, session_timeout_ms: int,
                          rebalance_timeout_ms: int, protocol_type: str,
                          protocols: list[tuple[str, bytes]],
                          require_known_member_id: bool) -> Completion[JoinGroupResult]:
        """JoinGroup v0-5. ``require_known_member_id`` = version >= 4 and no instance id;
        ``rebalance_timeout_ms`` < 0 (v0) means the session timeout."""
        done: Completion[JoinGroupResult] = Completion()
        error = self._validate(group_id, "join")
        if error is not None:
            done.complete(_join_error(member_id, error))
            return done
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        if not (self.config.min_session_timeout_ms <= session_timeout_ms
                <= self.config.max_session_timeout_ms):
            done.complete(_join_error(member_id, E.INVALID_SESSION_TIMEOUT))
            return done
        protocols = [(name, bytes(meta)) for name, meta in protocols]
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.manager.get_or_create_group(group_id, create=is_unknown)
        if group is None:
            done.complete(_join_error(member_id, E.UNKNOWN_MEMBER_ID))
            return done
        args = (group, member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols, done)
        if not self._accept_joining_member(group, member_id):
            existing = group.members.get(member_id)
            if existing is not None:
                self._cancel_heartbeat(existing)
                group.invoke_join(existing, _join_error(member_id, E.GROUP_MAX_SIZE_REACHED))
                group.remove(member_id)
            if group_instance_id is not None:
                group.static_members.pop(group_instance_id, None)
            done.complete(_join_error(member_id, E.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._do_unknown_join(*args, require_known_member_id)
        else:
            self._do_join(*args)
        if group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)
        return done

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        limit = self.config.max_size
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.is_(S.PREPARING_REBALANCE):
            return ((group.has(member_id) and group.get(member_id).is_awaiting_join)
                    or group.num_awaiting_join < limit)
        return group.has(member_id) or group.size < limit

    def _do_unknown_join(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                         client_id: str, client_host: str, session_ms: int, rebalance_ms: int,
                         protocol_type: str, protocols: list[tuple[str, bytes]],
                         done: Completion[JoinGroupResult], require_known: bool) -> None:
        if group.is_(S.DEAD):
            done.complete(_join_error(member_id, E.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(protocol_type, [p for p, _ in protocols]):
            done.complete(_join_error(member_id, E.INCONSISTENT_GROUP_PROTOCOL))
        else:
            new_id = group.generate_member_id(client_id, instance_id)
            if group.has_static_member(instance_id):
                self._update_static_member(group, new_id, instance_id, protocols, done)  # type: ignore[arg-type]
            elif require_known:
                group.pending_members[new_id] = self.timer.schedule(
                    session_ms, lambda: self._on_pending_member_expired(group, new_id))
                done.complete(_join_error(new_id, E.MEMBER_ID_REQUIRED))
            else:
                self._add_member_and_rebalance(group, new_id, instance_id, client_id, client_host,
                                               session_ms, rebalance_ms, protocol_type,
                                               protocols, done)

    def _do_join(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                 client_id: str, client_host: str, session_ms: int, rebalance_ms: int,
                 protocol_type: str, protocols: list[tuple[str, bytes]],
                 done: Completion[JoinGroupResult]) -> None:
        if group.is_(S.DEAD):
            done.complete(_join_error(member_id, E.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(protocol_type, [p for p, _ in protocols]):
            done.complete(_join_error(member_id, E.INCONSISTENT_GROUP_PROTOCOL))
        elif member_id in group.pending_members:
            self._add_member_and_rebalance(group, member_id, instance_id, client_id, client_host,
                                           session_ms, rebalance_ms, protocol_type, protocols,
                                           done)
        elif group.is_static_member_fenced(member_id, instance_id):
            done.complete(_join_error(member_id, E.FENCED_INSTANCE_ID))
        elif not group.has(member_id) or (instance_id is not None
                                          and not group.has_static_member(instance_id)):
            done.complete(_join_error(member_id, E.UNKNOWN_MEMBER_ID))
        else:
            member = group.get(member_id)
            if group.is_(S.PREPARING_REBALANCE):
                self._update_member_and_rebalance(group, member, protocols, done)
            elif group.is_(S.COMPLETING_REBALANCE):
                if member.matches(protocols):   # lost JoinGroup response: answer it again
                    done.complete(self._join_result(group, member, group.is_leader(member_id)))
                else:
                    self._update_member_and_rebalance(group, member, protocols, done)
            elif group.is_(S.STABLE):
                if group.is_leader(member_id) or not member.matches(protocols):
                    self._update_member_and_rebalance(group, member, protocols, done)
                else:
                    done.complete(self._join_result(group, member, False))
            else:   # Empty with a known member id: let it reset and rejoin
                done.complete(_join_error(member_id, E.UNKNOWN_MEMBER_ID))

    def _join_result(self, group: GroupMetadata, member: MemberMetadata,
                     with_members: bool, leader: str | None = None) -> JoinGroupResult:
        members = ([JoinGroupMember(*m) for m in group.current_member_metadata()]
                   if with_members else [])
        return JoinGroupResult(
            error_code=E.NONE, member_id=member.member_id, generation_id=group.generation_id,
            protocol_type=group.protocol_type, protocol_name=group.protocol_name or "",
            leader=(group.leader_id if leader is None else leader) or "", members=members)

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str,
                                  instance_id: str | None, client_id: str, client_host: str,
                                  session_ms: int, rebalance_ms: int, protocol_type: str,
                                  protocols: list[tuple[str, bytes]],
                                  done: Completion[JoinGroupResult]) -> None:
        member = MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_ms,
                                session_ms, protocol_type, protocols, is_new=True)
        if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, done)
        # a new member cannot heartbeat yet: its JoinGroup times out after 5 minutes instead
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        if instance_id is not None:
            group.static_members[instance_id] = member_id
        else:
            handle = group.pending_members.pop(member_id, None)
            if handle is not None:
                self.timer.cancel(handle)
        self._maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     protocols: list[tuple[str, bytes]],
                                     done: Completion[JoinGroupResult]) -> None:
        if member.join_completion is not None:   # superseded JoinGroup (reconnected client)
            group.invoke_join(member, _join_error(member.member_id, E.REBALANCE_IN_PROGRESS))
        group.update_member(member, protocols, done)
        self._maybe_prepare_rebalance(group)

    def _update_static_member(self, group: GroupMetadata, new_id: str, instance_id: str,
                              protocols: list[tuple[str, bytes]],
                              done: Completion[JoinGroupResult]) -> None:
        """A known group.instance.id rejoined with an unknown member id: fence the old id."""
        old_leader = group.leader_id
        old_id = group.static_members[instance_id]
        member = group.replace_static_member(
            old_id, new_id, instance_id, _join_error(old_id, E.FENCED_INSTANCE_ID),
            SyncGroupResult(E.FENCED_INSTANCE_ID))
        self._schedule_heartbeat(group, member)
        old_protocols = member.protocols
        group.update_member(member, protocols, done)
        if group.is_(S.STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(group)
                return
            # same protocol: persist the new member id, no rebalance; the old leader id is
            # returned so that a rejoining static leader does not re-run the assignment
            assignment = {m.member_id: m.assignment for m in group.members.values()}

            def stored(error: ErrorCode) -> None:
                if error != E.NONE:
                    group.update_member(member, old_protocols, None)
                    restored = group.replace_static_member(
                        new_id, old_id, instance_id, _join_error(new_id, E.UNKNOWN_MEMBER_ID),
                        SyncGroupResult(E.UNKNOWN_MEMBER_ID))
                    self._schedule_heartbeat(group, restored)
                    done.complete(JoinGroupResult(
                        error_code=error, member_id=UNKNOWN_MEMBER_ID,
                        generation_id=group.generation_id, protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name or "", leader=old_leader or ""))
                elif group.members.get(new_id) is member:
                    group.invoke_join(member, self._join_result(group, member, False, old_leader))

            self.manager.store_group(group, assignment).add_callback(stored)
        elif group.is_(S.COMPLETING_REBALANCE):
            # the leader may already assign for the old member id: rebalance again
            self._prepare_rebalance(group)
        # PreparingRebalance: the member simply takes part in the running rebalance

    # === rebalance =================================================================
    def _maybe_prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        initial = group.is_(S.EMPTY)
        group.transition_to(S.PREPARING_REBALANCE)
        self._cancel_join_timer(group)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            self._schedule_join(group, delay, True, max(group.rebalance_timeout_ms() - delay, 0))
        else:
            self._schedule_join(group, group.rebalance_timeout_ms(), False, 0)
            self._try_complete_join(group)

    def _schedule_join(self, group: GroupMetadata, delay_ms: int, initial: bool,
                       remaining_ms: int) -> None:
        op = _DelayedJoin(None, initial)
        op.handle = self.timer.schedule(
            delay_ms, lambda: self._on_join_timer(group, op, delay_ms, remaining_ms))
        group.join_timer = op

    def _cancel_join_timer(self, group: GroupMetadata) -> None:
        if group.join_timer is not None:
            self.timer.cancel(group.join_timer.handle)
            group.join_timer = None

    def _on_join_timer(self, group: GroupMetadata, op: _DelayedJoin, delay_ms: int,
                       remaining_ms: int) -> None:
        if group.join_timer is not op:
            return
        group.join_timer = None
        if op.initial and group.new_member_added and remaining_ms != 0:
            # InitialDelayedJoin: members keep arriving, wait again (within the timeout)
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            self._schedule_join(group, delay, True, max(remaining_ms - delay_ms, 0))
        else:
            self._complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        """DelayedJoin.tryComplete: finish early once every known member rejoined."""
        op = group.join_timer
        if (op is not None and not op.initial and group.is_(S.PREPARING_REBALANCE)
                and group.has_all_members_joined()):
            self._cancel_join_timer(group)
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """onCompleteJoin: drop dynamic members that did not rejoin, start a generation."""
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                self._cancel_heartbeat(member)
                group.invoke_sync(member, SyncGroupResult(E.UNKNOWN_MEMBER_ID))
                group.remove(member.member_id)
        if group.is_(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined (only absent static members left): wait another round
            self._schedule_join(group, group.rebalance_timeout_ms(), False, 0)
            return
        group.init_next_generation()
        if group.is_(S.EMPTY):
            def stored(error: ErrorCode) -> None:
                if error != E.NONE:
                    log.warning("failed to write empty metadata for group %s: %s", group.group_id, error)
            self.manager.store_group(group, {}).add_callback(stored)
            return
        for member in list(group.members.values()):
            group.invoke_join(member, self._join_result(group, member,
                                                        group.is_leader(member.member_id)))
            self._schedule_heartbeat(group, member)
            member.is_new = False

    # === SyncGroup =================================================================
    def handle_sync_group(self, group_id: str, generation_id: int, member_id: str,
                          group_instance_id: str | None, assignments: Mapping[str, bytes],
                          protocol_type: str | None = None,
                          protocol_name: str | None = None) -> Completion[SyncGroupResult]:
        """SyncGroup v0-3: the leader's ``assignments`` is {member id: assignment bytes}."""
        done: Completion[SyncGroupResult] = Completion()
        error = self._validate(group_id, "sync")
        group = self.manager.get_group(group_id) if error is None else None
        if error is E.COORDINATOR_LOAD_IN_PROGRESS:
            # the rebalance state is lost anyway; older clients don't know error 14
            done.complete(SyncGroupResult(E.REBALANCE_IN_PROGRESS))
        elif error is not None:
            done.complete(SyncGroupResult(error))
        elif group is None:
            done.complete(SyncGroupResult(E.UNKNOWN_MEMBER_ID))
        elif group.is_(S.DEAD):
            done.complete(SyncGroupResult(E.COORDINATOR_NOT_AVAILABLE))
        elif group.is_static_member_fenced(member_id, group_instance_id):
            done.complete(SyncGroupResult(E.FENCED_INSTANCE_ID))
        elif not group.has(member_id):
            done.complete(SyncGroupResult(E.UNKNOWN_MEMBER_ID))
        elif generation_id != group.generation_id:
            done.complete(SyncGroupResult(E.ILLEGAL_GENERATION))
        elif ((protocol_type is not None and protocol_type != group.protocol_type)
              or (protocol_name is not None and protocol_name != group.protocol_name)):
            done.complete(SyncGroupResult(E.INCONSISTENT_GROUP_PROTOCOL))
        elif group.is_(S.EMPTY):
            done.complete(SyncGroupResult(E.UNKNOWN_MEMBER_ID))
        elif group.is_(S.PREPARING_REBALANCE):
            done.complete(SyncGroupResult(E.REBALANCE_IN_PROGRESS))
        elif group.is_(S.STABLE):
            member = group.get(member_id)
            done.complete(SyncGroupResult(E.NONE, member.assignment, group.protocol_type,
                                          group.protocol_name))
            self._schedule_heartbeat(group, member)
        else:
            self._sync_completing(group, group.get(member_id), generation_id,
                                  dict(assignments), done)
        return done

    def _sync_completing(self, group: GroupMetadata, member: MemberMetadata, generation: int,
                         assignments: dict[str, bytes],
                         done: Completion[SyncGroupResult]) -> None:
        group.invoke_sync(member, SyncGroupResult(E.REBALANCE_IN_PROGRESS))  # superseded
        member.sync_completion = done
        if not group.is_leader(member.member_id):
            return   # followers wait for the leader's assignment
        assignment = {m: bytes(assignments.get(m, b"")) for m in group.members}

        def stored(error: ErrorCode) -> None:
            if not (group.is_(S.COMPLETING_REBALANCE) and group.generation_id == generation):
                return   # the group moved on while the write was in flight
            if error != E.NONE:
                self._reset_and_propagate_assignment_error(group, error)
                self._maybe_prepare_rebalance(group)
            else:
                for m in group.members.values():
                    m.assignment = assignment.get(m.member_id, b"")
                group.transition_to(S.STABLE)
                self._propagate_assignment(group, E.NONE)

        self.manager.store_group(group, assignment).add_callback(stored)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata,
                                              error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in list(group.members.values()):
            result = SyncGroupResult(error, member.assignment if error == E.NONE else b"",
                                     group.protocol_type, group.protocol_name)
            if group.invoke_sync(member, result):
                self._schedule_heartbeat(group, member)

    # === Heartbeat and sessions ====================================================
    def handle_heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                         generation_id: int) -> ErrorCode:
        error = self._validate(group_id, "heartbeat")
        if error is E.COORDINATOR_LOAD_IN_PROGRESS:
            return E.NONE   # Kafka answers blindly while loading
        if error is not None:
            return error
        group = self.manager.get_group(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, group_instance_id):
            return E.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.is_(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.get(member_id))
        return E.REBALANCE_IN_PROGRESS if group.is_(S.PREPARING_REBALANCE) else E.NONE

    def _on_pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is not None:
            if group.is_(S.PREPARING_REBALANCE):
                self._try_complete_join(group)

    def _remove_member_and_update_group(self, group: GroupMetadata,
                                        member: MemberMetadata) -> None:
        group.invoke_join(member, _join_error(UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID))
        group.invoke_sync(member, SyncGroupResult(E.UNKNOWN_MEMBER_ID))
        self._cancel_heartbeat(member)
        group.remove(member.member_id)
        if member.group_instance_id is not None and \
                group.static_members.get(member.group_instance_id) == member.member_id:
            del group.static_members[member.group_instance_id]
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # === LeaveGroup ================================================================
    def handle_leave_group(self, group_id: str,
                           members: list[tuple[str, str | None]]) -> LeaveGroupResult:
        """LeaveGroup v0-3: ``members`` is [(member id, group instance id)] (one for v0-2)."""
        error = self._validate(group_id, "leave")
        if error is not None:
            return LeaveGroupResult(error)
        group = self.manager.get_group(group_id)
        if group is None:
            return LeaveGroupResult(E.NONE, [LeaveMember(m, i, E.UNKNOWN_MEMBER_ID)
                                             for m, i in members])
        if group.is_(S.DEAD):
            return LeaveGroupResult(E.COORDINATOR_NOT_AVAILABLE)
        results = []
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID:   # admin removal by group.instance.id
                current = group.static_member_id(instance_id) if instance_id is not None else None
                if current is not None:
                    self._remove_member_and_update_group(group, group.get(current))
                    results.append(LeaveMember(member_id, instance_id, E.NONE))
                else:
                    results.append(LeaveMember(member_id, instance_id, E.UNKNOWN_MEMBER_ID))
            elif member_id in group.pending_members:
                self.timer.cancel(group.pending_members.pop(member_id))
                if group.is_(S.PREPARING_REBALANCE):
                    self._try_complete_join(group)
                results.append(LeaveMember(member_id, instance_id, E.NONE))
            else:
                member_error = self._validate_member(group, member_id, instance_id)
                if member_error is None:
                    self._remove_member_and_update_group(group, group.get(member_id))
                results.append(LeaveMember(member_id, instance_id, member_error or E.NONE))
        return LeaveGroupResult(E.NONE, results)
