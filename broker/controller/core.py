"""ControllerCore: what the active controller does on each event (Kafka 2.8 KafkaController).

Invariant: sans-IO apart from the two boundaries it is given — a
``ControllerZkBackend`` (async, epoch-fenced) and a ``Channels`` sink for
requests and broker connections — so every decision (failover, broker
startup/failure/bounce, new topics and partitions, deletion, partition reassignment
(``reassignment``), ISR change notifications, log dir failures (``log_dir_failure``), controlled shutdown, preferred
elections and the auto leader rebalance) is testable with in-memory fakes. Handlers
run one at a time (the shell's event queue guarantees it).
"""
from __future__ import annotations

import logging
import time
from typing import Awaitable, Callable, Iterable, Protocol

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.znodes import BrokerInfo, new_topic_id

from .backend import ControllerMovedError, ControllerZkBackend
from .context import ControllerContext, PartitionReplica, TopicPartition
from . import rebalance
from .election import ElectionResult
from .log_dir_failure import LogDirFailureEvents
from .partition_state_machine import PartitionStateMachine, Strategy
from .reassignment import PartitionReassignments
from .replica_state_machine import ReplicaStateMachine
from .request_batch import ControllerRequestBatch, OutRequest
from .states import PartitionState, ReplicaState
from .topic_deletion import TopicDeletionManager

log = logging.getLogger(__name__)


class Channels(Protocol):
    def add_broker(self, info: BrokerInfo) -> None: ...
    def remove_broker(self, broker_id: int) -> None: ...
    def send(self, requests: list[OutRequest]) -> None: ...


