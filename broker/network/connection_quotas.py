"""ConnectionQuotas: how many connections the broker holds, per address, per listener and in
all, and whether one more may come in (Kafka's ``max.connections.per.ip`` with its
``max.connections.per.ip.overrides``, ``max.connections`` and
``listener.name.<listener>.max.connections``).

Invariant: ``counts`` are exactly the connections accepted and not yet released; an
accepted connection is counted once per address, per listener and in the total, and a
refused one not at all. The inter-broker listener is protected as in Kafka (KIP-402) when
the broker has more than one listener: the broker-wide limit never refuses replication or
the controller (its own per-listener limit still applies). Unlike Kafka, whose acceptor
stops accepting while the broker-wide limit is reached, the excess connection is closed at
once, so a client hears of it promptly and retries with its backoff. Sans-IO.
"""
from __future__ import annotations

from collections import Counter


class ConnectionQuotas:
    def __init__(self, max_connections: int, max_per_ip: int, per_ip_overrides: dict[str, int],
                 listener_limits: dict[str, int], protected_listener: str | None) -> None:
        self.set_limits(max_connections, max_per_ip, per_ip_overrides, listener_limits)
        self.protected_listener = protected_listener
        self.per_ip: Counter[str] = Counter()
        self.per_listener: Counter[str] = Counter()
        self.total = 0

    def set_limits(self, max_connections: int, max_per_ip: int, per_ip_overrides: dict[str, int],
                   listener_limits: dict[str, int]) -> None:
        """New limits (a dynamic config change): they apply to the connections that come next."""
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(per_ip_overrides)
        self.listener_limits = dict(listener_limits)

    def try_accept(self, listener: str, ip: str) -> str | None:
        """Count a new connection and return None, or return why it is refused (nothing counted)."""
        ip_limit = self.per_ip_overrides.get(ip, self.max_per_ip)
        if self.per_ip[ip] >= ip_limit:
            return f"{ip} already has {self.per_ip[ip]} connections (max.connections.per.ip {ip_limit})"
        listener_limit = self.listener_limits.get(listener)
        if listener_limit is not None and self.per_listener[listener] >= listener_limit:
            return (f"listener {listener} already has {self.per_listener[listener]} connections "
                    f"(listener.name.{listener.lower()}.max.connections {listener_limit})")
        if listener != self.protected_listener and self.total >= self.max_connections:
            return f"the broker already has {self.total} connections (max.connections {self.max_connections})"
        self.per_ip[ip] += 1
        self.per_listener[listener] += 1
        self.total += 1
        return None

    def release(self, listener: str, ip: str) -> None:
        """An accepted connection closed."""
        for counter, key in ((self.per_ip, ip), (self.per_listener, listener)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]
        self.total -= 1
