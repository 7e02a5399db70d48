"""KafkaController: the Twisted shell around ControllerCore — election, watches, event queue.

Invariant: every broker runs one; events (watch fires, session changes,
controlled shutdown, StopReplica answers) run strictly one at a time on the
reactor in arrival order; ZooKeeper is only touched through ``deferToThread``.
The controller is active exactly between a successful election multi and its
resignation (session expiry, /controller naming someone else, a failed epoch
fence, shutdown); while inactive, only election-related events do anything.
ZooKeeper calls that fail with connection loss are retried once reconnected
(``KafkaZkClient.retry``); a session expiry resigns at once, and the broker
re-elects only after it has re-registered /brokers/ids/<id> on the new session.
While active, the auto leader rebalance check (``auto.leader.rebalance.enable``)
runs as an event 5 s after failover, then every
``leader.imbalance.check.interval.seconds``.
"""
from __future__ import annotations

import functools
import logging
from collections import deque
from typing import Any, Awaitable, Callable

from twisted.internet import defer, threads
from twisted.internet.interfaces import IDelayedCall

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.session import ControllerMovedError, KafkaZkClient

from ..features import feature_versioning_enabled
from ..network.broker_client import BrokerClient
from .alter_isr import Asked, alter_isr
from .backend import ThreadedZkBackend
from .channel_manager import ControllerChannelManager
from .context import ControllerContext
from .core import ControllerCore
from .log_dir_failure import partition_errors
from .request_batch import LEADER_AND_ISR, STOP_REPLICA, OutRequest

log = logging.getLogger(__name__)

INITIAL_REBALANCE_DELAY_S = 5.0     # Kafka's scheduleAutoLeaderRebalanceTask(delay = 5 s) at failover


def _cfg(config: Any, key: str, default: Any) -> Any:
    try:
        v = config[key]
    except (KeyError, TypeError):
        return default
    return default if v is None else v


