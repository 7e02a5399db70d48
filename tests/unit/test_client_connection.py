"""BrokerConnection: ApiVersions negotiation and per-API versions, against a scripted in-test broker."""
from __future__ import annotations

import socket
import threading

import pytest
from client_fake_broker import FakeBroker

from odradek.client.connection import BrokerConnection, ConnectionLost
from odradek.protocol.apis import fetch, list_offsets, metadata, produce
from odradek.protocol.errors import ErrorCode, KafkaError


@pytest.fixture
def broker():
    b = FakeBroker()
    yield b
    b.stop()


def connect(b: FakeBroker) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", b.port, client_id="test", request_timeout_ms=5000).connect()


def test_api_versions_v3_first(broker):
    conn = connect(broker)
    assert broker.api_versions_seen == [3]
    assert conn.api_versions_version == 3
    assert conn.api_versions[0] == (produce.MIN_VERSION, produce.MAX_VERSION)
    conn.close()


def test_error_35_retries_at_broker_max():
    b = FakeBroker(api_versions_max=2)
    try:
        conn = connect(b)
        assert b.api_versions_seen == [3, 2]
        assert conn.api_versions_version == 2
        conn.close()
    finally:
        b.stop()


def test_disconnect_retries_v0():
    b = FakeBroker(drop_api_versions_above=0)
    try:
        conn = connect(b)
        assert b.api_versions_seen == [3, 0]
        assert conn.api_versions_version == 0
        assert metadata.API_KEY in conn.api_versions
        conn.close()
    finally:
        b.stop()


def test_version_is_min_of_ours_and_brokers():
    b = FakeBroker(advertise={18: (0, 3), 0: (0, 5), 1: (0, 12), 3: (0, 4), 2: (2, 9)})
    try:
        conn = connect(b)
        assert conn.version_for(produce) == 5          # broker max below ours
        assert conn.version_for(fetch) == 11           # our cap (Fetch 11) below the broker's
        assert conn.version_for(metadata) == 4
        assert conn.version_for(metadata, max_version=1) == 1
        assert conn.version_for(list_offsets) == 6          # codec max 6, broker allows 2-9
    finally:
        b.stop()


def test_no_common_version_is_refused():
    b = FakeBroker(advertise={18: (0, 3), 0: (0, 2), 3: (9, 11)})
    try:
        conn = connect(b)
        with pytest.raises(KafkaError) as e:
            conn.version_for(produce)     # we need Produce >= 3 (magic 2)
        assert e.value.code == ErrorCode.UNSUPPORTED_VERSION
        with pytest.raises(KafkaError):
            conn.version_for(fetch)       # not advertised at all
    finally:
        b.stop()


def test_pipelined_requests_complete_in_order(broker):
    broker.create_topic("t", 1)
    conn = connect(broker)
    got = []
    reqs = [conn.send(metadata, {"topics": [{"name": "t"}]}, callback=lambda r, e, i=i: got.append((i, e)))
            for i in range(5)]
    assert len(conn.in_flight) == 5
    resp = conn.request(metadata, {"topics": None})
    assert [i for i, _ in got] == [0, 1, 2, 3, 4] and all(e is None for _, e in got)
    assert all(r.done for r in reqs)
    assert resp.topics[0].name == "t"
    conn.close()


def test_connection_refused_is_retriable():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ConnectionLost) as e:
        BrokerConnection("127.0.0.1", port, connect_timeout_ms=1000).connect()
    assert e.value.retriable


def test_broker_closing_fails_in_flight_requests():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def serve():
        c, _ = srv.accept()
        from odradek.protocol.apis import api_versions
        from odradek.protocol.connection import FrameReader, frame_parts
        from odradek.protocol.header import decode_request_header, encode_response
        reader = FrameReader(1 << 20)
        while not (frames := reader.feed(c.recv(65536))):
            pass
        h, _ = decode_request_header(frames[0])
        body = {"error_code": 0, "api_keys": [{"api_key": 3, "min_version": 0, "max_version": 8}]}
        out = encode_response(api_versions, h.api_version, h.correlation_id, body)
        c.sendall(b"".join(frame_parts(out)))
        c.recv(65536)   # the metadata request, never answered
        c.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    conn = BrokerConnection("127.0.0.1", port, request_timeout_ms=5000).connect()
    with pytest.raises(ConnectionLost):
        conn.request(metadata, {"topics": None})
    assert not conn.connected
    t.join(5)
    srv.close()


def test_an_idle_connection_the_broker_closed_is_not_offered_again(broker):
    """The broker closes an idle connection (its connections.max.idle.ms): the client sees the
    close before it would send on the connection, so the pools connect afresh instead of losing the
    request ("closed the connection"), as Kafka's clients notice it in their poll."""
    from odradek.testing import wait_until
    conn = connect(broker)
    assert conn.connected
    for server_side in broker._conns:
        server_side.shutdown(socket.SHUT_RDWR)
    wait_until(lambda: not conn.connected, 10, "the client to see the broker's close")
    again = connect(broker)
    assert again.request(metadata, {"topics": []}, version=1).brokers   # a fresh connection works


@pytest.mark.parametrize("max_idle_ms, closes", [(0, True), (-1, False)])
def test_a_connection_idle_past_connections_max_idle_ms_is_closed_by_the_client(broker, max_idle_ms, closes):
    from odradek.testing import wait_until
    conn = BrokerConnection("127.0.0.1", broker.port, request_timeout_ms=5000, max_idle_ms=max_idle_ms).connect()
    if closes:
        wait_until(lambda: not conn.connected, 10, "the client to close its idle connection")
    else:   # never closed for idleness: still fine after the probe's second, and a request goes through
        conn._last_active -= 2   # idle for two seconds, as far as the connection knows
        assert conn.connected and conn.request(metadata, {"topics": []}, version=1).brokers
    conn.close()
