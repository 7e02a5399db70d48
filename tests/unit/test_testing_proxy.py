"""odradek.testing's TCP proxy layer on loopback: forwarding, delay, cutting, telling sources apart."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from odradek.testing.proxy import ProxyLayer, socket_owner


@pytest.fixture
def echo():
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=pump, args=(conn,), daemon=True).start()

    def pump(conn):
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


@pytest.fixture
def layer():
    layer = ProxyLayer(lambda: {"me": os.getpid()})
    yield layer
    layer.close()


def roundtrip(port: int, payload: bytes = b"ping") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            got += chunk
        return got


def test_forwards_bytes_in_order(echo, layer):
    proxy = layer.add("echo", echo)
    payload = bytes(range(256)) * 4000
    assert roundtrip(proxy.port, payload) == payload


def test_close_ends_every_connection_task():
    """Nothing is left pending on the loop (asyncio reports a task destroyed pending at exit)."""
    server = socket.create_server(("127.0.0.1", 0))
    layer = ProxyLayer()
    proxy = layer.add("idle", server.getsockname()[1])
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as client:
        upstream, _ = server.accept()   # the proxy connected through: its task is forwarding
        with upstream:
            client.sendall(b"x")
            assert upstream.recv(1) == b"x"
            layer.set_delay(proxy, 1000)
            client.sendall(b"y")   # held a second on its way: the connection's task outlives the cut
            layer.close()
    server.close()
    assert layer._loop.is_closed() and proxy._serving == set()


def test_delay_is_added_each_way(echo, layer):
    proxy = layer.add("echo", echo)
    layer.set_delay(proxy, 150)
    start = time.monotonic()
    assert roundtrip(proxy.port) == b"ping"
    assert time.monotonic() - start >= 0.3   # a lower bound: two legs of 150 ms
    layer.set_delay(proxy, 0)


def test_block_cuts_open_connections_and_refuses_new_ones(echo, layer):
    proxy = layer.add("echo", echo)
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    s.sendall(b"x")
    assert s.recv(1) == b"x"
    layer.block(proxy)
    with pytest.raises(OSError):
        s.sendall(b"y")
        if not s.recv(1):
            raise ConnectionError("closed")
    s.close()
    with pytest.raises(OSError):
        roundtrip(proxy.port)
    layer.unblock(proxy)
    assert roundtrip(proxy.port) == b"ping"


def test_a_source_is_told_apart_by_the_process_owning_the_socket(echo, layer):
    proxy = layer.add("echo", echo)
    layer.block(proxy, "me")   # this process's connections are refused ...
    with pytest.raises(OSError):
        roundtrip(proxy.port)
    other = subprocess.run([sys.executable, "-c", f"""
import socket
with socket.create_connection(("127.0.0.1", {proxy.port}), timeout=10) as s:
    s.sendall(b"hi"); print(s.recv(2).decode())
"""], capture_output=True, text=True, timeout=60)
    assert other.stdout.strip() == "hi"   # ... another process's are not
    layer.unblock(proxy, "me")
    assert roundtrip(proxy.port) == b"ping"


def test_socket_owner_finds_this_process():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    try:
        port = server.getsockname()[1]
        assert socket_owner(client.getsockname()[1], port, {"init": 1, "me": os.getpid()}) == "me"
        assert socket_owner(client.getsockname()[1], port, {"init": 1}) is None
    finally:
        client.close()
        server.close()
