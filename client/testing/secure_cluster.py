"""Settings for a local cluster whose brokers have secured listeners: TLS files, free ports,
SASL users, the inter-broker listener on SASL_SSL.

Invariant: ``SecuredListeners.make`` only writes files and picks free loopback ports; it starts
nothing. Its ``overrides`` and ``extra_listeners`` go to ``LocalCluster`` (or the tests'
``cluster_factory``), which keeps each broker's PLAINTEXT listener first for its readiness
checks; every other listener is named after its security protocol. PLAIN users and the
brokers' own login come from ``USERS``; SCRAM users must still be created in ZooKeeper
(``odradek configs --zookeeper ... --alter --entity-type users ...``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from odradek.zk.ensemble import free_ports

from .certificates import TlsFiles, make_tls_files

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" ' + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")


@dataclass(frozen=True)
class SecuredListeners:
    tls: TlsFiles
    ports: dict[int, dict[str, int]]        # broker id -> security protocol -> port
    overrides: dict[str, str]
    extra_listeners: dict[int, list[str]]

    @classmethod
    def make(cls, folder: str | Path, broker_ids: list[int],
             protocols: tuple[str, ...] = ("SSL", "SASL_PLAINTEXT", "SASL_SSL"),
             inter_broker: str = "SASL_SSL") -> "SecuredListeners":
        """Listeners ``protocols`` on every broker; brokers replicate over ``inter_broker``
        (PLAIN as admin when it is a SASL listener); SSL listeners require client certificates."""
        tls = make_tls_files(Path(folder) / "tls")
        free = iter(free_ports(len(broker_ids) * len(protocols)))
        ports = {b: {p: next(free) for p in protocols} for b in broker_ids}
        overrides = {
            "inter.broker.listener.name": inter_broker,
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(tls.broker.keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tls.ca),
            "listener.name.ssl.ssl.client.auth": "required",
        }
        for p in protocols:
            if p.startswith("SASL_"):
                overrides[f"listener.name.{p.lower()}.plain.sasl.jaas.config"] = PLAIN_JAAS
        extra = {b: [f"{p}://127.0.0.1:{port}" for p, port in bp.items()] for b, bp in ports.items()}
        return cls(tls, ports, overrides, extra)

    def bootstrap(self, protocol: str) -> str:
        return ",".join(f"127.0.0.1:{p[protocol]}" for p in self.ports.values())
