"""SASL on the socket layer (StringTransport, task.Clock): requests before authentication close
the connection, a successful login fixes the principal of every later request, and a failed one
is answered and closed connection.failed.authentication.delay.ms later, handling nothing more."""
from __future__ import annotations

import struct

import pytest
from twisted.internet import address, defer, task
from twisted.internet.testing import StringTransport

from odradek.broker.network.request_handler import RequestHandler
from odradek.broker.network.socket_server import KafkaServerFactory
from odradek.broker.security.listeners import ListenerSecurity, SaslSettings
from odradek.protocol.apis import metadata, sasl_authenticate, sasl_handshake
from odradek.protocol.header import decode_response, encode_request

from broker_fixtures import Broker


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


def _connect(broker, clock, seen_principals):
    handler = RequestHandler(broker.ctx)
    original = handler.handle

    def handle(frame, listener="PLAINTEXT", peer="", principal="User:ANONYMOUS", token_authenticated=False,
               throttle=None):
        seen_principals.append(principal)
        return original(frame, listener, peer, principal, token_authenticated, throttle)
    handler.handle = handle  # type: ignore[method-assign]
    security = ListenerSecurity("SASL_PLAINTEXT", "SASL_PLAINTEXT", sasl=SaslSettings(["PLAIN"], {"alice": "pw"}))
    factory = KafkaServerFactory(handler, "SASL_PLAINTEXT", 1 << 20, clock, security=security,
                                 scram_lookup=lambda m, u: defer.succeed(None), failed_auth_delay_ms=100)
    conn = factory.buildProtocol(None)
    tr = StringTransport(peerAddress=address.IPv4Address("TCP", "127.0.0.1", 40000))
    conn.makeConnection(tr)
    return conn, tr


def _send(conn, tr, api, version, body, cid):
    tr.clear()
    frame = encode_request(api, version, cid, "t", body)
    conn.dataReceived(struct.pack(">i", len(frame)) + frame)
    out = tr.value()
    return decode_response(api, version, out[4:])[1] if out else None


def test_a_login_gives_later_requests_its_principal(broker):
    seen: list[str] = []
    conn, tr = _connect(broker, task.Clock(), seen)
    assert _send(conn, tr, sasl_handshake, 1, {"mechanism": "PLAIN"}, 1).error_code == 0
    assert _send(conn, tr, sasl_authenticate, 2, {"auth_bytes": b"\x00alice\x00pw"}, 2).error_code == 0
    _send(conn, tr, metadata, 1, {"topics": []}, 3)
    assert seen == ["User:alice"] and conn.principal == "User:alice"


def test_a_request_before_the_handshake_closes_at_once(broker):
    conn, tr = _connect(broker, task.Clock(), [])
    assert _send(conn, tr, metadata, 1, {"topics": []}, 1) is None
    assert tr.disconnecting


def test_a_failed_login_is_answered_then_closed_after_the_delay(broker):
    clock = task.Clock()
    seen: list[str] = []
    conn, tr = _connect(broker, clock, seen)
    _send(conn, tr, sasl_handshake, 1, {"mechanism": "PLAIN"}, 1)
    answer = _send(conn, tr, sasl_authenticate, 2, {"auth_bytes": b"\x00alice\x00wrong"}, 2)
    assert answer.error_code == 58 and "Authentication failed" in answer.error_message
    assert not tr.disconnecting
    assert _send(conn, tr, metadata, 1, {"topics": []}, 3) is None      # nothing more is handled
    clock.advance(0.1)
    assert tr.disconnecting and seen == []
