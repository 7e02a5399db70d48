"""The members' session timers of the group coordinator, mixed into ``GroupCoordinator``.

Invariant: a member has at most one live session timer, and it expires the member at its
deadline (its last heartbeat, join, sync or commit plus the timeout in force), never earlier, and
later only by as much as the timer service runs late. A heartbeat only moves the deadline: the timer
already set is kept when it fires no later, and when it fires before the deadline it sets itself
again for the rest. So a member heartbeating every few seconds costs one timer per session
timeout rather than one per heartbeat (a Twisted ``DelayedCall`` set and cancelled each time,
which was most of a Heartbeat's cost in the coordinator).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from . import Timer
from .metadata import GroupMetadata, GroupState, MemberMetadata

log = logging.getLogger(__name__)

__all__ = ["SessionTimers"]


class SessionTimers:
    """Set, move and fire members' session timers; relies on the coordinator's ``timer`` and
    ``_remove_member_and_update_group``."""

    timer: Timer
    _remove_member_and_update_group: Callable[[GroupMetadata, MemberMetadata], None]

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                            timeout_ms: int | None = None) -> None:
        """``member`` expires ``timeout_ms`` (its session timeout) from now unless this is called
        again first."""
        deadline = self.timer.now_ms() + (member.session_timeout_ms if timeout_ms is None else timeout_ms)
        member.heartbeat_deadline_ms = deadline
        if member.heartbeat_timer is None or member.heartbeat_timer_due_ms > deadline:
            self._cancel_heartbeat(member)
            self._set_heartbeat_timer(group, member, deadline)

    def _set_heartbeat_timer(self, group: GroupMetadata, member: MemberMetadata, due_ms: int) -> None:
        handle: Any = None

        def fire() -> None:
            self._on_heartbeat_timer(group, member, handle)

        handle = member.heartbeat_timer = self.timer.schedule(due_ms - self.timer.now_ms(), fire)
        member.heartbeat_timer_due_ms = due_ms

    def _cancel_heartbeat(self, member: MemberMetadata) -> None:
        if member.heartbeat_timer is not None:
            self.timer.cancel(member.heartbeat_timer)
            member.heartbeat_timer = None

    def _on_heartbeat_timer(self, group: GroupMetadata, member: MemberMetadata, handle: Any) -> None:
        if member.heartbeat_timer is not handle:
            return   # cancelled, or replaced by an earlier one
        member.heartbeat_timer = None
        if member.heartbeat_deadline_ms > self.timer.now_ms():   # heartbeats came since it was set
            self._set_heartbeat_timer(group, member, member.heartbeat_deadline_ms)
            return
        if group.is_(GroupState.DEAD) or group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return   # parked in a rebalance: the rebalance itself times it out
        log.info("member %s of group %s failed (session timeout)", member.member_id, group.group_id)
        self._remove_member_and_update_group(group, member)
