"""Topic configs from ZooKeeper (/config/topics/<t>) as the LogConfigs logs are created with.

Invariant: a topic's LogConfig is built only from what ZooKeeper answered for that topic
(broker defaults + its overrides). A read that fails is never replaced by the broker
defaults (a compacted topic taken for ``delete`` loses keys): ``fetch_topic_configs``
retries a transient ZooKeeper failure off the reactor thread, with backoff, for at most
``config_read_timeout_s`` (within a session timeout ZooKeeper either answers again or the
session expires, and the broker's re-registration brings a fresh LeaderAndIsr), then
names the topic unavailable; the caller fails its partitions, nothing is applied for them
and nothing is cached, so the next LeaderAndIsr reads ZooKeeper again. As in Kafka's
LogConfig, unknown config names are ignored (with a warning) and a bad value of a known
one is a ConfigError, but for ``message.format.version``: a stored value odradek refuses to
set (before 0.11.0, or not a version) is ignored with a warning, as it changes nothing here
(odradek stores magic 2 whatever it says) and must not take the topic's partitions offline.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from twisted.internet import task

from .config.kafka_config import TOPIC_CONFIG, ConfigError, KafkaConfig, LogConfig, message_format_version

log = logging.getLogger(__name__)

FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 1.0


def log_config(config: KafkaConfig, topic: str, overrides: Mapping[str, str]) -> LogConfig:
    """Broker defaults + ``overrides``; unknown names ignored, a bad value raises ConfigError."""
    unknown = sorted(set(overrides) - set(TOPIC_CONFIG))
    if unknown:
        log.warning("topic %s: ignoring unknown config names %s", topic, ", ".join(unknown))
    known = {k: v for k, v in overrides.items() if k in TOPIC_CONFIG}
    version = known.get("message.format.version")
    if version is not None and message_format_version(str(version).strip()):
        log.warning("topic %s: ignoring message.format.version=%s (odradek stores message format v2 only)",
                    topic, version)
        del known["message.format.version"]
    return LogConfig.from_broker(config, known)


def is_transient(exc: BaseException) -> bool:
    """A ZooKeeper failure worth retrying (connection loss, timeout, expired session), as
    opposed to a znode that cannot be decoded."""
    return isinstance(exc, (KazooException, KazooTimeoutError))


def read_topic_configs(zk: Any, topics: Iterable[str]) -> tuple[dict[str, dict[str, str]], dict[str, Exception]]:
    """Blocking (run it in a thread): ({topic: overrides} read, {topic: error} not read)."""
    read: dict[str, dict[str, str]] = {}
    failed: dict[str, Exception] = {}
    for topic in topics:
        try:
            read[topic] = zk.get_entity_config("topics", topic)
        except Exception as exc:  # noqa: BLE001 - every failure is reported per topic
            failed[topic] = exc
    return read, failed


def config_read_timeout_s(config: KafkaConfig) -> float:
    """How long a LeaderAndIsr retries reading topic configs: a ZooKeeper session timeout, and
    under half the controller's request timeout (the controller must not give the request up)."""
    return min(int(config["zookeeper.session.timeout.ms"]), int(config["controller.socket.timeout.ms"]) // 2) / 1000.0


async def fetch_topic_configs(zk: Any, config: KafkaConfig, scheduler: Any, run_in_thread: Any,
                              cache: dict[str, dict[str, str]], topics: Iterable[str]
                              ) -> tuple[dict[str, LogConfig], dict[str, str]]:
    """(LogConfig per topic, {topic: why not} for the topics whose config is not known).

    Overrides come from ``cache`` or ZooKeeper (read in a thread; what was read is cached).
    Without ZooKeeper (``zk`` None: handler tests) a topic has no overrides."""
    wanted = sorted(set(topics))
    pending = [t for t in wanted if t not in cache] if zk is not None else []
    unavailable: dict[str, str] = {}
    deadline = scheduler.seconds() + config_read_timeout_s(config)
    backoff = FIRST_BACKOFF_S
    while pending:
        read, failed = await run_in_thread(read_topic_configs, zk, pending)
        cache.update(read)
        pending = []
        for topic, exc in failed.items():
            if is_transient(exc) and scheduler.seconds() + backoff <= deadline:
                pending.append(topic)
            else:
                log.error("reading the config of topic %s from ZooKeeper failed (%s: %s); its partitions "
                          "are not applied", topic, type(exc).__name__, exc)
                unavailable[topic] = f"{type(exc).__name__}: {exc}"
        if pending:
            log.warning("reading the config of topics %s from ZooKeeper failed; retrying in %.1f s",
                        ", ".join(pending), backoff)
            await task.deferLater(scheduler, backoff, lambda: None)
            backoff = min(2 * backoff, MAX_BACKOFF_S)
    configs: dict[str, LogConfig] = {}
    for topic in wanted:
        if topic in unavailable:
            continue
        try:
            configs[topic] = log_config(config, topic, cache.get(topic, {}))
        except ConfigError as e:
            log.error("topic %s has an invalid config in ZooKeeper (%s); its partitions are not applied", topic, e)
            cache.pop(topic, None)   # read again next time: someone may fix it
            unavailable[topic] = str(e)
    return configs, unavailable
