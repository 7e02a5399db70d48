"""KafkaServer: one broker process, started and stopped in Kafka's order.

Invariant: startup follows KafkaServer.startup (ZooKeeper session + persistent
paths → cluster id → broker id → LogManager load/recovery → bind listeners →
ReplicaManager (ISR tasks) + replica fetchers → register the ephemeral /brokers/ids/<id> → controller election →
group and transaction coordinators → periodic tasks and the log cleaner), and shutdown reverses it
(controlled shutdown, stop accepting, controller resignation, coordinators, log cleaner pass finished, purgatories
expired, HW checkpoint, LogManager.shutdown() writing the clean-shutdown marker, ZooKeeper session
closed = unregistered). An I/O error on a log dir goes through one
``LogDirFailureChannel`` to ``LogDirFailureHandler`` (its partitions stop being served, the
controller is told through ``/log_dir_event_notification``); when no log dir is left the
broker shuts down as above and exits with code 1 (Kafka halts). The group and transaction
coordinators follow ``__consumer_offsets`` / ``__transaction_state`` leadership through the
replica manager's hooks (fanned out to both) from the start; they answer only once started.
Every ZooKeeper call runs in a thread; the reactor only frames, dispatches and
appends. The process around it (``odradek broker start``) is ``broker/main.py``.
"""
from __future__ import annotations

import base64
import functools
import logging
import socket
import uuid
from typing import Any, Callable

from twisted.internet import defer, task, threads

from odradek.zk.znodes import BrokerInfo, ControllerEpochZNode, Endpoint

from .apis.context import BrokerContext
from .apis.controller_common import ControllerView
from .config.kafka_config import ConfigError, KafkaConfig, LogConfig
from .features import FeatureChangeListener, alter_isr_enabled
from .group.service import GroupCoordinatorService
from .log.cleaner_service import LogCleanerService
from .log.log_dir_failure import LogDirFailureChannel
from .metadata_cache import MetadataCache
from .periodic import every
from .topic_configs import log_config as topic_log_config
from .network.broker_client import BrokerClient
from .network.connection_quotas import ConnectionQuotas
from .network.controller_channel import ControllerChannel
from .network.socket_server import KafkaServerFactory, listen
from .log.producer_state import ProducerIdManager
from .replication.alter_isr_sender import AlterIsrSender
from .replication.replica_manager import ReplicaManager
from .network.request_handler import RequestHandler
from .txn.service import TransactionCoordinatorService

log = logging.getLogger("odradek.broker")


class StartupError(Exception):
    """A startup failure that is the user's to fix: logged as one line, exit code 1."""


