"""Connection limits on the socket layer (StringTransport, task.Clock): max.connections.per.ip
and its overrides, listener.name.<l>.max.connections, max.connections with the inter-broker
listener protected, and connections.max.idle.ms."""
from __future__ import annotations

import struct

import pytest
from twisted.internet import address, task
from twisted.internet.testing import StringTransport

from odradek.broker.config.kafka_config import ConfigError, KafkaConfig
from odradek.broker.network.connection_quotas import ConnectionQuotas
from odradek.broker.network.request_handler import RequestHandler
from odradek.broker.network.socket_server import KafkaServerFactory
from odradek.protocol.apis import api_versions
from odradek.protocol.header import encode_request

from broker_fixtures import Broker

UNLIMITED = 2**31 - 1


def test_quotas_per_ip_with_overrides_per_listener_and_in_all():
    q = ConnectionQuotas(4, 2, {"127.0.0.9": 3}, {"EXTERNAL": 1}, protected_listener="INTERNAL")
    assert q.try_accept("INTERNAL", "127.0.0.2") is None
    assert q.try_accept("INTERNAL", "127.0.0.2") is None
    assert "max.connections.per.ip 2" in q.try_accept("INTERNAL", "127.0.0.2")
    assert q.try_accept("EXTERNAL", "127.0.0.3") is None
    assert "listener.name.external.max.connections 1" in q.try_accept("EXTERNAL", "127.0.0.4")
    assert q.try_accept("OTHER", "127.0.0.9") is None                 # the 4th: the broker-wide limit is met
    assert "max.connections 4" in q.try_accept("OTHER", "127.0.0.9")
    assert q.try_accept("INTERNAL", "127.0.0.9") is None              # protected: replication gets in
    assert (q.total, q.per_ip["127.0.0.9"]) == (5, 2)
    q.release("OTHER", "127.0.0.9")
    q.release("EXTERNAL", "127.0.0.3")
    assert q.try_accept("EXTERNAL", "127.0.0.4") is None               # a freed place is taken again
    assert q.total == 4 and "127.0.0.3" not in q.per_ip


def test_the_limits_are_read_and_checked_with_kafkas_names(tmp_path):
    base = {"broker.id": 1, "zookeeper.connect": "127.0.0.1:1", "log.dirs": str(tmp_path),
            "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT"}
    cfg = KafkaConfig({**base, "max.connections.per.ip.overrides": "127.0.0.2:5,[::1]:0",
                       "listener.name.external.max.connections": "7", "max.connections": "100"})
    assert cfg.max_connections_per_ip_overrides == {"127.0.0.2": 5, "::1": 0}
    assert cfg.listener_max_connections == {"EXTERNAL": 7} and cfg["max.connections"] == 100
    assert cfg.unknown == []
    for bad in ({"max.connections.per.ip.overrides": "127.0.0.2"}, {"max.connections.per.ip.overrides": "h:-1"},
                {"listener.name.external.max.connections": "many"}, {"max.connections": "-1"}):
        with pytest.raises(ConfigError):
            KafkaConfig({**base, **bad})


def _factory(broker, clock, quotas=None, idle_ms=600000, listener="PLAINTEXT"):
    return KafkaServerFactory(RequestHandler(broker.ctx), listener, 1 << 20, clock, quotas, idle_ms)


def _open(factory, ip="127.0.0.1"):
    conn = factory.buildProtocol(None)
    tr = StringTransport(peerAddress=address.IPv4Address("TCP", ip, 40000))
    conn.makeConnection(tr)
    return conn, tr


def _closed(tr) -> bool:
    return tr.disconnecting or getattr(tr, "disconnected", False)


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


def test_the_excess_connection_is_closed_at_once_and_a_closed_one_frees_its_place(broker):
    clock = task.Clock()
    factory = _factory(broker, clock, ConnectionQuotas(UNLIMITED, 2, {}, {}, None))
    (a, ta), (b, tb) = _open(factory), _open(factory)
    c, tc = _open(factory)
    assert not _closed(ta) and not _closed(tb) and _closed(tc)
    assert factory.connections == {a, b}
    c.connectionLost()                       # the refused one gives back nothing it did not take
    assert factory.quotas.per_ip["127.0.0.1"] == 2
    a.connectionLost()
    _, td = _open(factory)
    assert not _closed(td)
    _, te = _open(factory, "127.0.0.2")      # another address has its own count
    assert not _closed(te)


def test_idle_connections_are_closed_and_active_ones_are_not(broker):
    clock = task.Clock()
    factory = _factory(broker, clock, idle_ms=1000)
    factory.startFactory()
    try:
        (idle, t_idle), (active, t_active) = _open(factory), _open(factory)
        body = encode_request(api_versions, 0, 1, "c", {})
        for _ in range(6):                   # a request every 0.4 s on one connection only
            clock.advance(0.4)
            active.dataReceived(struct.pack(">i", len(body)) + body)
        assert _closed(t_idle) and not _closed(t_active)
        clock.advance(2.0)
        assert _closed(t_active)             # and once it stops, it goes too
    finally:
        factory.stopFactory()
