"""DirectReadServer: a plaintext connection that receives a large frame straight into its buffer.

Invariant: every byte the socket delivers reaches the connection once, in order, and no read goes
past the end of the frame in progress. While a frame with at least ``bufferSize`` (64 KiB) still to
come is in progress, the reader's ``recv_into`` fills that frame's own buffer (the protocol's
``receive_space`` / ``body_received``); otherwise Twisted's ``recv`` hands a fresh ``bytes`` of up
to 64 KiB to ``dataReceived``, as on any TCP connection. A 1 MB Produce is thus copied once, by the
kernel, into a buffer that is reused from one request to the next (``protocol/connection.py:
FrameReader``) instead of arriving as 16 chunks copied again into it.
"""
from __future__ import annotations

from typing import Any

from twisted.internet import main, tcp
from twisted.internet.tcp import EWOULDBLOCK


class DirectReadServer(tcp.Server):
    """The accepted side of a plaintext Kafka listener (``protocol`` a ``KafkaConnection``)."""

    protocol: Any

    def doRead(self) -> Any:
        protocol = self.protocol
        if protocol.reader.gathering is None:   # no frame in progress: the common case, one check
            return tcp.Server.doRead(self)
        space = protocol.receive_space()
        if space is None or len(space) < self.bufferSize:
            return tcp.Server.doRead(self)
        try:
            n = self.socket.recv_into(space)
        except OSError as e:
            if e.args[0] == EWOULDBLOCK:
                return None
            return main.CONNECTION_LOST
        if not n:
            return main.CONNECTION_DONE
        self.protocol.body_received(n)
        return None


class DirectReadPort(tcp.Port):
    """A plaintext Kafka listener: its connections are ``DirectReadServer``s."""

    transport = DirectReadServer
