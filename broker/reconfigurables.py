"""The broker's parts that take a dynamic broker config live (Kafka's Reconfigurable).

Invariant: a change is applied in two phases: every part first ``prepare``s the new config
(raising ConfigError, with nothing changed anywhere, if it cannot take it), and only when all
have prepared are the returned appliers run, on the reactor thread. So a dynamic config change
is taken whole or not at all: a keystore that does not load, or names another identity, leaves
every listener, limit and timer as it was. ``prepare`` returns None when the part has nothing
to change.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Protocol

from .config.dynamic import CLEANER_CONFIGS, CONNECTION_LIMITS, SSL_STORES
from .config.kafka_config import KafkaConfig
from .config.types import ConfigError
from .security import tls

Applier = Callable[[], None]


class Reconfigurable(Protocol):
    def prepare(self, old: KafkaConfig, new: KafkaConfig, reload_files: bool = False) -> Applier | None: ...


def reconfigure(parts: Iterable[Reconfigurable], old: KafkaConfig, new: KafkaConfig,
                reload_files: bool = False) -> None:
    """Prepare every part for ``new``, then apply them all (ConfigError: nothing applied)."""
    appliers = [a for a in (p.prepare(old, new, reload_files) for p in parts) if a is not None]
    for apply in appliers:
        apply()


class ListenerKeystores:
    """Each TLS listener's keystore and truststore (``ssl.*``, ``listener.name.<l>.ssl.*``).
    ``reload_files`` re-reads the files even when no setting changed (a certificate renewed in
    place, as Kafka reloads on an AlterConfigs that repeats the keystore settings)."""

    def __init__(self, contexts: dict[str, tls.ReloadableServerContext]) -> None:
        self.contexts = contexts

    def prepare(self, old: KafkaConfig, new: KafkaConfig, reload_files: bool = False) -> Applier | None:
        staged = []
        for listener, context in self.contexts.items():
            before = {n: old.listener_value(listener, n) for n in SSL_STORES}
            after = {n: new.listener_value(listener, n) for n in SSL_STORES}
            if before == after and not reload_files:
                continue
            def get(name: str, listener: str = listener) -> Any:
                return new.listener_value(listener, name)
            try:
                staged.append((context, context.prepare(get)))
            except (tls.TlsConfigError, ValueError) as e:
                raise ConfigError(f"Validation of dynamic config update of SSLFactory failed for listener "
                                  f"{listener}: {e}") from None
        if not staged:
            return None

        def apply() -> None:
            for context, options in staged:
                context.install(options)
        return apply


class ConnectionLimits:
    """``max.connections``, ``max.connections.per.ip`` (+ overrides), ``listener.name.<l>.max.connections``:
    new connections are counted against the new limits; open ones are not closed (as Kafka)."""

    def __init__(self, quotas: Any) -> None:
        self.quotas = quotas

    def prepare(self, old: KafkaConfig, new: KafkaConfig, reload_files: bool = False) -> Applier | None:
        def limits(c: KafkaConfig) -> tuple:
            return (*(c[n] for n in sorted(CONNECTION_LIMITS)), c.max_connections_per_ip_overrides,
                    c.listener_max_connections)
        if limits(old) == limits(new):
            return None
        return lambda: self.quotas.set_limits(new["max.connections"], new["max.connections.per.ip"],
                                              new.max_connections_per_ip_overrides, new.listener_max_connections)


class CleanerBackoff:
    """``log.cleaner.backoff.ms``: the interval between the log cleaner's passes."""

    def __init__(self, cleaner: Any) -> None:
        self.cleaner = cleaner

    def prepare(self, old: KafkaConfig, new: KafkaConfig, reload_files: bool = False) -> Applier | None:
        if all(old[n] == new[n] for n in CLEANER_CONFIGS):
            return None
        return lambda: self.cleaner.set_backoff_ms(int(new["log.cleaner.backoff.ms"]))
