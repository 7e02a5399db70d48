"""Topic deletion of the classic controller (Kafka 2.8 TopicDeletionManager).

Invariant: a topic queued in /admin/delete_topics is removed from ZooKeeper
(/brokers/topics/<t>, /config/topics/<t>, /admin/delete_topics/<t>) only after
every one of its replicas reached ReplicaDeletionSuccessful (StopReplica with
delete=True acknowledged without error); while any replica's broker is down the
topic is ineligible and deletion pauses, resuming when the broker returns; while one of its
partitions is being reassigned deletion waits for the reassignment to finish.
"""
from __future__ import annotations

import logging
from typing import Iterable

from .backend import ControllerZkBackend
from .context import ControllerContext, PartitionReplica
from .partition_state_machine import PartitionStateMachine
from .replica_state_machine import ReplicaStateMachine
from .request_batch import ControllerRequestBatch, OutRequest
from .states import PartitionState, ReplicaState

log = logging.getLogger(__name__)


class TopicDeletionManager:
    def __init__(self, ctx: ControllerContext, zk: ControllerZkBackend, batch: ControllerRequestBatch,
                 send, psm: PartitionStateMachine, rsm: ReplicaStateMachine, enabled: bool = True):
        self.ctx, self.zk, self.batch, self.send = ctx, zk, batch, send
        self.psm, self.rsm = psm, rsm
        self.enabled = enabled

    def init(self, topics_to_delete: Iterable[str], ineligible: Iterable[str]) -> None:
        if not self.enabled:
            return
        self.ctx.topics_to_delete = set(topics_to_delete)
        self.ctx.topics_ineligible_for_deletion = set(ineligible) & self.ctx.topics_to_delete

    # ------------------------------------------------------------ inputs

    async def enqueue_topics_for_deletion(self, topics: Iterable[str]) -> None:
        if self.enabled:
            self.ctx.topics_to_delete |= set(topics)
            await self.resume_deletions()

    async def resume_deletion_for_topics(self, topics: Iterable[str]) -> None:
        queued = set(topics) & self.ctx.topics_to_delete
        if queued:
            self.ctx.topics_ineligible_for_deletion -= queued
            await self.resume_deletions()

    async def fail_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        failed = [pr for pr in replicas if self.ctx.is_topic_queued_for_deletion(pr[0][0])]
        if failed:
            await self.rsm.handle_state_changes(failed, ReplicaState.DELETION_INELIGIBLE)
            self.mark_ineligible({pr[0][0] for pr in failed})
            await self.resume_deletions()

    async def complete_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        done = [pr for pr in replicas if self.ctx.is_topic_queued_for_deletion(pr[0][0])]
        await self.rsm.handle_state_changes(done, ReplicaState.DELETION_SUCCESSFUL)
        await self.resume_deletions()

    def mark_ineligible(self, topics: Iterable[str]) -> None:
        self.ctx.topics_ineligible_for_deletion |= set(topics) & self.ctx.topics_to_delete

    # ------------------------------------------------------------ progress

    def _any_replica_in(self, topic: str, state: ReplicaState) -> bool:
        return bool(self.ctx.replicas_in_state(topic, state))

    def _all_replicas_in(self, topic: str, state: ReplicaState) -> bool:
        prs = self.ctx.replicas_for_partitions(self.ctx.partitions_for_topic(topic))
        return all(self.ctx.replica_state(pr) is state for pr in prs)

    def is_eligible(self, topic: str) -> bool:
        return (topic in self.ctx.topics_to_delete
                and not self._any_replica_in(topic, ReplicaState.DELETION_STARTED)
                and topic not in self.ctx.topics_ineligible_for_deletion
                and not self.ctx.is_topic_being_reassigned(topic))

    async def resume_deletions(self) -> None:
        retry, eligible = set(), set()
        for topic in sorted(self.ctx.topics_to_delete):
            if self._all_replicas_in(topic, ReplicaState.DELETION_SUCCESSFUL):
                await self._complete_delete_topic(topic)
                continue
            if self._any_replica_in(topic, ReplicaState.DELETION_STARTED):
                pass  # in progress
            elif self._any_replica_in(topic, ReplicaState.DELETION_INELIGIBLE):
                retry.add(topic)
            if self.is_eligible(topic):
                eligible.add(topic)
        if retry:
            failed = [pr for t in sorted(retry) for pr in self.ctx.replicas_in_state(t, ReplicaState.DELETION_INELIGIBLE)]
            await self.rsm.handle_state_changes(failed, ReplicaState.OFFLINE)
        if eligible:
            await self._on_topic_deletion(eligible)

    async def _on_topic_deletion(self, topics: set[str]) -> None:
        unseen = topics - self.ctx.topics_with_deletion_started
        if unseen:
            parts = [tp for t in sorted(unseen) for tp in self.ctx.partitions_for_topic(t)]
            await self.psm.handle_state_changes(parts, PartitionState.OFFLINE)
            await self.psm.handle_state_changes(parts, PartitionState.NON_EXISTENT)
            self.ctx.topics_with_deletion_started |= unseen
        # Tell every broker the topic is going (leader -2), then stop and delete the replicas.
        self.batch.new_batch()
        self.batch.add_update_metadata(self.ctx.live_or_shutting_down_broker_ids(),
                                       [tp for t in sorted(topics) for tp in self.ctx.partitions_for_topic(t)])
        self.send(self.batch.build())
        await self._on_partition_deletion(topics)

    async def _on_partition_deletion(self, topics: set[str]) -> None:
        dead_all: list[PartitionReplica] = []
        retry_all: list[PartitionReplica] = []
        ineligible: set[str] = set()
        for t in sorted(topics):
            prs = self.ctx.replicas_for_partitions(self.ctx.partitions_for_topic(t))
            alive = [pr for pr in prs if self.ctx.is_replica_online(pr[1], pr[0])]
            dead = [pr for pr in prs if pr not in alive]
            done = set(self.ctx.replicas_in_state(t, ReplicaState.DELETION_SUCCESSFUL))
            dead_all += dead
            retry_all += [pr for pr in alive if pr not in done]
            if dead:
                ineligible.add(t)
        await self.rsm.handle_state_changes(dead_all, ReplicaState.DELETION_INELIGIBLE)
        await self.rsm.handle_state_changes(retry_all, ReplicaState.OFFLINE)
        await self.rsm.handle_state_changes(retry_all, ReplicaState.DELETION_STARTED)
        if ineligible:
            self.mark_ineligible(ineligible)

    async def _complete_delete_topic(self, topic: str) -> None:
        done = self.ctx.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL)
        await self.rsm.handle_state_changes(done, ReplicaState.NON_EXISTENT)
        await self.zk.delete_topic(topic)
        self.ctx.remove_topic(topic)
        log.info("controller: deletion of topic %s completed", topic)


__all__ = ["TopicDeletionManager", "OutRequest"]
