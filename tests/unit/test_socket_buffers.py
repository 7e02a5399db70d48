"""Socket buffer sizes (``broker/network/socket_buffers.py``), on real loopback sockets: a listener's
``socket.send.buffer.bytes`` / ``socket.receive.buffer.bytes`` reach every connection it accepts, -1
leaves the kernel's default, and a follower's connection takes ``replica.socket.receive.buffer.bytes``.
Linux reports twice the size set (the rest is its own bookkeeping)."""
from __future__ import annotations

import socket
import time

import pytest

from odradek.broker.config.kafka_config import KafkaConfig
from odradek.broker.network.broker_client import BrokerClient
from odradek.broker.network.socket_buffers import tcp_socket
from odradek.broker.network.socket_server import KafkaServerFactory, listen
from odradek.broker.security.listeners import InterBrokerSecurity, ListenerSecurity
from odradek.testing.certificates import make_tls_files

from test_network_client import ReactorThread
from test_socket_direct_write import BigAnswers


def buffers(sock: socket.socket) -> tuple[int, int]:
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF), sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


def kernel_defaults() -> tuple[tuple[int, int], tuple[int, int]]:
    """(send, receive) buffers of a connection accepted by a listener left alone, and of the
    socket that connected to it: what -1 must leave."""
    with socket.create_server(("127.0.0.1", 0)) as server, \
            socket.create_connection(server.getsockname(), timeout=10) as client:
        accepted, _ = server.accept()
        with accepted:
            return buffers(accepted), buffers(client)


def wait_for(condition, what: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)
    return found


@pytest.fixture
def rt():
    r = ReactorThread()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def tls_config(tmp_path_factory) -> KafkaConfig:
    files = make_tls_files(tmp_path_factory.mktemp("tls"))
    return KafkaConfig({"zookeeper.connect": "127.0.0.1:1", "listeners": "SSL://127.0.0.1:0",
                        "security.inter.broker.protocol": "SSL", "ssl.keystore.type": "PEM",
                        "ssl.keystore.location": str(files.broker.keystore), "ssl.truststore.type": "PEM",
                        "ssl.truststore.location": str(files.ca)})


def server_factory(rt: ReactorThread, config: KafkaConfig | None) -> KafkaServerFactory:
    """A listener's factory: plaintext, or TLS from ``config``'s SSL listener."""
    security = None if config is None else ListenerSecurity.for_listener(config, "SSL")
    return KafkaServerFactory(BigAnswers(), "PLAINTEXT" if config is None else "SSL", 1 << 20,  # type: ignore[arg-type]
                              clock=rt.reactor, security=security)


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
@pytest.mark.parametrize("send, receive", [(70000, 50000), (-1, -1)])
def test_a_listeners_buffer_sizes_reach_the_connections_it_accepts(rt, tls_config, tls, send, receive):
    factory = server_factory(rt, tls_config if tls else None)
    port = rt.call(lambda: listen(rt.reactor, "127.0.0.1", 0, factory, send, receive))
    try:
        with socket.create_connection(("127.0.0.1", port.getHost().port), timeout=10):
            (conn,) = wait_for(lambda: list(factory.connections), "the connection to be accepted")
            accepted = rt.call(lambda: buffers(tcp_socket(conn.transport)))
        default = kernel_defaults()[0]
        assert accepted == (default[0] if send == -1 else 2 * send, default[1] if receive == -1 else 2 * receive)
    finally:
        rt.call(port.stopListening)


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
@pytest.mark.parametrize("receive", [50000, -1])
def test_a_followers_connection_takes_its_receive_buffer_size(rt, tls_config, tls, receive):
    factory = server_factory(rt, tls_config if tls else None)
    port = rt.call(lambda: listen(rt.reactor, "127.0.0.1", 0, factory))
    client = BrokerClient(rt.reactor, "127.0.0.1", port.getHost().port, "fetcher", receive_buffer_bytes=receive,
                          security=InterBrokerSecurity.from_config(tls_config) if tls else None)
    try:
        rt.call(client._ensure_connecting)
        wait_for(lambda: client.connected, "the client to connect")
        received = rt.call(lambda: buffers(tcp_socket(client._proto.transport))[1])   # type: ignore[union-attr]
        assert received == (kernel_defaults()[1][1] if receive == -1 else 2 * receive)
    finally:
        rt.call(client.close)
        rt.call(port.stopListening)
