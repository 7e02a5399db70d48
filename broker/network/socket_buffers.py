"""Socket buffer sizes as Kafka sets them: ``socket.send.buffer.bytes`` and
``socket.receive.buffer.bytes`` on every listener, ``replica.socket.receive.buffer.bytes`` on a
follower's connections to its leaders.

Invariant: -1 leaves the kernel's default, which Linux grows with the connection (autotuning);
any other value is passed to ``setsockopt`` as it is, and fixes that buffer for the socket's life
(Linux doubles it for its own bookkeeping). A listener's sizes are set on its listening socket
before it accepts anything, so every socket it accepts inherits them.
"""
from __future__ import annotations

import socket
from typing import Any

USE_DEFAULT = -1


def tcp_socket(transport: Any) -> socket.socket:
    """The TCP socket under a Twisted transport: its own, or (TLS over a memory BIO wraps the TCP
    transport, and its ``getHandle`` is the TLS connection) the wrapped transport's."""
    while not isinstance(getattr(transport, "socket", None), socket.socket):
        transport = transport.transport
    return transport.socket


def set_buffer_sizes(sock: socket.socket, send: int = USE_DEFAULT, receive: int = USE_DEFAULT) -> None:
    if send != USE_DEFAULT:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send)
    if receive != USE_DEFAULT:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive)