class KafkaController:
    def __init__(self, config: Any, zk: KafkaZkClient, broker_id: int, reactor, security: Any = None):
        self.config = config
        self.zk = zk
        self.broker_id = broker_id
        self.reactor = reactor
        self.listener = (getattr(config, "inter_broker_listener_name", None)
                         or _cfg(config, "inter.broker.listener.name", None) or "PLAINTEXT")
        self.broker_epoch = -1
        self.active_controller_id: int | None = None
        self._active = False
        self._stopped = False
        self._started = False
        self._queue: deque[tuple[str, Callable[[], Awaitable[Any]], bool]] = deque()
        self._runner: defer.Deferred | None = None
        self._running = False
        self._partition_watches: dict[str, Callable[[], None]] = {}
        self._isr_watches: dict[tuple[str, int], Callable[[], None]] = {}
        self._rebalance_call: IDelayedCall | None = None
        self._registered_session: int | None = None   # the session /brokers/ids/<id> belongs to
        self.auto_rebalance = bool(_cfg(config, "auto.leader.rebalance.enable", True))
        self.imbalance_check_interval_s = float(_cfg(config, "leader.imbalance.check.interval.seconds", 300))
        self.imbalance_percentage = int(_cfg(config, "leader.imbalance.per.broker.percentage", 10))
        self.ctx = ControllerContext()
        self.channels = ControllerChannelManager(reactor, broker_id, self.listener, self._on_response,
                                                 client_factory=functools.partial(BrokerClient, security=security))
        self.backend = ThreadedZkBackend(zk, self.ctx, self, reactor)
        self.core = ControllerCore(
            broker_id, self.backend, self.channels, self.ctx, self.listener,
            unclean_default=bool(_cfg(config, "unclean.leader.election.enable", False)),
            delete_topic_enable=bool(_cfg(config, "delete.topic.enable", True)),
            feature_versioning=feature_versioning_enabled(str(_cfg(config, "inter.broker.protocol.version", "2.8-IV1"))))

    def _in_thread(self, fn, *args):
        """Run a blocking KafkaZkClient call in this reactor's thread pool (retried on connection loss)."""
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), self.zk.retry, fn, *args)

    # ------------------------------------------------------------ public

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def stats(self) -> Any:
        """Kafka's ControllerStats of this broker's terms as controller (``broker/metrics.py``)."""
        return self.core.psm.stats

    @property
    def epoch(self) -> int:
        return self.ctx.epoch

    async def startup(self, broker_epoch: int) -> None:
        """Watch /controller and try to become controller (in the background)."""
        self.broker_epoch = broker_epoch
        self._registered_session = self.zk.session_id   # the broker registered just before
        if not self._started:
            self._started = True
            self.zk.on_session_expired(lambda: self.reactor.callFromThread(self._on_session_expired))
            self.zk.on_new_session(self._on_new_session)
        self._enqueue("Startup", self._elect)

    async def shutdown(self) -> None:
        """Resign (deleting /controller only if it is ours), stop events, close channels."""
        self._stopped = True
        self._queue.clear()
        if self._runner is not None:
            await self._runner
        was_active = self._active
        self._resign()
        if was_active:
            try:
                await self._in_thread(self.zk.delete_controller_if_ours, self.broker_id)
            except Exception as exc:
                log.warning("controller %d: could not delete /controller: %s", self.broker_id, exc)

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return self._active and self.ctx.is_topic_queued_for_deletion(topic)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """Move leadership off ``broker_id``; the partitions it still leads (empty when done)."""
        return await self._requested("ControlledShutdown", lambda: self.core.controlled_shutdown(broker_id, broker_epoch))

    async def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool
                            ) -> dict[tuple[str, int], tuple[ErrorCode, str | None, int]]:
        """ElectLeaders from an admin (``ControllerCore.elect_leaders``), on the event queue."""
        return await self._requested("ReplicaLeaderElection", lambda: self.core.elect_leaders(partitions, unclean))

    async def alter_isr(self, broker_id: int, broker_epoch: int, asked: dict[tuple[str, int], Asked]
                        ) -> dict[tuple[str, int], Any]:
        """AlterIsr from a partition leader (``broker/controller/alter_isr.py``), on the event queue."""
        return await self._requested("AlterIsrReceived", lambda: alter_isr(self.core, broker_id, broker_epoch, asked))

    async def alter_partition_reassignments(self, requested: dict[tuple[str, int], list[int] | None]
                                            ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments from an admin (``PartitionReassignments.alter``)."""
        return await self._requested("ApiPartitionReassignment",
                                     lambda: self.core.reassignments.alter(requested))

    async def list_partition_reassignments(self, partitions: list[tuple[str, int]] | None) -> dict:
        """ListPartitionReassignments: {tp: ReplicaAssignment} of the ongoing reassignments."""
        async def run() -> dict:
            return self.core.reassignments.ongoing(partitions)
        return await self._requested("ListPartitionReassignments", run)

    def topic_unclean_leader_election_enabled(self, topic: str) -> None:
        """unclean.leader.election.enable became true for ``topic``: elect leaders for its offline
        partitions now (Kafka's TopicUncleanLeaderElectionEnable event)."""
        self._enqueue("TopicUncleanLeaderElectionEnable",
                      lambda: self.core.psm.trigger_online_partition_state_change(topic), True)

    def unclean_leader_election_default_changed(self, enabled: bool) -> None:
        """The broker default of unclean.leader.election.enable changed (a dynamic config): topics
        without their own setting follow it; turned on, offline partitions get leaders now."""
        def run() -> Awaitable[Any]:
            self.core.psm.unclean_default = enabled
            return self.core.psm.trigger_online_partition_state_change()
        self._enqueue("UncleanLeaderElectionEnable", run, True)

    async def _requested(self, name: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """Run a request's controller work on the event queue (NOT_CONTROLLER unless active); its result."""
        result: defer.Deferred = defer.Deferred()

        async def run() -> None:
            try:
                if not self._active:
                    raise KafkaError(ErrorCode.NOT_CONTROLLER, f"broker {self.broker_id} is not the controller")
                result.callback(await fn())
            except BaseException as exc:
                result.errback(exc)
                if isinstance(exc, ControllerMovedError):
                    raise
        if self._stopped:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "controller is shutting down")
        self._enqueue(name, run)
        return await result

    # ------------------------------------------------------------ watches (kazoo threads)

    def _from_thread(self, name: str, fn, active_only: bool = False) -> None:
        self.reactor.callFromThread(self._enqueue, name, fn, active_only)

    def controller_change(self) -> None:
        self._from_thread("ControllerChange", self._on_controller_change)

    def broker_change(self) -> None:
        self._from_thread("BrokerChange", self.core.on_broker_change, True)

    def topic_change(self) -> None:
        self._from_thread("TopicChange", self.core.on_topic_change, True)

    def topic_deletion(self) -> None:
        self._from_thread("TopicDeletion", self.core.on_topic_deletion, True)

    def isr_change(self) -> None:
        self._from_thread("IsrChangeNotification", self.core.on_isr_change_notification, True)

    def log_dir_event(self) -> None:
        self._from_thread("LogDirEventNotification", self.core.on_log_dir_event_notification, True)

    def preferred_replica_election(self) -> None:
        self._from_thread("PreferredReplicaElection", self.core.on_preferred_replica_election_znode, True)

    def partition_reassignment(self) -> None:
        self._from_thread("ZkPartitionReassignment", self.core.reassignments.on_zk_request, True)

    def reassignment_isr_change(self, tp: tuple[str, int]) -> Callable[[], None]:
        w = self._isr_watches.get(tp)
        if w is None:
            def w() -> None:
                self._from_thread("PartitionReassignmentIsrChange",
                                  lambda: self.core.reassignments.on_isr_change(tp), True)
            self._isr_watches[tp] = w
        return w

    def partition_modification(self, topic: str) -> Callable[[], None]:
        w = self._partition_watches.get(topic)
        if w is None:
            def w() -> None:
                self._from_thread("PartitionModifications",
                                  lambda: self.core.on_partition_modification(topic), True)
            self._partition_watches[topic] = w
        return w

    # ------------------------------------------------------------ event queue (reactor)

    def _enqueue(self, name: str, fn: Callable[[], Awaitable[Any]], active_only: bool = False) -> None:
        if self._stopped:
            return
        self._queue.append((name, fn, active_only))
        if not self._running:
            self._running = True
            d = defer.Deferred.fromCoroutine(self._run())
            if self._running:
                self._runner = d

    async def _run(self) -> None:
        try:
            while self._queue:
                name, fn, active_only = self._queue.popleft()
                if active_only and not self._active:
                    continue
                try:
                    await fn()
                except ControllerMovedError as exc:
                    log.warning("controller %d: %s during %s; resigning", self.broker_id, exc, name)
                    await self._maybe_resign()
                except Exception:
                    log.exception("controller %d: event %s failed", self.broker_id, name)
                    if name in ("Startup", "Reelect", "ControllerChange") and self._active:
                        await self._trigger_controller_move()
        finally:
            self._running = False
            self._runner = None

    # ------------------------------------------------------------ election

    async def _elect(self) -> None:
        if self._stopped:
            return
        if self.zk.session_id != self._registered_session:
            # A new session whose broker registration is not done yet (a late watch of the
            # old session can get here): the Reelect after re-registration elects.
            log.info("controller %d: not electing before the broker re-registered", self.broker_id)
            return
        # An event queued before a session expiry may run on the new session before the broker
        # re-registered (Kafka clears its event queue on expiry): only a registered broker elects.
        if not await self._in_thread(self.zk.broker_registered_by_this_session, self.broker_id):
            return
        cid = await self._in_thread(self.zk.get_controller_id, self.controller_change)
        self.active_controller_id = cid
        if cid is not None:
            if cid != self.broker_id and self._active:
                self._resign()
            elif cid == self.broker_id and not self._active and \
                    await self._in_thread(self.zk.controller_held_by_this_session):
                # Our session holds /controller but we never finished becoming controller
                # (e.g. a multi whose answer was lost): give it up and elect again. (A node of a
                # previous session of this broker id is left to expire, as Kafka does.)
                await self._in_thread(self.zk.delete_controller_if_ours, self.broker_id)
                self._enqueue("Reelect", self._elect)
            return
        try:
            epoch, version = await self._in_thread(
                self.zk.register_controller_and_increment_epoch, self.broker_id)
        except ControllerMovedError:
            self.active_controller_id = await self._in_thread(self.zk.get_controller_id,
                                                                    self.controller_change)
            log.info("controller %d: lost the election to %s", self.broker_id, self.active_controller_id)
            return
        self.active_controller_id = self.broker_id
        self._active = True
        log.info("controller %d: elected with epoch %d", self.broker_id, epoch)
        await self.core.on_controller_failover(epoch, version)
        # Kafka's failover step 6 (pending preferred elections) and 7 (auto rebalance).
        self._enqueue("PreferredReplicaElection", self.core.on_preferred_replica_election_znode, True)
        self._schedule_auto_rebalance(INITIAL_REBALANCE_DELAY_S)

    async def _on_controller_change(self) -> None:
        cid = await self._in_thread(self.zk.get_controller_id, self.controller_change)
        self.active_controller_id = cid
        if self._active and cid != self.broker_id:
            self._resign()
        if cid is None:
            await self._elect()

    async def _maybe_resign(self) -> None:
        cid = await self._in_thread(self.zk.get_controller_id, self.controller_change)
        self.active_controller_id = cid
        if cid != self.broker_id:
            self._resign()
        elif self._active:  # the fence failed yet /controller is ours: move it (Kafka's triggerControllerMove)
            await self._trigger_controller_move()

    async def _trigger_controller_move(self) -> None:
        self._resign()
        await self._in_thread(self.zk.delete_controller_if_ours, self.broker_id)
        self._enqueue("Reelect", self._elect)

    def _on_session_expired(self) -> None:
        """Reactor: the ZooKeeper session is gone; stop being controller at once (Kafka's Expire)."""
        self.active_controller_id = None
        self._resign()

    def _on_new_session(self) -> None:
        """Session-callback thread: once the broker re-registered on the new session, re-elect."""
        epoch = self.zk.wait_for_broker_registration(self.broker_id, lambda: self._stopped)
        if epoch is None:
            return
        log.info("controller %d: broker re-registered (epoch %d); re-electing", self.broker_id, epoch)

        session = self.zk.session_id

        def reelect() -> None:
            self.broker_epoch = epoch
            self._registered_session = session
            self._enqueue("Reelect", self._elect)
        self.reactor.callFromThread(reelect)

    # ------------------------------------------------------------ auto leader rebalance

    def _schedule_auto_rebalance(self, delay_s: float) -> None:
        if not self.auto_rebalance or not self._active or self._stopped:
            return
        if self._rebalance_call is not None and self._rebalance_call.active():
            self._rebalance_call.cancel()
        self._rebalance_call = self.reactor.callLater(
            delay_s, self._enqueue, "AutoPreferredReplicaLeaderElection", self._auto_rebalance, True)

    async def _auto_rebalance(self) -> None:
        try:
            await self.core.check_and_trigger_auto_leader_rebalance(self.imbalance_percentage)
        finally:
            self._schedule_auto_rebalance(self.imbalance_check_interval_s)

    def _resign(self) -> None:
        if not self._active:
            return
        log.info("controller %d: resigning (epoch %d)", self.broker_id, self.ctx.epoch)
        self._active = False
        if self._rebalance_call is not None and self._rebalance_call.active():
            self._rebalance_call.cancel()
        self._rebalance_call = None
        self.channels.shutdown()
        self.core.batch.clear()
        epoch = self.ctx.epoch
        self.ctx.reset()
        self.ctx.epoch = epoch

    # ------------------------------------------------------------ responses

    def _on_response(self, req: OutRequest, body: Any) -> None:
        code = getattr(body, "error_code", 0)
        if code:
            log.warning("controller %d: %s to broker %d answered %s", self.broker_id, req.api,
                        req.broker_id, ErrorCode(code).name if code in ErrorCode._value2member_map_ else code)
        if req.api == LEADER_AND_ISR and not code:
            codes = partition_errors(req.version, req.body, body)
            if ErrorCode.KAFKA_STORAGE_ERROR in codes.values() or self.ctx.replicas_on_offline_dirs.get(req.broker_id):
                self._enqueue("LeaderAndIsrResponseReceived",
                              lambda: self.core.on_leader_and_isr_response(req.broker_id, codes), True)
        if req.api == STOP_REPLICA and req.deleted_partitions:
            errors = None if code else {(e.topic_name, e.partition_index): e.error_code
                                        for e in (getattr(body, "partition_errors", None) or [])}
            deleted = list(req.deleted_partitions)
            self._enqueue("TopicDeletionStopReplicaResponse",
                          lambda: self.core.on_stop_replica_response(req.broker_id, deleted, errors), True)
