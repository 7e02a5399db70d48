"""Replica state machine of the classic controller (Kafka 2.8 ZkReplicaStateMachine).

Invariant: a replica's state changes only through ``ReplicaState.transition_to``
(illegal moves are logged and skipped); moving a replica Offline first removes
it from the ISR in ZooKeeper (conditional update inside the epoch fence, the
last ISR member is kept, leader -1 if it led) and only then tells the remaining
replicas (LeaderAndIsr) and the cluster (UpdateMetadata); StopReplica goes to
the replica itself (delete=False for Offline, delete=True for DeletionStarted).
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable

from odradek.zk.znodes import LeaderIsrAndControllerEpoch

from . import election
from .backend import ControllerMovedError, ControllerZkBackend, known_or_read_states
from .context import ControllerContext, PartitionReplica, TopicPartition
from .request_batch import ControllerRequestBatch, OutRequest
from .states import IllegalStateTransition, ReplicaState

log = logging.getLogger(__name__)


class ReplicaStateMachine:
    def __init__(self, ctx: ControllerContext, zk: ControllerZkBackend, batch: ControllerRequestBatch,
                 send: Callable[[list[OutRequest]], None]):
        self.ctx = ctx
        self.zk = zk
        self.batch = batch
        self.send = send

    def initialize_replica_states(self) -> None:
        for tp in self.ctx.all_partitions():
            for b in self.ctx.replicas(tp):
                online = self.ctx.is_replica_online(b, tp, include_shutting_down=True)
                self.ctx.replica_states[(tp, b)] = (ReplicaState.ONLINE if online
                                                    else ReplicaState.DELETION_INELIGIBLE)

    async def startup(self) -> None:
        self.initialize_replica_states()
        online = [pr for pr, s in self.ctx.replica_states.items() if s is ReplicaState.ONLINE]
        offline = [pr for pr, s in self.ctx.replica_states.items() if s is not ReplicaState.ONLINE]
        await self.handle_state_changes(online, ReplicaState.ONLINE)
        await self.handle_state_changes(offline, ReplicaState.OFFLINE)

    async def handle_state_changes(self, replicas: Iterable[PartitionReplica], target: ReplicaState) -> None:
        replicas = list(replicas)
        if not replicas:
            return
        self.batch.new_batch()
        try:
            await self.apply(replicas, target)
            self.send(self.batch.build())
        except ControllerMovedError:
            self.batch.clear()
            raise

    async def apply(self, replicas: Iterable[PartitionReplica], target: ReplicaState,
                    fresh: frozenset[TopicPartition] = frozenset()) -> None:
        """Make the state changes, adding their requests to the open batch without sending it.
        ``fresh``: partitions whose state this controller wrote earlier in the same event (their
        cached state is current: a replica already out of their ISR needs no ZooKeeper read)."""
        by_broker: dict[int, list[PartitionReplica]] = {}
        for pr in replicas:
            by_broker.setdefault(pr[1], []).append(pr)
        for broker_id in sorted(by_broker):
            await self._do_handle(broker_id, by_broker[broker_id], target, fresh)

    def _put(self, pr: PartitionReplica, target: ReplicaState) -> None:
        self.ctx.replica_states[pr] = self.ctx.replica_state(pr).transition_to(target)

    def _valid(self, replicas: list[PartitionReplica], target: ReplicaState) -> list[PartitionReplica]:
        out = []
        for pr in replicas:
            try:
                self.ctx.replica_state(pr).transition_to(target)
                out.append(pr)
            except IllegalStateTransition as exc:
                log.error("controller: invalid replica state change for %s: %s", pr, exc)
        return out

    async def _do_handle(self, broker_id: int, replicas: list[PartitionReplica], target: ReplicaState,
                         fresh: frozenset[TopicPartition] = frozenset()) -> None:
        valid = self._valid(replicas, target)
        ctx, batch = self.ctx, self.batch
        if target is ReplicaState.NEW:
            for pr in valid:
                tp = pr[0]
                st = ctx.leadership.get(tp)
                if st is not None and st.leader == broker_id:
                    log.error("controller: replica %s cannot become New: it is the leader", pr)
                    continue
                if st is not None:
                    batch.add_leader_and_isr([broker_id], tp, st, ctx.replicas(tp), is_new=True)
                self._put(pr, target)
        elif target is ReplicaState.ONLINE:
            for pr in valid:
                tp = pr[0]
                if ctx.replica_state(pr) is ReplicaState.NEW:
                    if broker_id not in ctx.replicas(tp):
                        ctx.set_assignment(tp, ctx.replicas(tp) + [broker_id])
                else:
                    st = ctx.leadership.get(tp)
                    if st is not None:
                        batch.add_leader_and_isr([broker_id], tp, st, ctx.replicas(tp), is_new=False)
                self._put(pr, target)
        elif target is ReplicaState.OFFLINE:
            for pr in valid:
                batch.add_stop_replica([broker_id], pr[0], delete=False)
            with_info = [pr for pr in valid if pr[0] in ctx.leadership]
            without = [pr for pr in valid if pr[0] not in ctx.leadership]
            # Already out of an ISR this event wrote (the partitions it just elected leaders for):
            # nothing to write or tell.
            done = {pr for pr in with_info if pr[0] in fresh and broker_id not in ctx.leadership[pr[0]].isr}
            for pr in done:
                self._put(pr, target)
            updated, unchanged = await self.remove_replicas_from_isr(
                broker_id, [pr[0] for pr in with_info if pr not in done])
            for tp, st in updated.items():
                if not ctx.is_topic_queued_for_deletion(tp[0]):
                    recipients = [b for b in ctx.replicas(tp) if b != broker_id]
                    batch.add_leader_and_isr(recipients, tp, st, ctx.replicas(tp), is_new=False)
                self._put((tp, broker_id), target)
            for tp in unchanged:   # not in the ISR already: no LeaderAndIsr (as Kafka)
                self._put((tp, broker_id), target)
            for pr in without:
                batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids(), [pr[0]])
                self._put(pr, target)
        elif target is ReplicaState.DELETION_STARTED:
            for pr in valid:
                self._put(pr, target)
                batch.add_stop_replica([broker_id], pr[0], delete=True)
        elif target in (ReplicaState.DELETION_INELIGIBLE, ReplicaState.DELETION_SUCCESSFUL):
            for pr in valid:
                self._put(pr, target)
        elif target is ReplicaState.NON_EXISTENT:
            for pr in valid:
                tp = pr[0]
                ctx.set_assignment(tp, [b for b in ctx.replicas(tp) if b != broker_id])
                ctx.replica_states.pop(pr, None)

    async def remove_replicas_from_isr(self, broker_id: int, partitions: list[TopicPartition]
                                       ) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch],
                                                  list[TopicPartition]]:
        """Shrink the ISR in ZooKeeper (with retries on zk_version races): the states written,
        and the partitions whose ISR did not hold the replica already."""
        out: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        unchanged: list[TopicPartition] = []
        remaining = list(partitions)
        cached = True   # first attempt over the known states (conditional writes: see backend)
        while remaining:
            if cached:   # known states, but "not in the ISR" (no write follows) only as read
                current = await known_or_read_states(self.ctx, self.zk, remaining)
                unsure = [tp for tp, st in current.items() if broker_id not in st.isr]
                if unsure:
                    current.update(await self.zk.get_partition_states(unsure))
            else:
                current = await self.zk.get_partition_states(remaining)
            cached = False
            updates: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
            for tp in remaining:
                st = current.get(tp)
                if st is None:
                    if not self.ctx.is_topic_queued_for_deletion(tp[0]):
                        log.error("controller: cannot remove %d from the ISR of %s: no state znode",
                                  broker_id, tp)
                    continue
                if st.controller_epoch > self.ctx.epoch:
                    log.error("controller: state of %s written by a newer controller", tp)
                    continue
                if broker_id not in st.isr:
                    self.ctx.leadership[tp] = st
                    unchanged.append(tp)
                    continue
                leader, isr = election.remove_replica_from_isr(st.leader, st.isr, broker_id)
                updates[tp] = LeaderIsrAndControllerEpoch(leader, st.leader_epoch + 1, isr,
                                                          self.ctx.epoch, st.zk_version)
            if not updates:
                break
            res = await self.zk.update_partition_states(updates)
            for tp, st in res.succeeded.items():
                self.ctx.leadership[tp] = st
                out[tp] = st
            for tp, exc in res.failed.items():
                log.error("controller: removing %d from the ISR of %s failed: %r", broker_id, tp, exc)
            remaining = list(res.bad_version)
        return out, unchanged
