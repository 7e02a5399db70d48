"""Partition state machine of the classic controller (Kafka 2.8 ZkPartitionStateMachine).

Invariant: a partition's state changes only through ``PartitionState.transition_to``
(illegal moves are logged and skipped, as Kafka does); a partition becomes
Online only after its state znode was created (New) or conditionally updated
(Offline/Online re-election) inside the controller-epoch fence, and only then
are LeaderAndIsr/UpdateMetadata entries added to the request batch. ZooKeeper
is reached only through the ``ControllerZkBackend``.
"""
from __future__ import annotations

import logging
import time
from enum import Enum
from typing import Callable, Iterable

from odradek.zk.znodes import LeaderIsrAndControllerEpoch

from ..metrics import ControllerStats
from . import election
from .backend import ControllerMovedError, ControllerZkBackend, known_or_read_states
from .context import ControllerContext, TopicPartition
from .election import ElectionResult
from .request_batch import ControllerRequestBatch, OutRequest
from .states import IllegalStateTransition, PartitionState

log = logging.getLogger(__name__)
LOGGED_FAILURES = 5   # failed elections of one round logged one by one at ERROR


class StateChangeFailedError(Exception):
    pass


class Strategy(Enum):
    OFFLINE = "offline"                   # unclean decided by topic config
    OFFLINE_ALLOW_UNCLEAN = "offline-unclean"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled-shutdown"
    REASSIGN = "reassign"                 # a completed reassignment's leader, from its replicas


def _truthy(v: object) -> bool:
    return str(v).strip().lower() == "true"


