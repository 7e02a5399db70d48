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
- this broker's own entity (``brokers/<id>``, read at start too) sets its dynamic broker configs:
  the replication throttle rates of ``replication_quota`` (``DYNAMIC_BROKER_CONFIG``); other
  names found there (a tool may store ones odradek does not apply) are logged and ignored.
Other entity types (another broker, users, clients) are acknowledged without effect: odradek has no
client quotas yet, and users' SCRAM credentials are read at each login.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from twisted.internet import defer

from odradek.zk import znodes as zn

from .config.dynamic import DYNAMIC_BROKER_CONFIG, dynamic_broker_values
from .config.kafka_config import ConfigError
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
        self.last_sequence = -1
        self._running = False
        self._again = False
        self._stopped = False

    async def start(self) -> None:
        if self.zk is not None:
            await self._apply_broker_config()
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
            elif entity_type == "brokers" and name == str(self.ctx.broker_id):
                await self._apply_broker_config()
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

    async def _apply_broker_config(self) -> None:
        overrides = await self.run_in_thread(self.zk.get_entity_config, "brokers", str(self.ctx.broker_id))
        self.apply_broker_config(overrides)

    def apply_broker_config(self, overrides: dict[str, str]) -> None:
        """Set this broker's dynamic configs (the replication throttle rates) from its overrides."""
        ignored = sorted(set(overrides) - set(DYNAMIC_BROKER_CONFIG))
        if ignored:
            log.warning("broker %d: ignoring dynamic configs odradek does not apply: %s", self.ctx.broker_id,
                        ", ".join(ignored))
        known = {k: v for k, v in overrides.items() if k in DYNAMIC_BROKER_CONFIG}
        try:
            values = dynamic_broker_values(known)
        except ConfigError as e:
            log.error("broker %d: the dynamic config in ZooKeeper is invalid (%s); keeping the current one",
                      self.ctx.broker_id, e)
            return
        if known == self.ctx.dynamic_broker_config:
            return
        self.ctx.dynamic_broker_config = known
        rm = self.ctx.replica_manager
        rm.leader_quota.limit = values["leader.replication.throttled.rate"]
        rm.follower_quota.limit = values["follower.replication.throttled.rate"]
        log.info("broker %d: dynamic config %s", self.ctx.broker_id,
                 ", ".join(f"{k}={v}" for k, v in sorted(known.items())) or "(defaults)")

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
