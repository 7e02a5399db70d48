"""A SASL request that does not decode, or names a version the API lacks, closes the connection
at once with one warning (as Kafka closes a request it cannot parse) — never an error traceback.
Found by the request fuzzer (docs/testing.md) against a SASL_PLAINTEXT listener."""
from __future__ import annotations

import logging
import struct

import pytest
from twisted.internet import task

from odradek.protocol.apis import sasl_authenticate, sasl_handshake
from odradek.protocol.header import encode_request

from broker_fixtures import Broker
from test_sasl_socket import _connect, _send


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


def _raw(conn, data: bytes) -> None:
    conn.dataReceived(struct.pack(">i", len(data)) + data)


AUTHENTICATE = encode_request(sasl_authenticate, 2, 2, "t", {"auth_bytes": b"\x00alice\x00pw"})
BAD_AFTER_HANDSHAKE = [
    ("SaslAuthenticate v-1", AUTHENTICATE[:2] + struct.pack(">h", -1) + AUTHENTICATE[4:]),
    ("SaslAuthenticate v-32768", AUTHENTICATE[:2] + struct.pack(">h", -32768) + AUTHENTICATE[4:]),
    ("SaslAuthenticate body cut", AUTHENTICATE[:-4]),
    ("SaslAuthenticate body garbled", AUTHENTICATE[:-14] + b"\xff\xff\xff\xff" + AUTHENTICATE[-10:]),
]


@pytest.mark.parametrize("what, frame", BAD_AFTER_HANDSHAKE, ids=[b[0] for b in BAD_AFTER_HANDSHAKE])
def test_an_undecodable_sasl_authenticate_closes_with_one_warning(broker, caplog, what, frame):
    conn, tr = _connect(broker, task.Clock(), [])
    assert _send(conn, tr, sasl_handshake, 1, {"mechanism": "PLAIN"}, 1).error_code == 0
    tr.clear()
    with caplog.at_level(logging.WARNING):
        _raw(conn, frame)
    assert tr.disconnecting and tr.value() == b""
    assert [r.levelno for r in caplog.records] == [logging.WARNING], caplog.text
    assert "Traceback" not in caplog.text


def test_an_undecodable_sasl_handshake_closes_with_one_warning(broker, caplog):
    conn, tr = _connect(broker, task.Clock(), [])
    handshake = encode_request(sasl_handshake, 1, 1, "t", {"mechanism": "PLAIN"})
    with caplog.at_level(logging.WARNING):
        _raw(conn, handshake[:-2])
    assert tr.disconnecting and tr.value() == b""
    assert [r.levelno for r in caplog.records] == [logging.WARNING], caplog.text
