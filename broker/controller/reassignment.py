"""PartitionReassignments: moving partitions' replicas between brokers (KIP-455, Kafka 2.8's
KafkaController.onPartitionReassignment and friends).

Invariant: a reassignment of partition P from origin replicas ORS to target replicas TRS runs as
Kafka's: (1) /brokers/topics/<t> and the context get RS = ORS + TRS with AR = TRS - ORS being
added and RR = ORS - TRS being removed; (2) the leader epoch is bumped and every replica in RS
gets LeaderAndIsr with RS (the adding ones as new replicas), so the leader starts tracking them
and they start fetching; (3) only once every TRS replica is in the ISR (read from P's state
znode, whose data watch re-runs the check) does RS become TRS, the leader move to a TRS replica
when it is in RR or offline, the RR replicas go Offline (out of the ISR) and are deleted
(StopReplica delete), the topic znode lose AR/RR and /admin/reassign_partitions lose P. Nothing
acknowledged is lost: the ISR never loses a replica before the target replicas are all in it.
A new reassignment of a partition being reassigned starts from its origin replicas (adding
replicas no longer wanted are stopped at once); a cancellation (no target) goes back to them.
While a topic has a partition being reassigned it is not deleted. Sans-IO like ``ControllerCore``.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable

from odradek.protocol.errors import ErrorCode
from odradek.zk.znodes import LeaderIsrAndControllerEpoch, ReplicaAssignment

from .backend import ControllerMovedError, ControllerZkBackend
from .context import ControllerContext, TopicPartition
from .partition_state_machine import PartitionStateMachine, Strategy
from .replica_state_machine import ReplicaStateMachine
from .request_batch import ControllerRequestBatch, OutRequest
from .states import PartitionState, ReplicaState
from .topic_deletion import TopicDeletionManager

log = logging.getLogger(__name__)

Outcome = tuple[ErrorCode, "str | None"]
NO_PARTITION: Outcome = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")


class PartitionReassignments:
    def __init__(self, ctx: ControllerContext, zk: ControllerZkBackend, batch: ControllerRequestBatch,
                 send: Callable[[list[OutRequest]], None], psm: PartitionStateMachine,
                 rsm: ReplicaStateMachine, deletion: TopicDeletionManager):
        self.ctx, self.zk, self.batch, self.send = ctx, zk, batch, send
        self.psm, self.rsm, self.deletion = psm, rsm, deletion
        self._zk_request_czxid: int | None = None   # the /admin/reassign_partitions node handled

    # ------------------------------------------------------------ inputs

    async def alter(self, requested: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, Outcome]:
        """AlterPartitionReassignments: a target per partition, or None to cancel (Kafka's
        processApiPartitionReassignment)."""
        results: dict[TopicPartition, Outcome] = {}
        to_start: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in requested.items():
            error = self.validate(tp, target) if target is not None else None
            if error is not None:
                results[tp] = error
                continue
            ra = self._build(tp, target)
            if ra is None:
                results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment in progress for "
                               f"{tp[0]}-{tp[1]}.")
            else:
                to_start[tp] = ra
        # The latest reassignment, whichever way it came, wins over one asked through ZooKeeper.
        await self._remove_from_zk_request(lambda tp, _: tp in to_start)
        results.update(await self._trigger(to_start))
        return results

    def ongoing(self, partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment]:
        """ListPartitionReassignments: the ongoing reassignments (of ``partitions``, None: all)."""
        being = self.ctx.partitions_being_reassigned
        chosen = being if partitions is None else {tp for tp in partitions if tp in being}
        return {tp: self.ctx.full_assignment(tp) for tp in sorted(chosen)}

    async def on_zk_request(self) -> set[TopicPartition]:
        """/admin/reassign_partitions was created (Kafka acts on a new node only, not on changes to
        it); the partitions whose reassignment started. Invalid ones are dropped from it."""
        found = await self.zk.get_partition_reassignment()
        if found is None:
            self._zk_request_czxid = None
            return set()
        requested, czxid = found
        if czxid == self._zk_request_czxid:
            return set()
        self._zk_request_czxid = czxid
        results: dict[TopicPartition, Outcome] = {}
        to_start: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in requested.items():
            error = self.validate(tp, target)
            ra = self._build(tp, target) if error is None else None
            if error is not None or ra is None:
                results[tp] = error or NO_PARTITION
            else:
                to_start[tp] = ra
        results.update(await self._trigger(to_start))
        failed = {tp: r for tp, r in results.items() if r[0] != ErrorCode.NONE}
        if failed:
            log.warning("controller: reassignments through ZooKeeper refused: %s",
                        {f"{t}-{p}": f"{c.name}: {m}" for (t, p), (c, m) in failed.items()})
            await self._remove_from_zk_request(lambda tp, _: tp in failed)
        return {tp for tp, r in results.items() if r[0] == ErrorCode.NONE}

    async def on_isr_change(self, tp: TopicPartition) -> None:
        """The state znode of a partition being reassigned changed: finish it if it caught up."""
        if tp in self.ctx.partitions_being_reassigned:
            ra = self.ctx.full_assignment(tp)
            if await self._is_complete(tp, ra):
                log.info("controller: target replicas %s of %s-%d are all in the ISR", ra.target_replicas, *tp)
                await self._on_partition_reassignment(tp, ra)

    async def on_failover(self) -> None:
        """Resume what the topic znodes say is being reassigned and what ZooKeeper asks for."""
        self._zk_request_czxid = None
        self.ctx.partitions_being_reassigned = set(self.ctx.reassigning_replicas)
        started = await self.on_zk_request()
        await self._trigger({tp: self.ctx.full_assignment(tp)
                             for tp in sorted(self.ctx.partitions_being_reassigned - started)}, resume=True)

    async def on_broker_startup(self, new_brokers: Iterable[int]) -> None:
        """Brokers (re)started: resend the reassignments whose target replicas live on them."""
        new = set(new_brokers)
        await self._trigger({tp: ra for tp in sorted(self.ctx.partitions_being_reassigned)
                             if set((ra := self.ctx.full_assignment(tp)).target_replicas) & new}, resume=True)

    # ------------------------------------------------------------ checks

    def validate(self, tp: TopicPartition, target: list[int]) -> Outcome | None:
        """Kafka's validateReplicas: None if ``target`` may be reassigned to."""
        if not self.ctx.replicas(tp):
            return NO_PARTITION
        if not target:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment.")
        if len(set(target)) != len(target):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Duplicate replica ids in partition reassignment replica list: {list(target)}")
        if any(b < 0 for b in target):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {list(target)}")
        adding = self.ctx.full_assignment(tp).reassign_to(list(target)).adding_replicas
        live = self.ctx.live_broker_ids()
        if not set(adding) <= live:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Replica assignment has brokers that are not alive. Replica list: {adding}, "
                    f"live broker list: {sorted(live)}")
        return None

    def _build(self, tp: TopicPartition, target: list[int] | None) -> ReplicaAssignment | None:
        """The assignment to go to (None: a cancellation with nothing to cancel)."""
        current = self.ctx.full_assignment(tp)
        if current.is_being_reassigned:
            return current.reassign_to(current.origin_replicas if target is None else list(target))
        return None if target is None else current.reassign_to(list(target))

    async def _is_complete(self, tp: TopicPartition, ra: ReplicaAssignment) -> bool:
        if not ra.is_being_reassigned:
            return True
        st = await self.zk.get_partition_state_watched(tp)   # (re)arms the ISR watch
        return st is not None and set(ra.target_replicas) <= set(st.isr)

    # ------------------------------------------------------------ the reassignment

    async def _trigger(self, reassignments: dict[TopicPartition, ReplicaAssignment], resume: bool = False
                       ) -> dict[TopicPartition, Outcome]:
        """Start (or, ``resume``, carry on with) each reassignment. A new one of a topic being
        deleted is refused; one already running goes on, and the deletion waits for it."""
        out: dict[TopicPartition, Outcome] = {}
        for tp, ra in reassignments.items():
            if (self.ctx.is_topic_queued_for_deletion(tp[0]) and not resume) or not self.ctx.replicas(tp):
                out[tp] = NO_PARTITION
                continue
            try:
                await self._on_partition_reassignment(tp, ra)
                out[tp] = (ErrorCode.NONE, None)
            except ControllerMovedError:
                raise
            except Exception as exc:
                log.exception("controller: reassignment of %s-%d failed", *tp)
                out[tp] = (ErrorCode.UNKNOWN_SERVER_ERROR, str(exc) or type(exc).__name__)
        return out

    async def _on_partition_reassignment(self, tp: TopicPartition, ra: ReplicaAssignment) -> None:
        await self._update_current_reassignment(tp, ra)
        if not await self._is_complete(tp, ra):
            log.info("controller: reassigning %s-%d: replicas %s, adding %s, removing %s", *tp,
                     ra.replicas, ra.adding_replicas, ra.removing_replicas)
            await self._bump_leader_epoch_and_send(tp, ra)
            fresh = [(tp, b) for b in ra.adding_replicas
                     if self.ctx.replica_state((tp, b)) is ReplicaState.NON_EXISTENT]
            await self.rsm.handle_state_changes(fresh, ReplicaState.NEW)
            return
        await self.rsm.handle_state_changes([(tp, b) for b in ra.adding_replicas], ReplicaState.ONLINE)
        done = ReplicaAssignment(ra.target_replicas)
        self.ctx.set_full_assignment(tp, done)
        await self._move_leader_if_required(tp, done)
        await self._stop_removed_replicas(tp, ra.removing_replicas)
        await self.zk.set_replica_assignment(tp[0], self._topic_assignment(tp[0]))
        self.ctx.partitions_being_reassigned.discard(tp)
        await self._remove_from_zk_request(lambda p, replicas: p == tp and replicas == done.replicas)
        self.batch.new_batch()
        self.batch.add_update_metadata(self.ctx.live_or_shutting_down_broker_ids(), [tp])
        self.send(self.batch.build())
        log.info("controller: reassignment of %s-%d done: replicas %s", *tp, done.replicas)
        await self.deletion.resume_deletion_for_topics({tp[0]})

    async def _update_current_reassignment(self, tp: TopicPartition, ra: ReplicaAssignment) -> None:
        current = self.ctx.full_assignment(tp)
        if current != ra:
            await self.zk.set_replica_assignment(tp[0], self._topic_assignment(tp[0], {tp[1]: ra}))
            self.ctx.set_full_assignment(tp, ra)
            unneeded = [b for b in current.replicas if b not in ra.replicas]
            if unneeded:   # adding replicas of the reassignment this one replaces
                await self._stop_removed_replicas(tp, unneeded)
        self.ctx.partitions_being_reassigned.add(tp)

    def _topic_assignment(self, topic: str, changed: dict[int, ReplicaAssignment] | None = None
                          ) -> dict[int, ReplicaAssignment]:
        out = {p: self.ctx.full_assignment((topic, p)) for _, p in self.ctx.partitions_for_topic(topic)}
        out.update(changed or {})
        return out

    async def _move_leader_if_required(self, tp: TopicPartition, done: ReplicaAssignment) -> None:
        leader = self.ctx.leadership[tp].leader if tp in self.ctx.leadership else -1
        if leader in done.replicas and self.ctx.is_replica_online(leader, tp):
            await self._bump_leader_epoch_and_send(tp, done)   # tells the leader the smaller replica set
        else:
            log.info("controller: moving the leader of %s-%d (%d) to one of %s", *tp, leader, done.replicas)
            await self.psm.handle_state_changes([tp], PartitionState.ONLINE, Strategy.REASSIGN)

    async def _stop_removed_replicas(self, tp: TopicPartition, removed: list[int]) -> None:
        replicas = [(tp, b) for b in removed]
        for state in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED,
                      ReplicaState.DELETION_SUCCESSFUL, ReplicaState.NON_EXISTENT):
            await self.rsm.handle_state_changes(replicas, state)

    async def _bump_leader_epoch_and_send(self, tp: TopicPartition, ra: ReplicaAssignment) -> None:
        st = await self._bump_leader_epoch(tp)
        if st is None:
            log.error("controller: cannot bump the leader epoch of %s-%d for its reassignment", *tp)
            return
        self.batch.new_batch()
        self.batch.add_leader_and_isr(ra.origin_replicas, tp, st, ra.replicas, is_new=False)
        self.batch.add_leader_and_isr(ra.adding_replicas, tp, st, ra.replicas, is_new=True)
        self.send(self.batch.build())

    async def _bump_leader_epoch(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        while True:
            st = (await self.zk.get_partition_states([tp])).get(tp)
            if st is None or st.controller_epoch > self.ctx.epoch:
                return None
            new = LeaderIsrAndControllerEpoch(st.leader, st.leader_epoch + 1, list(st.isr), self.ctx.epoch,
                                              st.zk_version)
            res = await self.zk.update_partition_states({tp: new})
            if tp in res.succeeded:
                self.ctx.leadership[tp] = res.succeeded[tp]
                return res.succeeded[tp]
            if tp not in res.bad_version:
                return None

    async def _remove_from_zk_request(self, drop: Callable[[TopicPartition, list[int]], bool]) -> None:
        found = await self.zk.get_partition_reassignment()
        if found is None:
            return
        requested = found[0]
        left = {tp: r for tp, r in requested.items() if not drop(tp, r)}
        if left != requested:
            await self.zk.set_partition_reassignment(left)
