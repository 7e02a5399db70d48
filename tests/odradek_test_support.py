"""Helpers shared by conftest and test files of different test folders.

Invariant: a uniquely named module (tests/ is on sys.path for every conftest), so no
folder's ``import conftest`` can pick up another folder's conftest by accident.
"""
from __future__ import annotations

import pytest


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now, that no outgoing connection can take (zk.ensemble.free_ports)."""
    from odradek.zk.ensemble import free_ports
    return free_ports(1, host)[0]


def _failed(request: pytest.FixtureRequest) -> bool:
    """True if the test owning ``request`` failed in setup or call (needs the report hook in tests/conftest.py)."""
    node = request.node
    return any(getattr(node, f"rep_{when}", None) is not None and getattr(node, f"rep_{when}").failed
               for when in ("setup", "call"))


def synced(client):
    """``client`` (a KazooClient) after ``sync("/")``: a session sees its own writes in order, but
    another session's (a broker's, a CLI's, another KazooClient's) only once the ZooKeeper server it
    reads from has applied them; after the sync it has applied every write completed before the call."""
    client.sync("/")
    return client


def read_partition(bootstrap: str, topic: str, partition: int) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of one partition, from its log start up to its end offset (kafka-python,
    no group)."""
    from kafka import KafkaConsumer, TopicPartition
    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out: list[tuple[bytes, bytes]] = []
        while consumer.position(tp) < end:
            for recs in consumer.poll(timeout_ms=500).values():
                out.extend((r.key, r.value) for r in recs)
        return out
    finally:
        consumer.close()
