"""``create_topic``: a topic created through odradek's AdminClient, returned once it is usable.

Invariant: it returns only when every broker named (by default every one in the bootstrap
list) answers Metadata with the topic, all its partitions and a leader for each, so a client
bootstrapping from any of them can produce at once; a creation error propagates unchanged.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from odradek.client import AdminClient, KafkaError, NewTopic, TopicPartition
from odradek.client.connection import BrokerConnection
from odradek.protocol.apis import metadata

from .waits import wait_until


def create_topic(bootstrap_servers: str, name: str, partitions: int = 1, replication_factor: int = 1,
                 configs: Mapping[str, str] | None = None, *, brokers: Iterable[str] | None = None,
                 assignment: Mapping[int, Sequence[int]] | None = None,
                 timeout: float = 60.0) -> list[TopicPartition]:
    """Create ``name`` and wait until each of ``brokers`` ("host:port", default: the bootstrap
    list) has a leader for every partition; its partitions, in order. ``assignment`` (partition
    -> broker ids, the first the preferred leader) places the replicas instead of
    ``partitions`` and ``replication_factor``."""
    partitions = len(assignment) if assignment is not None else partitions
    with AdminClient(bootstrap_servers=bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, partitions, replication_factor, topic_configs=dict(configs or {}),
                                      replica_assignments=assignment)])
    addresses = list(brokers) if brokers is not None else bootstrap_servers.split(",")
    for address in addresses:
        wait_until(lambda: _has_leaders(address, name, partitions), timeout,
                   f"{address} to know a leader for each partition of {name}", retry_on=(KafkaError, OSError))
    return [TopicPartition(name, p) for p in range(partitions)]


def _has_leaders(address: str, topic: str, partitions: int) -> bool:
    host, port = address.rsplit(":", 1)
    conn = BrokerConnection(host, int(port), request_timeout_ms=5000).connect()
    try:
        resp = conn.request(metadata, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    finally:
        conn.close()
    [t] = resp.topics
    return (t.error_code == 0 and len(t.partitions) == partitions
            and all(p.leader_id >= 0 for p in t.partitions))
