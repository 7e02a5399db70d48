"""Connections that receive a large frame straight into its buffer: ``DirectReadServer`` (a
plaintext listener's, through ``DirectReadPort``) and ``DirectReadClient`` (a broker's own plaintext
connections to other brokers, through ``connect_direct``).

Invariant: every byte the socket delivers reaches the protocol once, in order, and no read goes
past the end of the frame in progress. While a frame with at least ``bufferSize`` (64 KiB) still to
come is in progress, ``recv_into`` fills that frame's own buffer (the protocol's ``reader``,
``receive_space`` and ``body_received``); otherwise ``recv`` hands a fresh ``bytes`` of up to 64 KiB
to ``dataReceived``, as Twisted's own ``doRead`` does. A 1 MB Produce or fetch response is thus
copied once, by the kernel, into a buffer that is reused from one frame to the next
(``protocol/connection.py:FrameReader``) instead of arriving as 16 chunks copied again into it.
"""
from __future__ import annotations

from typing import Any

from twisted.internet import main, tcp
from twisted.internet.tcp import EWOULDBLOCK


class DirectRead:
    """The read of a connection whose ``protocol`` has a ``reader`` (a ``FrameReader``, whose
    ``missing`` is what the frame in progress still lacks), ``receive_space()`` and
    ``body_received(n)``. Any other read is what Twisted's ``doRead`` does, with one call fewer
    (the small requests' path)."""

    protocol: Any
    socket: Any
    bufferSize: int

    def doRead(self) -> Any:
        protocol = self.protocol
        space = protocol.receive_space() if protocol.reader.missing >= self.bufferSize else None
        try:
            if space is not None:
                n = self.socket.recv_into(space)
                if not n:
                    return main.CONNECTION_DONE
                protocol.body_received(n)
                return None
            data = self.socket.recv(self.bufferSize)
        except OSError as e:
            return None if e.args[0] == EWOULDBLOCK else main.CONNECTION_LOST
        if not data:
            return main.CONNECTION_DONE
        protocol.dataReceived(data)
        return None


class DirectReadServer(DirectRead, tcp.Server):
    """The accepted side of a plaintext Kafka listener (``protocol`` a ``KafkaConnection``)."""


class DirectReadPort(tcp.Port):
    """A plaintext Kafka listener: its connections are ``DirectReadServer``s."""

    transport = DirectReadServer


class DirectReadClient(DirectRead, tcp.Client):
    """A broker's plaintext connection to another broker (``protocol`` a ``broker_client`` one)."""


class _DirectReadConnector(tcp.Connector):
    def _makeTransport(self) -> DirectReadClient:
        return DirectReadClient(self.host, self.port, self.bindAddress, self, self.reactor)


def connect_direct(reactor: Any, host: str, port: int, factory: Any, timeout: float) -> tcp.Connector:
    """``reactor.connectTCP``, with a ``DirectReadClient`` as the connection."""
    connector = _DirectReadConnector(host, port, factory, timeout, None, reactor)
    connector.connect()
    return connector
