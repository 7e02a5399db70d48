"""SocketWriter: a plaintext connection's frames written straight to its socket (a listener's
responses; a broker client's requests: a follower's fetches, the controller's requests).

Invariant: every byte handed to ``write`` reaches the socket once, in the order handed; nothing
goes through the transport's own buffer. A write's parts go out in one ``sendmsg`` (scatter-gather:
a fetch's records are copied into the kernel and nowhere else, and leave without waiting for the
next reactor turn). Whatever the socket does not take waits here; meanwhile the writer is the
transport's pull producer, so Twisted calls ``resumeProducing`` each time the socket is writable
again, and a ``loseConnection`` closes only after the rest has gone. Twisted's own path would copy
the parts into its buffer, join them again and send at most 128 KiB per reactor turn.
"""
from __future__ import annotations

import errno
import socket
from collections import deque
from itertools import islice
from typing import Any

from twisted.internet import tcp

IOV_MAX = 1024   # Linux's limit on the parts of one sendmsg


def plain_socket(transport: Any) -> socket.socket | None:
    """The socket of a plaintext TCP connection (a Twisted ``tcp.Server`` or ``tcp.Client``, not
    started on TLS); None for any other transport (TLS, tests' in-memory ones), which keep the
    transport's writes."""
    if isinstance(transport, tcp.Connection) and not getattr(transport, "TLS", False):
        return transport.socket
    return None


class SocketWriter:
    """Writes to ``sock``, the socket of ``transport``; see the module invariant."""

    def __init__(self, transport: Any, sock: socket.socket) -> None:
        self.transport = transport
        self.sock = sock
        self.pending: deque[bytes | memoryview] = deque()   # not yet taken by the socket, in order

    def write(self, parts: list[bytes]) -> None:
        waiting = bool(self.pending)   # then the producer is registered, and these go after
        self.pending.extend(parts)
        if not waiting and self._send():
            self.transport.registerProducer(self, False)   # calls resumeProducing at once

    def resumeProducing(self) -> None:
        """Twisted: the transport has nothing of its own to send (and, after ``startWriting``, the
        socket is writable)."""
        if self._send():
            self.transport.startWriting()
        else:
            self.transport.unregisterProducer()

    def stopProducing(self) -> None:
        """Twisted: the connection is gone."""
        self.pending.clear()

    def _send(self) -> bool:
        """Send what waits until the socket takes no more; True if something is left."""
        pending = self.pending
        while pending:
            parts = list(islice(pending, IOV_MAX))
            try:
                sent = self.sock.sendmsg(parts)
            except OSError as e:
                if e.errno in (errno.EAGAIN, errno.ENOBUFS):   # the socket takes no more for now
                    return True
                pending.clear()   # the connection is broken: Twisted sees it too and closes it
                self.transport.abortConnection()
                return False
            for part in parts:
                if sent < len(part):
                    if sent:
                        pending[0] = memoryview(part)[sent:]
                    return True
                sent -= len(part)
                pending.popleft()
        return False
