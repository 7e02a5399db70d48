"""ConfigChangeListener: config changes announced under /config/changes applied live, on every
broker (Kafka's ZkConfigManager with its TopicConfigHandler).

Invariants:
- every ``config_change_<seq>`` notification is processed once, in sequence order: those present
  at startup too (re-reading a config is harmless), then each new one as a watch on
  /config/changes reports it; a ZooKeeper failure leaves the notifications to the next run, so
  none is skipped;
- a notification only names an entity (``topics/<t>``); the config applied is what
  /config/topics/<t> holds when it is read, never the notification's content;
- a topic's new overrides reach, on the reactor, every log of that topic on this broker
  (``Log.config``: retention, segment size, max.message.bytes, cleanup.policy... from the next
  use), the replica manager's LogConfig (min.insync.replicas) and the LeaderAndIsr cache (so
  partitions created later get them too); an invalid stored config is logged and not applied;
- on the active controller, a topic whose unclean.leader.election.enable became true gets
  leaders elected for its offline partitions at once (Kafka's TopicUncleanLeaderElectionEnable);
- notifications older than 15 minutes are deleted (Kafka's changeExpirationMs), by whichever
  broker sees them first.
- this broker's own entity (``brokers/<id>``) and the cluster default (``brokers/<default>``),
  both read at start too, set its dynamic broker configs (``broker/config/dynamic.py``): the
  replication throttle rates of ``replication_quota``, and the log defaults: ``ctx.config``
  becomes server.properties under the dynamic defaults under its own, and every local log whose
  topic does not override a changed default gets it (the controller also its
  unclean.leader.election.enable); names odradek does not apply (a tool may store some) are
  logged and ignored, and an invalid stored value keeps the current configs. The parts that take
  broker configs live (``broker/reconfigurables.py``: listener keystores, connection limits, the
  cleaner's backoff) take the change whole or not at all: one that cannot (a keystore that does not
  load) keeps every current config, with one error line; password values are decoded here with
  ``password.encoder.secret`` and never logged.
- client quotas: every quota entity (``/config/users/<u>``, ``/config/users/<u>/clients/<c>``,
  ``/config/clients/<c>``, ``<default>`` for defaults) is read at start into ``ctx.quotas``
  (``broker/quotas/``), and a notification ``users/...`` or ``clients/...`` re-reads that one
  entity, so a quota set or removed applies on every broker within the notification's latency.
Other entity types (another broker) are acknowledged without effect; users' SCRAM credentials are
read at each login.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from twisted.internet import defer

from odradek.zk import znodes as zn
from odradek.zk.config_entities import CLIENTS, USERS, EntityConfigs, QuotaKey, quota_znode

from .config.dynamic import (DEFAULT_LEVEL, decode_passwords, effective_config, is_password, key_of, per_broker_only,
                             throttle_rates, validate)
from .config.kafka_config import ConfigError
from .reconfigurables import reconfigure
from .topic_configs import log_config

log = logging.getLogger(__name__)

EXPIRATION_MS = 15 * 60 * 1000
RETRY_S = 1.0
PREFIX = zn.ConfigEntityChangeNotificationSequenceZNode.prefix


def sequence_of(name: str) -> int:
    return int(name[len(PREFIX):]) if name.startswith(PREFIX) and name[len(PREFIX):].isdigit() else -1


class ConfigChangeListener:
    """Watches /config/changes and applies each announced topic config (module invariants)."""

    def __init__(self, zk: Any, reactor: Any, run_in_thread: Callable[..., defer.Deferred], ctx: Any):
        self.zk = zk
        self.reactor = reactor
        self.run_in_thread = run_in_thread
        self.ctx = ctx
        self.static_config = ctx.config
        self.last_sequence = -1
        self._running = False
        self._again = False
        self._stopped = False

    async def start(self) -> None:
        if self.zk is not None:
            await self._apply_broker_config()
            await self._load_quotas()
        await self.changed()

    def stop(self) -> None:
        self._stopped = True

    def _watch(self) -> None:   # a kazoo thread
        self.reactor.callFromThread(self.changed)

    def changed(self) -> defer.Deferred:
        """Process the notifications not yet processed (one run at a time; a change reported
        during a run starts another)."""
        if self._running:
            self._again = True
            return defer.succeed(None)
        self._running = True
        return defer.Deferred.fromCoroutine(self._run())

    async def _run(self) -> None:
        try:
            while not self._stopped:
                self._again = False
                try:
                    await self._process()
                except Exception as e:   # ZooKeeper unreachable: the same notifications, later
                    log.warning("processing config change notifications failed (%s: %s); retrying in %.0f s",
                                type(e).__name__, e, RETRY_S)
                    self.reactor.callLater(RETRY_S, self.changed)
                    return
                if not self._again:
                    return
        finally:
            self._running = False

    async def _process(self) -> None:
        changes = await self.run_in_thread(self._read_changes)
        for seq, entity_type, name in changes:
            if entity_type == "topics":
                overrides = await self.run_in_thread(self.zk.get_entity_config, "topics", name)
                self.apply_topic_config(name, overrides)
            elif entity_type == "brokers" and name in (str(self.ctx.broker_id), DEFAULT_LEVEL):
                await self._apply_broker_config()
            elif entity_type in (USERS, CLIENTS) and (key := quota_key(entity_type, name)) is not None:
                await self._apply_quota(key)
            elif entity_type:
                log.info("config change of %s/%s: no dynamic %s configs are applied by odradek", entity_type,
                         name, entity_type)
            self.last_sequence = seq

    def _read_changes(self) -> list[tuple[int, str, str]]:
        """(sequence, entity type, name) of each new notification, oldest first; deletes expired
        ones. Runs in a thread (ZooKeeper)."""
        path = zn.ConfigEntityChangeNotificationZNode.path
        names = sorted((sequence_of(c), c) for c in self.zk.get_children(path, self._watch))
        out = []
        now_ms = time.time() * 1000
        for seq, child in names:
            if seq <= self.last_sequence:
                continue
            data, stat = self.zk.get_data(f"{path}/{child}")
            if data is None:
                continue
            try:
                entity_type, _, name = zn.ConfigEntityChangeNotificationSequenceZNode.decode(data).partition("/")
            except (ValueError, KeyError, TypeError):
                log.warning("ignoring config change notification %s: %r is not Kafka's format", child, data)
                out.append((seq, "", ""))
                continue
            out.append((seq, entity_type, name))
            if now_ms - stat.ctime > EXPIRATION_MS:
                try:
                    self.zk.kazoo.delete(f"{path}/{child}")
                except Exception:  # noqa: BLE001 - another broker purged it first
                    pass
        return out

    async def _load_quotas(self) -> None:
        quotas, admin = self.ctx.quotas, self.ctx.admin
        if quotas is not None and admin is not None:
            quotas.replace_all(await self.run_in_thread(EntityConfigs(admin).all_quota_configs))
            if any(q.active for q in quotas.kinds):
                log.info("broker %d: client quotas loaded", self.ctx.broker_id)

    async def _apply_quota(self, key: QuotaKey) -> None:
        quotas = self.ctx.quotas
        if quotas is None:
            return
        values = await self.run_in_thread(self.zk.get_entity_config, *quota_znode(key))
        quotas.update(key, values)
        log.info("broker %d: client quota entity %s: %s", self.ctx.broker_id, "/".join(quota_znode(key)),
                 _show({k: v for k, v in values.items() if k in {q.name for q in quotas.kinds}}))

    async def _apply_broker_config(self) -> None:
        broker = await self.run_in_thread(self.zk.get_entity_config, "brokers", str(self.ctx.broker_id))
        default = await self.run_in_thread(self.zk.get_entity_config, "brokers", DEFAULT_LEVEL)
        self.apply_broker_config(default, broker)

    def apply_broker_config(self, default: dict[str, str], broker: dict[str, str]) -> None:
        """Apply the cluster's and this broker's dynamic configs (module invariants)."""
        ctx = self.ctx
        default = self._known(default, False, "<default>")
        broker = self._known(broker, True, str(ctx.broker_id))
        if (default, broker) == (ctx.dynamic_default_broker_config, ctx.dynamic_broker_config):
            return
        try:
            broker = decode_passwords(self.static_config, broker)
            validate(default, broker_level=False)
            validate(broker, broker_level=True)
            leader_rate, follower_rate, alter_dirs_rate = throttle_rates(broker)
            config = effective_config(self.static_config, default, broker)
            reconfigure(ctx.reconfigurables, ctx.config, config)
        except ConfigError as e:
            log.error("broker %d: the dynamic broker config in ZooKeeper cannot be applied (%s); keeping the "
                      "current one", ctx.broker_id, e)
            return
        ctx.dynamic_default_broker_config, ctx.dynamic_broker_config = default, broker
        rm = ctx.replica_manager
        rm.leader_quota.limit, rm.follower_quota.limit = leader_rate, follower_rate
        if rm.log_dir_mover is not None:
            rm.log_dir_mover.quota.limit = alter_dirs_rate
            rm.log_dir_mover.wake()
        old_unclean = bool(ctx.config["unclean.leader.election.enable"])
        ctx.config = config
        for lg in ctx.log_manager.all_logs():
            lg.config = log_config(config, lg.topic, lg.config.overrides)
        for topic, old in list(rm.log_configs.items()):
            rm.log_configs[topic] = log_config(config, topic, old.overrides)
        log.info("broker %d: dynamic configs: cluster default %s, this broker %s", ctx.broker_id,
                 _show(default), _show(broker))
        controller = ctx.controller
        if controller is not None and bool(config["unclean.leader.election.enable"]) != old_unclean:
            controller.unclean_leader_election_default_changed(bool(config["unclean.leader.election.enable"]))

    def _known(self, overrides: dict[str, str], broker_level: bool, entity: str) -> dict[str, str]:
        known = {k: v for k, v in overrides.items() if key_of(k) is not None and (broker_level or not per_broker_only(k))}
        ignored = sorted(set(overrides) - set(known))
        if ignored:
            log.warning("broker %d: ignoring dynamic configs of brokers/%s odradek does not apply: %s",
                        self.ctx.broker_id, entity, ", ".join(ignored))
        return known

    def apply_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        """Give the topic's logs, the replica manager and the LeaderAndIsr cache the new config."""
        ctx = self.ctx
        try:
            config = log_config(ctx.config, topic, overrides)
        except ConfigError as e:
            log.error("topic %s: the config in ZooKeeper is invalid (%s); keeping the current one", topic, e)
            return
        ctx.topic_configs[topic] = dict(overrides)
        rm = ctx.replica_manager
        if topic in rm.log_configs:
            rm.log_configs[topic] = config
        logs = [lg for lg in ctx.log_manager.all_logs() if lg.topic == topic]
        for lg in logs:
            lg.config = config
        log.info("topic %s: config %s applied to %d local log(s)", topic,
                 ", ".join(f"{k}={v}" for k, v in sorted(overrides.items())) or "(defaults)", len(logs))
        controller = ctx.controller
        if config["unclean.leader.election.enable"] and controller is not None and controller.is_active:
            controller.topic_unclean_leader_election_enabled(topic)


def quota_key(entity_type: str, name: str) -> QuotaKey | None:
    """The quota entity a ``users/...`` or ``clients/...`` notification names (None: not one)."""
    parts = name.split("/")
    if entity_type == CLIENTS and len(parts) == 1 and parts[0]:
        return None, parts[0]
    if entity_type == USERS and len(parts) == 1 and parts[0]:
        return parts[0], None
    if entity_type == USERS and len(parts) == 3 and parts[1] == CLIENTS and parts[0] and parts[2]:
        return parts[0], parts[2]
    return None


def _show(overrides: dict[str, str]) -> str:
    return ", ".join(f"{k}={'[hidden]' if is_password(k) else v}" for k, v in sorted(overrides.items())) or "(none)"
