"""Requests received straight into their frame's buffer (``broker/network/socket_reader.py``) and
lent to the handler (``protocol/connection.py:FrameReader``), over a real loopback connection on a
private reactor: large Produce frames mixed with small requests, sent in one stream, reach the
handler whole and in order; a frame the handler still holds is never written over by the ones
received after it."""
from __future__ import annotations

import random
import socket
import struct

import pytest

from odradek.broker.network.socket_reader import DirectReadPort, DirectReadServer
from odradek.broker.network.socket_server import KafkaServerFactory
from odradek.protocol import header

from test_network_client import ReactorThread

LARGE = 3 << 20   # many times Twisted's 64 KiB read


def request(api_key: int, correlation_id: int, body_size: int) -> bytes:
    """A request frame (with its size): a v0 header without client id, then a body of its own."""
    frame = struct.pack(">hhih", api_key, 0, correlation_id, -1) + random.Random(correlation_id).randbytes(body_size)
    return struct.pack(">i", len(frame)) + frame


class Keeper:
    """A request handler that keeps every frame as it was handed over (the lent ones too) and
    answers each with its correlation id."""

    def __init__(self) -> None:
        self.frames: list[bytes | memoryview] = []

    def handle(self, frame: bytes | memoryview, *context: object) -> bytes:
        self.frames.append(frame)
        hdr, _ = header.decode_request_header(frame)
        return struct.pack(">i", hdr.correlation_id)

    def produce_may_overlap(self) -> bool:
        return True


@pytest.fixture
def server():
    rt = ReactorThread()
    keeper = Keeper()
    factory = KafkaServerFactory(keeper, "PLAINTEXT", 16 << 20, clock=rt.reactor)  # type: ignore[arg-type]

    def listen() -> DirectReadPort:
        port = DirectReadPort(0, factory, interface="127.0.0.1", reactor=rt.reactor)
        port.startListening()
        return port
    port = rt.call(listen)
    yield rt, keeper, factory, port.getHost().port
    rt.call(port.stopListening)
    rt.stop()


def test_large_frames_received_into_their_buffers_arrive_whole_in_order_and_stay_as_received(server):
    rt, keeper, factory, port = server
    sent = [request(0, 1, LARGE), request(18, 2, 10), request(0, 3, LARGE + 7), request(0, 4, 100),
            request(3, 5, LARGE), request(0, 6, LARGE - 1)]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        received_direct = []

        def count_direct() -> None:   # the connection's transport, and a tally of its direct reads
            (conn,) = factory.connections
            assert type(conn.transport) is DirectReadServer
            body_received = conn.body_received
            conn.body_received = lambda n: (received_direct.append(n), body_received(n))[1]
        sock.sendall(request(18, 0, 10))
        assert sock.recv(8) == struct.pack(">ii", 4, 0)
        rt.call(count_direct)
        for data in sent:   # in pieces of every size, some ending inside a size prefix
            for start in range(0, len(data), 700_001):
                sock.sendall(data[start:start + 700_001])
        for cid in range(1, 7):
            assert sock.recv(8, socket.MSG_WAITALL) == struct.pack(">ii", 4, cid)
    frames = keeper.frames[1:]
    assert [bytes(f) for f in frames] == [data[4:] for data in sent]   # all held, none written over
    assert [type(f) for f in frames] == [memoryview, bytes, memoryview, bytes, bytes, memoryview]
    assert len({id(f.obj) for f in frames if isinstance(f, memoryview)}) == 3   # each held: its own buffer
    assert sum(received_direct) > 3 * LARGE - 3 * 65536 * 2   # most of the large frames came by recv_into