class ControllerCore:
    def __init__(self, controller_id: int, zk: ControllerZkBackend, channels: Channels,
                 ctx: ControllerContext | None = None, inter_broker_listener: str = "PLAINTEXT",
                 unclean_default: bool = False, delete_topic_enable: bool = True,
                 feature_versioning: bool = True):
        self.controller_id = controller_id
        self.zk = zk
        self.feature_versioning = feature_versioning   # IBP >= 2.7: /feature enabled (KIP-584)
        self.channels = channels
        self.ctx = ctx or ControllerContext()
        self.batch = ControllerRequestBatch(self.ctx, controller_id, inter_broker_listener)
        send = channels.send
        self.psm = PartitionStateMachine(self.ctx, zk, self.batch, send, unclean_default)
        self.rsm = ReplicaStateMachine(self.ctx, zk, self.batch, send)
        self.deletion = TopicDeletionManager(self.ctx, zk, self.batch, send, self.psm, self.rsm,
                                             delete_topic_enable)
        self.reassignments = PartitionReassignments(self.ctx, zk, self.batch, send, self.psm, self.rsm,
                                                    self.deletion)
        self.log_dirs = LogDirFailureEvents(self.ctx, zk, self.rsm,  # type: ignore[arg-type]
                                            self.on_replicas_become_offline)

    def _send_update_metadata(self, brokers: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        self.batch.new_batch()
        self.batch.add_update_metadata(brokers, partitions)
        self.channels.send(self.batch.build())

    # ------------------------------------------------------------ failover

    async def on_controller_failover(self, epoch: int, epoch_zk_version: int) -> None:
        ctx = self.ctx
        ctx.reset()
        ctx.epoch, ctx.epoch_zk_version = epoch, epoch_zk_version
        started = time.monotonic()
        if hasattr(self.zk, "setup_feature_versioning"):   # Kafka's maybeSetupFeatureVersioning
            await self.zk.setup_feature_versioning(self.feature_versioning)
        names = await self.zk.get_isr_change_notifications()
        if names:
            await self.zk.delete_isr_change_notifications(names)
        if hasattr(self.zk, "get_log_dir_event_notifications"):   # (core test fakes may omit it)
            await self.log_dirs.on_failover()
        ctx.live_brokers = await self.zk.get_all_brokers()
        for info in ctx.live_brokers.values():
            self.channels.add_broker(info)
        ctx.all_topics = await self.zk.get_all_topics()
        for tp, assignment in (await self.zk.get_replica_assignment(sorted(ctx.all_topics))).items():
            ctx.set_full_assignment(tp, assignment)
        await self._load_topic_ids(ctx.all_topics)
        read_at = time.monotonic()
        ctx.leadership = await self.zk.get_partition_states(ctx.all_partitions())
        states_at = time.monotonic()
        # Pending deletions (flags of topics that do not exist are just removed).
        queued = set(await self.zk.get_topic_deletions())
        for t in sorted(queued - ctx.all_topics):
            await self.zk.delete_topic(t)
        queued &= ctx.all_topics
        ineligible = {t for t in queued
                      if any(not ctx.is_replica_online(b, tp) for tp in ctx.partitions_for_topic(t)
                             for b in ctx.replicas(tp))}
        self.deletion.init(queued, ineligible)
        self._send_update_metadata(ctx.live_or_shutting_down_broker_ids(), [])
        machines_at = time.monotonic()
        await self._start_state_machines()
        if hasattr(self.zk, "get_partition_reassignment"):   # (core test fakes may omit it)
            await self.reassignments.on_failover()
        await self.deletion.resume_deletions()
        log.info("controller %d: failover done (epoch %d, %d brokers, %d topics, %d partitions) in %.2f s: "
                 "cluster read %.2f s, partition states read %.2f s, state machines started %.2f s",
                 self.controller_id, epoch, len(ctx.live_brokers), len(ctx.all_topics), len(ctx.leadership),
                 time.monotonic() - started, read_at - started, states_at - read_at, time.monotonic() - machines_at)

    async def _start_state_machines(self) -> None:
        """Kafka's replica then partition state machine startup, without the leader -1 round: the
        live replicas are told the current states and the partitions without a live leader are
        elected from their live ISR (one batch), then the offline replicas leave the ISRs they are
        still in (a second batch). Kafka removes them first (leader -1 for the partitions they
        led, epoch n+1) and elects afterwards (epoch n+2): two LeaderAndIsr rounds."""
        ctx = self.ctx
        self.rsm.initialize_replica_states()
        self.psm.initialize_partition_states()
        online = [pr for pr, s in ctx.replica_states.items() if s is ReplicaState.ONLINE]
        offline = [pr for pr, s in ctx.replica_states.items() if s is not ReplicaState.ONLINE]
        await self._elect_then_remove(offline, lambda: self.rsm.apply(online, ReplicaState.ONLINE))

    async def _batched(self, *steps: Callable[[], Awaitable[object]]) -> None:
        """Run the state machines' ``steps`` into one batch of requests (one request per broker
        and kind, each partition once in it), sent once."""
        self.batch.new_batch()
        try:
            for step in steps:
                await step()
            self.channels.send(self.batch.build())
        except ControllerMovedError:
            self.batch.clear()
            raise

    async def _elect_then_remove(self, offline_replicas: list[PartitionReplica],
                                 *first: Callable[[], Awaitable[object]]) -> None:
        """One batch: the ``first`` steps, then leaders for the New/Offline partitions from their
        live ISR (Kafka's triggerOnlinePartitionStateChange). Then a second batch, so the new
        leaders are not held back by it: ``offline_replicas`` out of the ISRs still holding them
        (the partitions just elected hold none of them any more: no ZooKeeper work for those)."""
        elected: frozenset[TopicPartition] = frozenset()

        async def elect() -> None:
            nonlocal elected
            parts = [tp for tp in self.ctx.partitions_in_state(PartitionState.NEW, PartitionState.OFFLINE)
                     if not self.ctx.is_topic_queued_for_deletion(tp[0])]
            results = await self.psm.apply(parts, PartitionState.ONLINE, Strategy.OFFLINE) if parts else {}
            elected = frozenset(tp for tp, r in results.items() if not isinstance(r, Exception))
        await self._batched(*first, elect)
        if offline_replicas:
            await self._batched(lambda: self.rsm.apply(offline_replicas, ReplicaState.OFFLINE, elected))

    # ------------------------------------------------------------ brokers

    async def on_broker_change(self) -> None:
        ctx = self.ctx
        current = await self.zk.get_all_brokers()
        known = ctx.live_or_shutting_down_broker_ids()
        new = sorted(set(current) - known)
        dead = sorted(known - set(current))
        bounced = sorted(b for b in set(current) & known if current[b].epoch > ctx.broker_epoch(b))
        log.info("controller %d: broker change: new %s dead %s bounced %s", self.controller_id,
                 new, dead, bounced)
        self.log_dirs.forget_brokers(new + dead + bounced)
        for b in new:
            ctx.live_brokers[b] = current[b]
            self.channels.add_broker(current[b])
        if new:
            await self.on_broker_startup(new)
        if bounced:
            for b in bounced:
                ctx.live_brokers.pop(b, None)
                self.channels.remove_broker(b)
            await self.on_broker_failure(bounced)
            for b in bounced:
                ctx.live_brokers[b] = current[b]
                self.channels.add_broker(current[b])
            await self.on_broker_startup(bounced)
        if dead:
            for b in dead:
                ctx.live_brokers.pop(b, None)
                self.channels.remove_broker(b)
            await self.on_broker_failure(dead)

    async def on_broker_startup(self, new_brokers: list[int]) -> None:
        ctx = self.ctx
        ctx.shutting_down -= set(new_brokers)
        existing = ctx.live_or_shutting_down_broker_ids() - set(new_brokers)
        self._send_update_metadata(existing, [])
        self._send_update_metadata(new_brokers, list(ctx.leadership))
        replicas = ctx.replicas_on_brokers(new_brokers)
        await self.rsm.handle_state_changes(replicas, ReplicaState.ONLINE)
        await self.psm.trigger_online_partition_state_change()
        await self.reassignments.on_broker_startup(new_brokers)
        topics = {pr[0][0] for pr in replicas if ctx.is_topic_queued_for_deletion(pr[0][0])}
        if topics:
            await self.deletion.resume_deletion_for_topics(topics)

    async def on_broker_failure(self, dead_brokers: list[int]) -> None:
        self.ctx.shutting_down -= set(dead_brokers)
        await self.on_replicas_become_offline(self.ctx.replicas_on_brokers(dead_brokers))

    async def on_replicas_become_offline(self, replicas: list[PartitionReplica]) -> None:
        ctx = self.ctx
        for_deletion = [pr for pr in replicas if ctx.is_topic_queued_for_deletion(pr[0][0])]
        others = [pr for pr in replicas if not ctx.is_topic_queued_for_deletion(pr[0][0])]
        offline_leader = [tp for tp, st in sorted(ctx.leadership.items())
                          if not ctx.is_replica_online(st.leader, tp, include_shutting_down=True)
                          and not ctx.is_topic_queued_for_deletion(tp[0])
                          and ctx.partition_state(tp) is not PartitionState.OFFLINE]
        # Kafka's onReplicasBecomeOffline: the partitions they led go Offline and straight to
        # Online (elected from the live ISR; one batch), then the replicas leave the other ISRs.
        await self._elect_then_remove(others, lambda: self.psm.apply(offline_leader, PartitionState.OFFLINE))
        if for_deletion:
            await self.deletion.fail_replica_deletion(for_deletion)
        if not offline_leader:
            self._send_update_metadata(ctx.live_or_shutting_down_broker_ids(), [])

    # ------------------------------------------------------------ topics

    async def on_topic_change(self) -> None:
        ctx = self.ctx
        topics = await self.zk.get_all_topics()
        new = topics - ctx.all_topics
        deleted = ctx.all_topics - topics
        ctx.all_topics = set(topics)
        added = await self.zk.get_replica_assignment(sorted(new)) if new else {}
        for t in deleted:
            ctx.remove_topic(t)
        for tp, assignment in added.items():
            ctx.set_full_assignment(tp, assignment)
        await self._load_topic_ids(new)
        if added:
            log.info("controller %d: new topics %s", self.controller_id, sorted(new))
            await self.on_new_partition_creation(sorted(added))

    async def _load_topic_ids(self, topics: Iterable[str]) -> None:
        """Read the topics' ids; give one to each topic created without (Kafka 2.8's setTopicIds)."""
        if not topics or not hasattr(self.zk, "get_topic_ids"):   # (core test fakes may omit it)
            return
        for topic, topic_id in sorted((await self.zk.get_topic_ids(sorted(topics))).items()):
            if topic_id is None:
                topic_id = await self.zk.set_topic_id(topic, new_topic_id())
                log.info("controller %d: topic %s had no id; it is %s now", self.controller_id, topic, topic_id)
            if topic_id is not None:
                self.ctx.topic_ids[topic] = topic_id

    async def on_partition_modification(self, topic: str) -> None:
        ctx = self.ctx
        if topic not in ctx.all_topics:
            return
        assignment = await self.zk.get_replica_assignment([topic])
        to_add = {tp: a for tp, a in assignment.items() if not ctx.replicas(tp)}
        if not to_add:
            return
        if ctx.is_topic_queued_for_deletion(topic):
            log.warning("controller: skipping partition additions to %s: it is being deleted", topic)
            return
        for tp, a in to_add.items():
            ctx.set_full_assignment(tp, a)
        await self.on_new_partition_creation(sorted(to_add))

    async def on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        replicas = self.ctx.replicas_for_partitions(partitions)
        await self.psm.handle_state_changes(partitions, PartitionState.NEW)
        await self.rsm.handle_state_changes(replicas, ReplicaState.NEW)
        await self.psm.handle_state_changes(partitions, PartitionState.ONLINE, Strategy.OFFLINE)
        await self.rsm.handle_state_changes(replicas, ReplicaState.ONLINE)

    async def on_topic_deletion(self) -> None:
        ctx = self.ctx
        queued = set(await self.zk.get_topic_deletions())
        for t in sorted(queued - ctx.all_topics):
            await self.zk.delete_topic(t)
        queued &= ctx.all_topics
        if not self.deletion.enabled:
            if queued:  # Kafka removes the flags when deletion is disabled
                await self.zk.delete_topic_deletion_flags(sorted(queued))
            return
        if queued:
            log.info("controller %d: topics queued for deletion %s", self.controller_id, sorted(queued))
            await self.deletion.enqueue_topics_for_deletion(queued)

    async def on_log_dir_event_notification(self) -> None:
        await self.log_dirs.on_notification()

    async def on_leader_and_isr_response(self, broker_id: int, errors: dict[TopicPartition, int]) -> None:
        await self.log_dirs.on_leader_and_isr_response(broker_id, errors)

    async def on_stop_replica_response(self, broker_id: int, deleted: list[TopicPartition],
                                       errors: dict[TopicPartition, int] | None) -> None:
        """A StopReplica(delete=True) answer: ``errors`` None means the whole request failed."""
        replicas = [(tp, broker_id) for tp in deleted]
        if errors is None:
            failed = replicas
        else:
            failed = [(tp, broker_id) for tp in deleted if errors.get(tp, 0) != 0]
        ok = [pr for pr in replicas if pr not in failed]
        if failed:
            await self.deletion.fail_replica_deletion(failed)
        if ok:
            await self.deletion.complete_replica_deletion(ok)

    # ------------------------------------------------------------ ISR changes

    async def on_isr_change_notification(self) -> None:
        names = await self.zk.get_isr_change_notifications()
        if not names:
            return
        try:
            partitions = sorted(set(await self.zk.get_partitions_from_isr_change_notifications(names)))
            partitions = [tp for tp in partitions if tp[0] in self.ctx.all_topics]
            if partitions:
                states = await self.zk.get_partition_states(partitions)
                self.ctx.leadership.update(states)
                self._send_update_metadata(self.ctx.live_or_shutting_down_broker_ids(), list(states))
        finally:
            await self.zk.delete_isr_change_notifications(names)

    # ------------------------------------------------------------ controlled shutdown

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        ctx = self.ctx
        if broker_id not in ctx.live_or_shutting_down_broker_ids():
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not alive")
        if broker_epoch != -1 and broker_epoch < ctx.broker_epoch(broker_id):
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH,
                             f"broker epoch {broker_epoch} < {ctx.broker_epoch(broker_id)}")
        ctx.shutting_down.add(broker_id)

        def acts_on(tp: TopicPartition) -> bool:
            return (len(ctx.replicas(tp)) > 1 and tp in ctx.leadership
                    and not ctx.is_topic_queued_for_deletion(tp[0]))
        parts = [tp for tp in ctx.partitions_on_broker(broker_id) if acts_on(tp)]
        led = [tp for tp in parts if ctx.leadership[tp].leader == broker_id]
        followed = [tp for tp in parts if ctx.leadership[tp].leader != broker_id]
        async def stop_followers() -> None:
            for tp in followed:
                self.batch.add_stop_replica([broker_id], tp, delete=False)
        # Kafka's steps: the elections (and the followers' StopReplica) go out at once, the
        # followers' ISR removals (their ZooKeeper writes) after; one batch per step.
        await self._batched(
            lambda: self.psm.apply(led, PartitionState.ONLINE, Strategy.CONTROLLED_SHUTDOWN), stop_followers)
        await self.rsm.handle_state_changes([(tp, broker_id) for tp in followed], ReplicaState.OFFLINE)
        return sorted(tp for tp, st in ctx.leadership.items() if st.leader == broker_id and acts_on(tp))

    # ------------------------------------------------------------ preferred election

    async def elect_preferred_leaders(self, partitions: Iterable[TopicPartition]
                                      ) -> dict[TopicPartition, ElectionResult | Exception]:
        """Move leadership back to the first replica where it is live and in the ISR.

        Unknown partitions, topics being deleted and partitions already led by their
        preferred replica are skipped (Kafka's processReplicaLeaderElection); the result
        holds an ElectionResult or the failure per partition actually elected.
        """
        ctx = self.ctx
        known = [tp for tp in dict.fromkeys(partitions) if tp in ctx.leadership and ctx.replicas(tp)]
        parts = [tp for tp in known if not ctx.is_topic_queued_for_deletion(tp[0])
                 and ctx.leadership[tp].leader != ctx.replicas(tp)[0]]
        if parts:
            log.info("controller %d: preferred replica election for %s", self.controller_id, parts)
        return await self.psm.handle_state_changes(parts, PartitionState.ONLINE, Strategy.PREFERRED)

    async def elect_leaders(self, partitions: Iterable[TopicPartition] | None, unclean: bool
                            ) -> dict[TopicPartition, tuple[ErrorCode, str | None, int]]:
        """An admin's ElectLeaders (Kafka's processReplicaLeaderElection, AdminClientTriggered):
        per partition (NONE, None, the new leader) for an election made, or the error and its
        message: ELECTION_NOT_NEEDED when the preferred replica leads already (preferred) or the
        leader is live (unclean), PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE
        when no leader could be elected, INVALID_TOPIC_EXCEPTION for a topic being deleted,
        UNKNOWN_TOPIC_OR_PARTITION. ``partitions`` None: every partition."""
        ctx = self.ctx
        live = ctx.live_broker_ids()
        out: dict[TopicPartition, tuple[ErrorCode, str | None, int]] = {}
        electable = []
        for tp in dict.fromkeys(ctx.all_partitions() if partitions is None else partitions):
            if tp not in ctx.leadership or not ctx.replicas(tp):
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.", -1)
            elif ctx.is_topic_queued_for_deletion(tp[0]):
                out[tp] = (ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted", -1)
            else:
                leader = ctx.leadership[tp].leader
                needed = (leader < 0 or leader not in live) if unclean else leader != ctx.replicas(tp)[0]
                if needed:
                    electable.append(tp)
                else:
                    out[tp] = (ErrorCode.ELECTION_NOT_NEEDED, None, -1)
        if electable:
            log.info("controller %d: %s leader election for %s", self.controller_id,
                     "unclean" if unclean else "preferred", electable)
            results = await self.psm.handle_state_changes(
                electable, PartitionState.ONLINE, Strategy.OFFLINE_ALLOW_UNCLEAN if unclean else Strategy.PREFERRED)
            for tp in electable:
                r = results.get(tp)
                if isinstance(r, ElectionResult) and r.leader is not None:
                    out[tp] = (ErrorCode.NONE, None, r.leader)
                else:
                    code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE if unclean else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                    out[tp] = (code, str(r) if r is not None else f"no leader elected for {tp[0]}-{tp[1]}", -1)
        return out

    async def on_preferred_replica_election_znode(self) -> None:
        """/admin/preferred_replica_election appeared (or was pending at failover): elect, delete it."""
        partitions = await self.zk.get_preferred_replica_election()
        if partitions is None:
            return
        try:
            unknown = [tp for tp in partitions if not self.ctx.replicas(tp)]
            if unknown:
                log.info("controller %d: skipping preferred election of unknown partitions %s",
                         self.controller_id, unknown)
            await self.elect_preferred_leaders(partitions)
        finally:
            await self.zk.delete_preferred_replica_election()

    async def check_and_trigger_auto_leader_rebalance(self, imbalance_percentage: int
                                                      ) -> dict[TopicPartition, ElectionResult | Exception]:
        """One auto leader rebalance check: preferred elections for over-imbalanced brokers."""
        ctx = self.ctx
        assignments = {tp: ctx.replicas(tp) for tp in ctx.all_partitions()}
        leaders = {tp: st.leader for tp, st in ctx.leadership.items()}
        isrs = {tp: st.isr for tp, st in ctx.leadership.items()}
        for b, entry in sorted(rebalance.imbalance_by_broker(assignments, leaders, ctx.topics_to_delete).items()):
            log.debug("controller %d: broker %d leader imbalance ratio %.2f", self.controller_id, b,
                      entry.ratio)
        chosen = rebalance.partitions_to_rebalance(assignments, leaders, isrs, ctx.live_broker_ids(),
                                                   imbalance_percentage, ctx.topics_to_delete)
        if not chosen:
            return {}
        log.info("controller %d: auto leader rebalance moves %s back to their preferred replicas",
                 self.controller_id, chosen)
        return await self.elect_preferred_leaders(chosen)