class PartitionStateMachine:
    def __init__(self, ctx: ControllerContext, zk: ControllerZkBackend, batch: ControllerRequestBatch,
                 send: Callable[[list[OutRequest]], None], unclean_default: bool = False):
        self.ctx = ctx
        self.zk = zk
        self.batch = batch
        self.send = send
        self.unclean_default = unclean_default
        self.stats = ControllerStats()   # Kafka's ControllerStats (unclean elections, election time)

    # ------------------------------------------------------------ lifecycle

    def initialize_partition_states(self) -> None:
        """Online if the leader is live, Offline if a state exists without a live leader, else New."""
        for tp in self.ctx.all_partitions():
            st = self.ctx.leadership.get(tp)
            if st is None:
                self.ctx.partition_states[tp] = PartitionState.NEW
            elif self.ctx.is_replica_online(st.leader, tp, include_shutting_down=True):
                self.ctx.partition_states[tp] = PartitionState.ONLINE
            else:
                self.ctx.partition_states[tp] = PartitionState.OFFLINE

    async def startup(self) -> None:
        self.initialize_partition_states()
        await self.trigger_online_partition_state_change()

    async def trigger_online_partition_state_change(self, topic: str | None = None) -> dict:
        parts = [tp for tp in self.ctx.partitions_in_state(PartitionState.NEW, PartitionState.OFFLINE)
                 if not self.ctx.is_topic_queued_for_deletion(tp[0]) and (topic is None or tp[0] == topic)]
        return await self.handle_state_changes(parts, PartitionState.ONLINE, Strategy.OFFLINE)

    # ------------------------------------------------------------ transitions

    async def handle_state_changes(self, partitions: Iterable[TopicPartition], target: PartitionState,
                                   strategy: Strategy | None = None
                                   ) -> dict[TopicPartition, ElectionResult | Exception]:
        partitions = list(partitions)
        if not partitions:
            return {}
        self.batch.new_batch()
        try:
            results = await self.apply(partitions, target, strategy)
            self.send(self.batch.build())
            return results
        except ControllerMovedError:
            self.batch.clear()
            raise

    async def apply(self, partitions: Iterable[TopicPartition], target: PartitionState,
                    strategy: Strategy | None = None
                    ) -> dict[TopicPartition, ElectionResult | Exception]:
        """Make the state changes, adding their requests to the open batch without sending it
        (for a caller that sends one batch for several steps of one event)."""
        return await self._do_handle(list(partitions), target, strategy)

    def _valid(self, partitions: list[TopicPartition], target: PartitionState) -> list[TopicPartition]:
        valid = []
        for tp in partitions:
            current = self.ctx.partition_state(tp)
            try:
                current.transition_to(target)
                valid.append(tp)
            except IllegalStateTransition as exc:
                log.error("controller: invalid partition state change for %s: %s", tp, exc)
        return valid

    async def _do_handle(self, partitions, target, strategy):
        valid = self._valid(partitions, target)
        if target is PartitionState.ONLINE:
            new = [tp for tp in valid if self.ctx.partition_state(tp) is PartitionState.NEW]
            elect = [tp for tp in valid if self.ctx.partition_state(tp) in
                     (PartitionState.OFFLINE, PartitionState.ONLINE)]
            for tp in await self._initialize_leader_and_isr(new):
                self._put(tp, PartitionState.ONLINE)
            if not elect:
                return {}
            results = await self._elect_leaders(elect, strategy or Strategy.OFFLINE)
            for tp, r in results.items():
                if not isinstance(r, Exception):
                    self._put(tp, PartitionState.ONLINE)
            return results
        for tp in valid:
            self._put(tp, target)
        return {}

    def _put(self, tp: TopicPartition, target: PartitionState) -> None:
        self.ctx.partition_states[tp] = self.ctx.partition_state(tp).transition_to(target)

    # ------------------------------------------------------------ New -> Online

    async def _initialize_leader_and_isr(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        if not partitions:
            return []
        live = self.ctx.live_broker_ids()
        states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in partitions:
            r = election.initial_leader_and_isr(self.ctx.replicas(tp), live)
            if r.leader is None:
                log.error("controller: cannot bring %s online: no assigned replica is alive", tp)
                continue
            states[tp] = LeaderIsrAndControllerEpoch(r.leader, 0, r.isr, self.ctx.epoch, 0)
        if not states:
            return []
        results = await self.zk.create_partition_states(states)
        done = []
        for tp, st in states.items():
            err = results.get(tp, StateChangeFailedError("no result"))
            if err is not None:
                log.error("controller: creating the state of %s failed: %r", tp, err)
                continue
            self.ctx.leadership[tp] = st
            self.batch.add_leader_and_isr(st.isr, tp, st, self.ctx.replicas(tp), is_new=True)
            done.append(tp)
        return done

    # ------------------------------------------------------------ elections

    async def _elect_leaders(self, partitions: list[TopicPartition], strategy: Strategy
                             ) -> dict[TopicPartition, ElectionResult | Exception]:
        finished: dict[TopicPartition, ElectionResult | Exception] = {}
        remaining = partitions
        started = time.monotonic()
        cached = True   # the first attempt decides on the states we know (its writes are conditional:
        while remaining:  # a stale state fails on its zk_version, and is read and retried)
            done, remaining = await self._do_elect(remaining, strategy, cached)
            if cached:    # a failure decided on a known state is decided again on a read one
                retry = [tp for tp, r in done.items() if isinstance(r, Exception)]
                for tp in retry:
                    del done[tp]
                remaining = list(remaining) + retry
            cached = False
            failures = 0
            for tp, r in done.items():
                if isinstance(r, Exception):
                    failures += 1   # the first few at ERROR, not 10,000 lines when no replica can lead
                    (log.error if failures <= LOGGED_FAILURES else log.debug)(
                        "controller: leader election for %s failed: %s", tp, r)
                else:
                    log.debug("controller: %s elected leader %d of %s, isr %s", strategy.value, r.leader, tp, r.isr)
                    if r.unclean:
                        self.stats.unclean_elections += 1
            if failures > LOGGED_FAILURES:
                log.error("controller: leader election failed for %d more partitions (each at DEBUG)",
                          failures - LOGGED_FAILURES)
            finished.update(done)
        elapsed_ms = (time.monotonic() - started) * 1000.0
        self.stats.election_time.update(elapsed_ms)
        failed = sum(isinstance(r, Exception) for r in finished.values())
        log.info("controller: %s leader election of %d partitions: %d elected, %d failed (%.0f ms)",
                 strategy.value, len(partitions), len(finished) - failed, failed, elapsed_ms)
        return finished

    async def _unclean_allowed(self, topic: str, strategy: Strategy) -> bool:
        if strategy is Strategy.OFFLINE_ALLOW_UNCLEAN:
            return True
        cfg = await self.zk.get_topic_config(topic)
        v = cfg.get("unclean.leader.election.enable")
        return self.unclean_default if v is None else _truthy(v)

    async def _do_elect(self, partitions, strategy, cached: bool = False):
        failed: dict[TopicPartition, Exception] = {}
        current = await (known_or_read_states(self.ctx, self.zk, partitions) if cached
                         else self.zk.get_partition_states(partitions))
        valid: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in partitions:
            st = current.get(tp)
            if st is None:
                failed[tp] = StateChangeFailedError(f"state znode of {tp} not found")
            elif st.controller_epoch > self.ctx.epoch:
                failed[tp] = StateChangeFailedError(
                    f"state of {tp} was written by a newer controller (epoch {st.controller_epoch})")
            else:
                valid[tp] = st
        updates: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        recipients: dict[TopicPartition, list[int]] = {}
        elected: dict[TopicPartition, ElectionResult] = {}
        for tp, st in valid.items():
            assignment = self.ctx.replicas(tp)
            live = self.ctx.online_replicas(tp)   # replicas on an offline log dir cannot lead
            live_or_sd = self.ctx.online_replicas(tp, include_shutting_down=True)
            if strategy in (Strategy.OFFLINE, Strategy.OFFLINE_ALLOW_UNCLEAN):
                unclean = False
                if not [b for b in st.isr if b in live]:
                    unclean = await self._unclean_allowed(tp[0], strategy)
                r = election.offline_partition_leader_election(assignment, st.isr, live, unclean)
                rcpt = [b for b in assignment if b in live]
            elif strategy is Strategy.REASSIGN:
                r = election.reassign_partition_leader_election(assignment, st.isr, live)
                rcpt = [b for b in assignment if b in live]
            elif strategy is Strategy.PREFERRED:
                r = election.preferred_replica_partition_leader_election(assignment, st.isr, live)
                rcpt = [b for b in assignment if b in live]
            else:
                r = election.controlled_shutdown_partition_leader_election(
                    assignment, st.isr, live_or_sd, self.ctx.shutting_down)
                rcpt = [b for b in assignment if b in live_or_sd]
            if r.leader is None:
                failed[tp] = StateChangeFailedError(
                    f"failed to elect a leader for {tp} ({strategy.value}); isr {st.isr}, live {sorted(live)}")
                continue
            updates[tp] = LeaderIsrAndControllerEpoch(r.leader, st.leader_epoch + 1, r.isr,
                                                      self.ctx.epoch, st.zk_version)
            recipients[tp] = rcpt
            elected[tp] = r
        if not updates:
            return failed, []
        res = await self.zk.update_partition_states(updates)
        done: dict[TopicPartition, ElectionResult | Exception] = dict(failed)
        for tp, st in res.succeeded.items():
            st.controller_epoch = self.ctx.epoch
            self.ctx.leadership[tp] = st
            self.batch.add_leader_and_isr(recipients[tp], tp, st, self.ctx.replicas(tp), is_new=False)
            done[tp] = elected[tp]
        done.update(res.failed)
        return done, list(res.bad_version)
