"""The read-only group APIs of the group coordinator (``GroupQueryApis``, mixed into
``GroupCoordinator``): ListGroups and DescribeGroups.

Invariant: these never change a group; a member's metadata and assignment are shown only
while the group is Stable (as Kafka does), and a group this coordinator does not know is
described as Dead.
"""
from __future__ import annotations

from typing import Callable, Iterable

from odradek.protocol.errors import ErrorCode

from . import DescribedGroup, DescribedMember, ListedGroup, ListGroupsResult
from .metadata import GroupState
from .offsets import GroupMetadataManager

E = ErrorCode
S = GroupState


class GroupQueryApis:
    """ListGroups and DescribeGroups (mixed into the GroupCoordinator). Relies on the
    coordinator's ``manager``, ``active`` and ``_validate``."""

    manager: GroupMetadataManager
    active: bool
    _validate: Callable[..., "ErrorCode | None"]

    def handle_list_groups(self) -> ListGroupsResult:
        if not self.active:
            return ListGroupsResult(E.COORDINATOR_NOT_AVAILABLE)
        error = E.COORDINATOR_LOAD_IN_PROGRESS if self.manager.is_loading() else E.NONE
        return ListGroupsResult(error, [ListedGroup(g.group_id, g.protocol_type or "",
                                                    g.state.value)
                                        for g in self.manager.groups.values()])

    def handle_describe_groups(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        return [self._describe(group_id) for group_id in group_ids]

    def _describe(self, group_id: str) -> DescribedGroup:
        error = self._validate(group_id, "describe")
        if error is not None:
            return DescribedGroup(error, group_id)   # state "" as Kafka's NoState
        group = self.manager.get_group(group_id)
        if group is None:
            return DescribedGroup(E.NONE, group_id, S.DEAD.value)
        stable = group.is_(S.STABLE)
        protocol = group.protocol_name if stable else None
        members = [DescribedMember(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.metadata(protocol) if protocol is not None else b"",
            m.assignment if stable else b"") for m in group.members.values()]
        return DescribedGroup(E.NONE, group_id, group.state.value, group.protocol_type or "",
                              protocol or "", members)
