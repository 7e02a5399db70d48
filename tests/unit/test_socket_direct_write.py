"""Responses written straight to a plaintext socket (``broker/network/socket_writer.py``), over a
real loopback connection on a private reactor: large responses that the socket takes only part of,
and responses handed over while the rest of earlier ones still waits, all arrive whole and in
request order."""
from __future__ import annotations

import random
import socket
import struct

import pytest

from odradek.broker.apis.context import CloseConnection
from odradek.broker.network.socket_server import KafkaServerFactory
from odradek.protocol import header

from test_network_client import ReactorThread

RESPONSE_SIZE = 8 << 20   # more than the server's send buffer (at most 4 MiB) and the client's receive buffer


def payload(correlation_id: int) -> bytes:
    return random.Random(correlation_id).randbytes(RESPONSE_SIZE)


class BigAnswers:
    """A request handler answering each request with a large body of its own."""

    def handle(self, frame: bytes, *context: object) -> bytes:
        hdr, _ = header.decode_request_header(frame)
        if hdr.api_key != 18:
            raise CloseConnection(f"unknown API key {hdr.api_key}")
        return struct.pack(">i", hdr.correlation_id) + payload(hdr.correlation_id)

    def produce_may_overlap(self) -> bool:
        return True


def request(correlation_id: int, api_key: int = 18) -> bytes:
    body = struct.pack(">hhih", api_key, 0, correlation_id, -1)   # an ApiVersions v0 header, no client id
    return struct.pack(">i", len(body)) + body


def read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        assert chunk, "the connection closed"
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def small_window_connection(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)   # fixed small: no autotuning
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    return sock


@pytest.fixture
def server():
    rt = ReactorThread()
    factory = KafkaServerFactory(BigAnswers(), "PLAINTEXT", 1 << 20, clock=rt.reactor)  # type: ignore[arg-type]
    port = rt.call(lambda: rt.reactor.listenTCP(0, factory, interface="127.0.0.1"))
    yield factory, port.getHost().port
    rt.call(port.stopListening)
    rt.stop()


def test_large_responses_arrive_whole_and_in_order(server):
    factory, port = server
    with small_window_connection(port) as sock:
        sock.sendall(b"".join(request(cid) for cid in range(4)))
        # the first answer started: the server's first write went out, and (an answer being larger
        # than the socket can take) the rest waits in its writer; the next four are handed over behind it
        first_length = read_exactly(sock, 4)
        (conn,) = factory.connections
        assert conn._writer is not None and conn._writer.pending   # written to directly, part still waiting
        sock.sendall(b"".join(request(cid) for cid in range(4, 8)))
        lengths = [first_length] + [b""] * 7
        for cid in range(8):
            length = struct.unpack(">i", lengths[cid] or read_exactly(sock, 4))[0]
            frame = read_exactly(sock, length)
            assert struct.unpack_from(">i", frame)[0] == cid
            assert frame[4:] == payload(cid)


def test_a_close_leaves_after_the_rest_of_the_answers_before_it(server):
    _, port = server
    with small_window_connection(port) as sock:
        sock.sendall(request(0) + request(1) + request(2, api_key=99))   # the third closes the connection
        for cid in range(2):
            length = struct.unpack(">i", read_exactly(sock, 4))[0]
            frame = read_exactly(sock, length)
            assert struct.unpack_from(">i", frame)[0] == cid and frame[4:] == payload(cid)
        assert sock.recv(1) == b""   # then the close, nothing more