def new_cluster_id() -> str:
    """22-character url-safe base64 of a random UUID (Kafka's Uuid.randomUuid().toString())."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class KafkaServer:
    def __init__(self, config: KafkaConfig, reactor: Any = None):
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.config = config
        self.reactor = reactor
        self.broker_id = config.broker_id
        self.zk: Any = None
        self.admin: Any = None
        self.controller: Any = None
        self.log_manager: Any = None
        self.replica_manager: ReplicaManager | None = None
        self.fetcher_manager: Any = None
        self.controller_channel: ControllerChannel | None = None   # AlterIsr and ControlledShutdown
        self.group_service: GroupCoordinatorService | None = None
        self.txn_service: TransactionCoordinatorService | None = None
        self.cleaner: LogCleanerService | None = None
        self.metadata_cache: MetadataCache | None = None
        self.ctx: BrokerContext | None = None
        self.cluster_id: str | None = None
        self.broker_epoch = -1
        self.ports: dict[str, Any] = {}        # listener name -> IListeningPort
        self.factories: dict[str, KafkaServerFactory] = {}
        self.bound: dict[str, tuple[str, int]] = {}
        self._tasks: list[task.LoopingCall] = []
        self._shutting_down = False
        self.config_changes: Any = None
        self.feature_changes: FeatureChangeListener | None = None
        self._initial_topic_configs: dict[str, dict[str, str]] = {}
        self.started: defer.Deferred[KafkaServer] = defer.Deferred()
        self.listener_security: dict[str, Any] = {}
        self.inter_broker_security: Any = None
        self.log_dir_failure_channel = LogDirFailureChannel()
        self.metrics: Any = None            # BrokerMetrics and its endpoint when metrics.port is set
        self.metrics_endpoint: Any = None
        # what a fatal failure (every log dir offline) does; main() also sets the exit code
        self.on_fatal: Any = lambda: defer.Deferred.fromCoroutine(self.shutdown())

    def _in_thread(self, fn, *args, **kwargs) -> defer.Deferred:
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), fn, *args, **kwargs)

    # ------------------------------------------------------------------ startup

    async def startup(self) -> None:
        cfg = self.config
        from kazoo.handlers.threading import KazooTimeoutError

        from odradek.zk.admin import AdminZkClient
        from odradek.zk.session import KafkaZkClient

        log.info("starting broker (zookeeper.connect=%s)", cfg.zookeeper_connect)
        self._load_security()
        from odradek.zk.security import ZkSecurityError
        try:   # SASL login from KAFKA_OPTS' JAAS file; zookeeper.set.acl: Kafka's secure znode ACLs
            self.zk = KafkaZkClient(cfg.zookeeper_connect, cfg["zookeeper.session.timeout.ms"],
                                    cfg.zookeeper_connection_timeout_ms, set_acl=cfg["zookeeper.set.acl"])
            await self._in_thread(self.zk.start, cfg.zookeeper_connection_timeout_ms / 1000.0)
        except KazooTimeoutError:
            raise StartupError(f"Timed out connecting to ZooKeeper at {cfg.zookeeper_connect}") from None
        except ZkSecurityError as e:
            raise StartupError(str(e)) from None
        await self._in_thread(self.zk.create_persistent_paths)
        self.admin = AdminZkClient(self.zk.kazoo)
        self.cluster_id = await self._in_thread(self.zk.get_or_create_cluster_id, new_cluster_id())
        log.info("cluster id %s", self.cluster_id)
        if self.broker_id < 0:
            self.broker_id = await self._in_thread(self._generate_broker_id)
        await self._load_logs()
        self.metadata_cache = MetadataCache(self.broker_id, self.cluster_id)
        zk = self.zk
        self.controller_channel = ControllerChannel(
            self.broker_id, lambda: self.metadata_cache, lambda: self.controller, cfg.inter_broker_listener_name,
            self.reactor, self.inter_broker_security, int(cfg["controller.socket.timeout.ms"]))
        if alter_isr_enabled(str(cfg["inter.broker.protocol.version"])):   # IBP 2.7-IV2+: via the controller
            isr_writer: Any = AlterIsrSender(self.broker_id, lambda: self.broker_epoch, self.controller_channel)
            isr_notifier: Any = None
        else:   # the classic path: the leader writes the state znode and /isr_change_notification
            isr_writer = lambda states: self._in_thread(zk.conditional_update_partition_states, states)  # noqa: E731
            isr_notifier = lambda tps: self._in_thread(zk.create_isr_change_notification, tps)  # noqa: E731
        self.replica_manager = ReplicaManager(
            self.broker_id, cfg, self.log_manager, self.metadata_cache, self.reactor, self._log_config_for,
            isr_writer=isr_writer, isr_notifier=isr_notifier, run_blocking=self._in_thread)
        from .replication.replica_fetcher import ReplicaFetcherManager
        self.fetcher_manager = ReplicaFetcherManager(self.broker_id, cfg, self.replica_manager, self.reactor,
                                                     security=self.inter_broker_security)
        self.replica_manager.startup()
        self._handle_log_dir_failures()
        self.cleaner = LogCleanerService(cfg, self.log_manager, self.reactor)
        self.replica_manager.cleaner = self.cleaner
        from .replication.log_dir_mover import ReplicaAlterLogDirsManager
        self.replica_manager.log_dir_mover = ReplicaAlterLogDirsManager(
            self.replica_manager, self.log_manager, self.reactor, int(cfg["replica.fetch.max.bytes"]))
        self.group_service = GroupCoordinatorService(cfg, self.replica_manager, self.reactor)
        producer_ids = ProducerIdManager(lambda: self._in_thread(self.zk.allocate_producer_id_block,
                                                                  self.broker_id))
        self.txn_service = TransactionCoordinatorService(cfg, self.replica_manager, self.metadata_cache,
                                                         self.reactor, producer_ids, self.broker_id,
                                                         cfg.inter_broker_listener_name,
                                                         client_factory=functools.partial(
                                                             BrokerClient, security=self.inter_broker_security))
        coordinators = (self.group_service, self.txn_service)

        def on_leadership_change(leaders, followers) -> None:
            for service in coordinators:
                try:
                    service.on_leadership_change(leaders, followers)
                except Exception:
                    log.exception("%s leadership hook failed", type(service).__name__)

        def on_stop_replicas(tps) -> None:
            for service in coordinators:
                try:
                    service.on_stop_replicas(tps)
                except Exception:
                    log.exception("%s stop replica hook failed", type(service).__name__)
        self.replica_manager.on_leadership_change = on_leadership_change
        self.replica_manager.on_stop_replicas = on_stop_replicas
        controller_view = ControllerView(lambda: self.zk.get_controller_state(self.broker_id))
        self.ctx = BrokerContext(
            config=cfg, broker_id=self.broker_id, metadata_cache=self.metadata_cache,
            replica_manager=self.replica_manager, log_manager=self.log_manager, scheduler=self.reactor,
            run_in_thread=self._in_thread, zk=self.zk, admin=self.admin, producer_ids=producer_ids,
            group_coordinator=self.group_service.coordinator, group_service=self.group_service,
            txn_coordinator=self.txn_service.coordinator,
            controller_view=controller_view, static_config=cfg)
        from .quotas.request_quotas import QuotaManagers   # client quotas, filled by config_changes
        self.ctx.quotas = QuotaManagers(cfg, self.reactor)
        self.ctx.fetch_sessions.max_slots = int(cfg["max.incremental.fetch.session.cache.slots"])
        self.ctx.topic_configs.update(self._initial_topic_configs)
        from .config_changes import ConfigChangeListener   # /config/changes, applied live from now on
        self.config_changes = ConfigChangeListener(self.zk, self.reactor, self._in_thread, self.ctx)
        await self.config_changes.start()
        self.feature_changes = FeatureChangeListener(self.zk, self.reactor, self._in_thread, self.ctx.features)
        self.feature_changes.start()   # /feature (KIP-584): ApiVersions v3's finalized features
        from .security.authorizer import start_authorizer   # ACLs loaded before any request is served
        self.ctx.authorizer = await start_authorizer(cfg, self.zk, self._in_thread, self.reactor)
        from .security.delegation_tokens import DelegationTokenManager   # tokens loaded before any login
        self.ctx.tokens = DelegationTokenManager(cfg, self.zk, self._in_thread, self.reactor)
        await self.ctx.tokens.start()
        self._watch_controller_epoch(controller_view)
        self._bind_listeners(RequestHandler(self.ctx))
        self._register_reconfigurables()
        from .metrics_http import start_metrics
        self.metrics_endpoint = start_metrics(self)
        await self._register()
        self.zk.on_new_session(self._on_new_session)
        from .controller import KafkaController
        self.controller = KafkaController(self.ctx.config, self.zk, self.broker_id, self.reactor,
                                          self.inter_broker_security)
        self.ctx.controller = self.controller
        await defer.ensureDeferred(self.controller.startup(self.broker_epoch))
        self.group_service.startup()
        self.txn_service.startup()
        self._start_periodic_tasks()
        self.cleaner.start()
        self.replica_manager.log_dir_mover.start()
        log.info("broker %d started (listeners %s)", self.broker_id,
                 ", ".join(f"{n}://{h}:{p}" for n, (h, p) in self.bound.items()))
        self.started.callback(self)

    def _generate_broker_id(self) -> int:
        stored = self._stored_broker_id()
        if stored is not None:
            return stored
        stat = self.zk.kazoo.set("/brokers/seqid", b"")
        return stat.version + int(self.config["reserved.broker.max.id"])

    def _stored_broker_id(self) -> int | None:
        import os
        for d in self.config.log_dirs:
            try:
                with open(os.path.join(d, "meta.properties"), encoding="latin-1") as f:
                    for line in f:
                        if line.startswith("broker.id="):
                            return int(line.split("=", 1)[1])
            except (OSError, ValueError):
                continue
        return None

    def _log_config_for(self, topic: str) -> LogConfig:
        overrides = self.ctx.topic_configs.get(topic, {}) if self.ctx is not None else {}
        config = self.ctx.config if self.ctx is not None else self.config   # (with the dynamic defaults)
        try:
            return LogConfig.from_broker(config, overrides)
        except ConfigError:
            return LogConfig.from_broker(config, {})

    async def _load_logs(self) -> None:
        from .log.manager import LogDirError, LogManager

        configs: dict[str, dict[str, str]] = {}

        def topic_config(topic: str) -> LogConfig:  # runs in the loading thread: ZooKeeper is fine here
            try:  # never the broker defaults instead (broker/topic_configs.py); Kafka fails its startup too
                if topic not in configs:
                    configs[topic] = self.zk.retry(self.zk.get_entity_config, "topics", topic)
                return topic_log_config(self.config, topic, configs[topic])
            except Exception as e:
                raise StartupError(f"Cannot read the config of topic {topic} from ZooKeeper: {e}") from None

        def load() -> Any:
            return LogManager(self.config.log_dirs, self.config, broker_id=self.broker_id,
                              cluster_id=self.cluster_id, topic_config=topic_config,
                              failure_channel=self.log_dir_failure_channel)
        try:
            self.log_manager = await self._in_thread(load)
        except LogDirError as e:
            raise StartupError(str(e)) from None
        self.log_manager.run_syncs_in(self._in_thread)
        self._initial_topic_configs = configs

    def _handle_log_dir_failures(self) -> None:
        """From now on a failed log dir is handled on the reactor (Kafka's LogDirFailureHandler)."""
        from .replication.log_dir_failure_handler import LogDirFailureHandler

        assert self.replica_manager is not None
        zk = self.zk
        handler = LogDirFailureHandler(
            self.replica_manager, self.log_manager,
            notify_controller=lambda: self._in_thread(zk.retry, zk.create_log_dir_event_notification, self.broker_id),
            on_all_offline=lambda _dir: self._fatal("every log dir has failed"))
        self.log_dir_failure_channel.add_listener(lambda d: self.reactor.callFromThread(handler.handle, d))

    def _fatal(self, reason: str) -> None:
        if self._shutting_down:
            return
        log.error("broker %d: %s; shutting down", self.broker_id, reason)
        self.on_fatal()

    def _load_security(self) -> None:
        """Every listener's TLS context and SASL settings, and the inter-broker client side,
        before anything else: a broker that cannot speak what a listener says does not start."""
        from .security.listeners import InterBrokerSecurity, ListenerSecurity, SecurityConfigError
        try:
            self.listener_security = {ep.listener_name: ListenerSecurity.for_listener(self.config, ep.listener_name)
                                      for ep in self.config.listeners}
            self.inter_broker_security = InterBrokerSecurity.from_config(self.config)
        except SecurityConfigError as e:
            raise StartupError(str(e)) from None

    def _scram_credential(self, mechanism: str, username: str) -> defer.Deferred:
        """The user's SCRAM credential from /config/users/<user> (read at each login: always current)."""
        from odradek.protocol.scram import ScramCredential, ScramError
        from odradek.zk.config_entities import sanitize

        def read() -> ScramCredential | None:
            value = self.zk.get_entity_config("users", sanitize(username)).get(mechanism)
            try:
                return ScramCredential.from_config(value) if value else None
            except ScramError:
                log.warning("the %s credential of user %s in ZooKeeper is malformed", mechanism, username)
                return None
        return self._in_thread(read)

    def _bind_listeners(self, handler: RequestHandler) -> None:
        from twisted.internet.error import CannotListenError

        cfg = self.config
        tokens = self.ctx.tokens if self.ctx is not None else None
        max_bytes = int(cfg["socket.request.max.bytes"])
        quotas = ConnectionQuotas(cfg["max.connections"], cfg["max.connections.per.ip"],
                                  cfg.max_connections_per_ip_overrides, cfg.listener_max_connections,
                                  cfg.inter_broker_listener_name if len(cfg.listeners) > 1 else None)
        for ep in cfg.listeners:
            security = self.listener_security[ep.listener_name]
            factory = KafkaServerFactory(handler, ep.listener_name, max_bytes, self.reactor, quotas,
                                         int(cfg["connections.max.idle.ms"]), security, self._scram_credential,
                                         int(cfg["connection.failed.authentication.delay.ms"]),
                                         tokens.scram_login if tokens is not None else None)
            factory.noisy = False
            try:
                port = listen(self.reactor, ep.host or "", ep.port, factory, int(cfg["socket.send.buffer.bytes"]),
                              int(cfg["socket.receive.buffer.bytes"]))
            except CannotListenError as e:
                raise StartupError(f"Cannot bind listener {ep.listener_name}://{ep.host}:{ep.port}: "
                                   f"{e.socketError}") from None
            self.ports[ep.listener_name] = port
            self.factories[ep.listener_name] = factory
            self.bound[ep.listener_name] = (ep.host, port.getHost().port)

    def _register_reconfigurables(self) -> None:
        """The parts that take dynamic broker configs live, brought at once (no connection accepted yet)
        to the dynamic configs ZooKeeper held when the listeners were built."""
        from .reconfigurables import CleanerBackoff, ConnectionLimits, ListenerKeystores, reconfigure
        contexts = {name: s.tls_context for name, s in self.listener_security.items() if s.tls_context is not None}
        ctx = self.ctx
        assert ctx is not None
        quotas = next(iter(self.factories.values())).quotas
        ctx.reconfigurables = [ListenerKeystores(contexts), ConnectionLimits(quotas), CleanerBackoff(self.cleaner)]
        try:
            reconfigure(ctx.reconfigurables, self.config, ctx.config)
        except ConfigError as e:
            raise StartupError(f"the dynamic broker config in ZooKeeper cannot be applied: {e}") from None

    def broker_info(self) -> BrokerInfo:
        endpoints = []
        for ep in self.config.advertised_listeners:
            port = ep.port
            if port == 0 and ep.listener_name in self.bound:
                port = self.bound[ep.listener_name][1]
            host = ep.host or socket.getfqdn()
            proto = self.config.security_protocol_map.get(ep.listener_name, "PLAINTEXT")
            endpoints.append(Endpoint(ep.listener_name, host, port, proto))
        return BrokerInfo(self.broker_id, endpoints, rack=self.config["broker.rack"])

    def _watch_controller_epoch(self, view: ControllerView) -> None:
        """Learn of every new controller as ZooKeeper elects it (so a deposed controller's
        requests are refused at once, not only after its successor's first request)."""
        def refresh() -> None:
            self._in_thread(view.read).addCallbacks(
                view.learn, lambda f: log.info("reading the controller from ZooKeeper failed: %s",
                                               f.getErrorMessage()))

        def changed(_data: bytes | None, _stat: Any) -> None:   # a kazoo thread
            if not self._shutting_down:
                self.reactor.callFromThread(refresh)
        self.zk.kazoo.DataWatch(ControllerEpochZNode.path, changed)

    async def _register(self) -> None:
        from odradek.zk.session import BrokerIdInUseError

        try:
            self.broker_epoch = await self._in_thread(self.zk.register_broker, self.broker_info())
        except BrokerIdInUseError as e:
            raise StartupError(str(e)) from None
        if self.ctx is not None:
            self.ctx.broker_epoch = self.broker_epoch
        log.info("registered /brokers/ids/%d (broker epoch %d)", self.broker_id, self.broker_epoch)

    def _on_new_session(self) -> None:
        """ZooKeeper session expired and was replaced (kazoo thread): register again."""
        if self._shutting_down:
            return
        try:
            epoch = self.zk.register_broker(self.broker_info())
        except Exception:
            log.exception("re-registering the broker after a new ZooKeeper session failed")
            return

        def apply() -> None:
            self.broker_epoch = epoch
            if self.ctx is not None:
                self.ctx.broker_epoch = epoch
            if self.controller is not None:
                self.controller.broker_epoch = epoch
            log.info("re-registered /brokers/ids/%d (broker epoch %d)", self.broker_id, epoch)
        self.reactor.callFromThread(apply)

    def _start_periodic_tasks(self) -> None:
        cfg = self.config
        lm = self.log_manager
        rm = self.replica_manager
        assert lm is not None and rm is not None, "periodic tasks start after the log and replica managers"
        # which logs have something to delete is found on a thread, the deletions made on the reactor
        self._every(cfg["log.retention.check.interval.ms"], "retention",
                    lambda: self._in_thread(lm.logs_due_for_cleanup).addCallback(lm.cleanup_logs))
        self._every(cfg["log.flush.scheduler.interval.ms"], "log flusher", lm.flush_dirty_logs)
        # the checkpoints read every partition: on a thread (at 5,000 partitions the HW checkpoint
        # held the reactor for 130 ms)
        self._every(cfg["replica.high.watermark.checkpoint.interval.ms"], "HW checkpoint",
                    lambda: self._in_thread(rm.checkpoint_high_watermarks))
        self._every(cfg["log.flush.offset.checkpoint.interval.ms"], "recovery point checkpoint",
                    lambda: self._in_thread(lm.checkpoint_recovery_points))
        self._every(cfg["log.flush.start.offset.checkpoint.interval.ms"], "log start offset checkpoint",
                    lambda: self._in_thread(lm.checkpoint_log_start_offsets))
        ctx = self.ctx
        tokens = ctx.tokens if ctx is not None else None
        if ctx is not None and tokens is not None and tokens.enabled:   # Kafka's controller removes expired tokens
            self._every(cfg["delegation.token.expiry.check.interval.ms"], "delegation token expiry",
                        lambda: tokens.expire_tokens() if ctx.is_controller else None)

    def _every(self, interval_ms: int, name: str, fn: Callable[[], Any]) -> None:
        if not interval_ms or interval_ms <= 0 or interval_ms >= 2**62:
            return
        self._tasks.append(every(self.reactor, interval_ms / 1000.0, name, fn))

    # ----------------------------------------------------------------- shutdown

    async def shutdown(self) -> None:
        if self._shutting_down:
            return
        self._shutting_down = True
        log.info("shutting down broker %d", self.broker_id)
        if self.fetcher_manager is not None:
            self.fetcher_manager.leaving = True   # the leaderships moved away are not fetched again
        if self.config_changes is not None:
            self.config_changes.stop()
        if self.ctx is not None and self.ctx.tokens is not None:
            self.ctx.tokens.stop()
        if self.feature_changes is not None:
            self.feature_changes.stop()
        if self.controller is not None and self.config["controlled.shutdown.enable"]:
            try:
                await self._controlled_shutdown()
            except Exception:
                log.exception("controlled shutdown failed; shutting down anyway")
        for port in self.ports.values():
            await defer.maybeDeferred(port.stopListening)
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
        for factory in self.factories.values():
            factory.close_all()
        for loop in self._tasks:
            if loop.running:
                loop.stop()
        if self.controller is not None:
            try:
                await defer.ensureDeferred(self.controller.shutdown())
            except Exception:
                log.exception("controller shutdown failed")
        if self.group_service is not None:
            self.group_service.shutdown()
        if self.txn_service is not None:
            self.txn_service.shutdown()
        if self.cleaner is not None:
            await self.cleaner.stop()
        if self.fetcher_manager is not None:
            self.fetcher_manager.shutdown()
        if self.controller_channel is not None:
            self.controller_channel.close()
        if self.replica_manager is not None:
            if self.replica_manager.log_dir_mover is not None:
                self.replica_manager.log_dir_mover.stop()
            self.replica_manager.shutdown()
        if self.log_manager is not None:
            try:
                self.log_manager.shutdown()
            except Exception:
                log.exception("log manager shutdown failed")
        if self.zk is not None:
            try:
                await self._in_thread(self.zk.close)
            except Exception:
                log.exception("closing the ZooKeeper session failed")
        log.info("broker %d shut down", self.broker_id)

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's leaderships away (Kafka's controlledShutdown)."""
        from odradek.protocol.apis import controlled_shutdown as cs

        retries = int(self.config["controlled.shutdown.max.retries"])
        backoff = int(self.config["controlled.shutdown.retry.backoff.ms"]) / 1000.0
        channel = self.controller_channel
        assert channel is not None
        for attempt in range(retries):
            cache = self.metadata_cache
            if cache is not None and cache.alive_broker_ids() <= {self.broker_id}:
                # Nobody could take a leadership over: asking (and retrying) only delays the
                # shutdown. Kafka would retry controlled.shutdown.max.retries times here.
                log.info("controlled shutdown skipped: no other live broker")
                return
            remaining: list | None = None
            try:
                local = channel.local()
                if local is not None:
                    remaining = await defer.ensureDeferred(local.controlled_shutdown(self.broker_id, self.broker_epoch))
                else:
                    resp = await channel.send(cs, cs.MAX_VERSION, {"broker_id": self.broker_id,
                                                                   "broker_epoch": self.broker_epoch},
                                              timeout_ms=int(self.config["request.timeout.ms"]))
                    if resp.error_code == 0:
                        remaining = [(p.topic_name, p.partition_index) for p in resp.remaining_partitions]
                    else:
                        log.info("controlled shutdown: controller answered error %d", resp.error_code)
            except Exception as e:
                log.info("controlled shutdown attempt %d failed: %s", attempt + 1, e)
            if remaining is not None and not remaining:
                log.info("controlled shutdown succeeded")
                return
            if remaining:
                log.info("controlled shutdown: %d partitions still led here", len(remaining))
                if not await self._another_replica_lives(remaining):
                    # Kafka retries these too, waiting controlled.shutdown.retry.backoff.ms each
                    # time, though no leader can be elected for them until a replica comes back
                    log.info("controlled shutdown: no other replica of those partitions is alive; "
                             "stopping without retrying")
                    return
            if attempt + 1 < retries:
                await task.deferLater(self.reactor, backoff, lambda: None)
        log.warning("controlled shutdown did not complete; proceeding with an unclean handover")

    async def _another_replica_lives(self, partitions: list) -> bool:
        """Whether a retry could move one of ``partitions``: another of its replicas is registered
        in ZooKeeper (the registry a stopped broker has left; unknown counts as alive)."""
        cache = self.metadata_cache
        try:
            live = set(await self._in_thread(self.zk.get_all_broker_ids))
        except Exception:
            return True
        for topic, partition in partitions:
            state = cache.partition_state(topic, partition) if cache is not None else None
            if state is None or any(r != self.broker_id and r in live for r in state.replicas):
                return True
        return False
