"""ConsumerCoordinator: the consumer's group membership (``AbstractCoordinator``) with the
``consumer`` protocol type, its assignors and offset commit/fetch (``OffsetCommits``).

Invariant: the member joins with one protocol per assignor (a ``Subscription`` of the
consumer's topics); as leader it assigns with the assignor the coordinator chose, over the
partition counts it records in ``leader_snapshot`` (so the consumer can rejoin when they
change); an assignment is handed to the consumer (``GroupHooks``) only after the assignor
that made it has seen it. Hooks run on the consumer's thread.
"""
from __future__ import annotations

import logging
from typing import Any, Protocol

from odradek.protocol.errors import ErrorCode, KafkaError

from .assignors import CONSUMER_PROTOCOL_TYPE, AbstractAssignor, Assignment, Subscription
from .cluster import ClusterMetadata, NodePool
from .group_membership import Generation
from .offset_commits import OffsetCommits

log = logging.getLogger(__name__)


class GroupHooks(Protocol):
    """What the coordinator needs from its consumer (called on the consumer's thread)."""

    def subscribed_topics(self) -> list[str]: ...

    def on_join_prepare(self, generation_valid: bool) -> None: ...

    def on_join_complete(self, generation: Generation, assignment: Assignment, assignor: AbstractAssignor) -> None: ...

    def partitions_per_topic(self, topics: set[str]) -> dict[str, int]: ...


class ConsumerCoordinator(OffsetCommits):
    """Membership of one consumer in ``group.id``."""

    protocol_type = CONSUMER_PROTOCOL_TYPE

    def __init__(self, config: Any, cluster: ClusterMetadata, pool: NodePool, assignors: list[AbstractAssignor],
                 hooks: GroupHooks) -> None:
        self.assignors, self.hooks = assignors, hooks
        self.group_subscription: set[str] = set()
        self.leader_snapshot: dict[str, int] = {}  # leader: partition counts the assignment used
        super().__init__(config, cluster, pool)

    def join_protocols(self) -> list[tuple[str, bytes]]:
        topics = sorted(self.hooks.subscribed_topics())
        return [(a.name, Subscription(topics, a.subscription_user_data(topics)).encode()) for a in self.assignors]

    def on_join_prepare(self, generation_valid: bool) -> None:
        self.hooks.on_join_prepare(generation_valid)

    def perform_assignment(self, leader_id: str, protocol: str,
                           members: list[tuple[str, str | None, bytes]]) -> dict[str, bytes]:
        assignor = self._assignor(protocol)
        subs: dict[str, Subscription] = {}
        for member_id, instance_id, metadata in members:
            try:
                subs[member_id] = Subscription.decode(metadata, instance_id)
            except ValueError as exc:
                log.warning("group %s: member %s sent an undecodable subscription (%s)", self.group_id,
                            member_id, exc)
                subs[member_id] = Subscription([], group_instance_id=instance_id)
        topics = {t for s in subs.values() for t in s.topics}
        counts = self.hooks.partitions_per_topic(topics)
        with self._lock:
            self.group_subscription = topics
            self.leader_snapshot = dict(counts)
        result = assignor.assign(counts, subs)
        log.info("group %s: leader assigned %s", self.group_id, {m: len(ps) for m, ps in result.items()})
        return {m: Assignment(list(result.get(m, []))).encode() for m in subs}

    def on_join_complete(self, generation: Generation, assignment: bytes) -> None:
        try:
            decoded = Assignment.decode(assignment)
        except ValueError as exc:
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"undecodable assignment: {exc}") from None
        assignor = self._assignor(generation.protocol)
        assignor.on_assignment(decoded, generation.generation_id)
        self.hooks.on_join_complete(generation, decoded, assignor)

    def _assignor(self, name: str | None) -> AbstractAssignor:
        for a in self.assignors:
            if a.name == name:
                return a
        raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"coordinator chose unknown assignor {name!r}")
