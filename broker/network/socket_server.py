"""The socket server: Kafka framing over Twisted TCP, one request at a time per connection.

Invariant: on each connection, requests are handled strictly one after another in
arrival order (Kafka mutes a channel while a request is in flight), so responses
leave in request order; a parked request (long-poll fetch, acks=all produce) holds
the connection's queue. A frame larger than ``socket.request.max.bytes`` or any
CloseConnection closes only that connection. Frames are reassembled in a
bytearray (no quadratic re-concatenation of large produce requests); responses
go out as one ``writeSequence([size, frame])``.
"""
from __future__ import annotations

import logging
import struct
from collections import deque

from twisted.internet import defer, protocol
from twisted.protocols.basic import Int32StringReceiver
from twisted.python.failure import Failure

from ..apis.context import CloseConnection
from .request_handler import RequestHandler

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">I")
MAX_QUEUED_REQUESTS = 64  # beyond this many unhandled frames we stop reading the socket


class KafkaConnection(Int32StringReceiver):
    """One client connection."""

    def __init__(self, handler: RequestHandler, listener: str, max_length: int):
        self.handler = handler
        self.listener = listener
        self.MAX_LENGTH = max_length
        self.peer = ""
        self._buf = bytearray()
        self._queue: deque[bytes] = deque()
        self._busy = False
        self._closed = False
        self._paused = False

    # ---------------------------------------------------------------- framing

    def connectionMade(self) -> None:
        peer = self.transport.getPeer()
        self.peer = f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}"
        try:
            self.transport.setTcpNoDelay(True)
        except Exception:
            pass
        factory = getattr(self, "factory", None)
        if factory is not None:
            factory.connections.add(self)

    def connectionLost(self, reason=protocol.connectionDone) -> None:
        self._closed = True
        self._queue.clear()
        factory = getattr(self, "factory", None)
        if factory is not None:
            factory.connections.discard(self)

    def dataReceived(self, data: bytes) -> None:
        if self._closed:
            return
        buf = self._buf
        buf += data
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (length,) = _SIZE.unpack_from(buf, pos)
            if length > self.MAX_LENGTH:
                self.lengthLimitExceeded(length)
                return
            if end - pos - 4 < length:
                break
            self._queue.append(bytes(buf[pos + 4:pos + 4 + length]))
            pos += 4 + length
        if pos:
            del buf[:pos]
        if self._queue and not self._busy:
            self._process()
        if len(self._queue) > MAX_QUEUED_REQUESTS and not self._paused and not self._closed:
            self._paused = True
            self.transport.pauseProducing()

    def lengthLimitExceeded(self, length: int) -> None:
        log.warning("closing connection from %s: request of %d bytes exceeds socket.request.max.bytes (%d)",
                    self.peer, length, self.MAX_LENGTH)
        self._close()

    def stringReceived(self, frame: bytes) -> None:  # kept for Int32StringReceiver compatibility
        self._queue.append(frame)
        if not self._busy:
            self._process()

    # -------------------------------------------------------------- processing

    def _process(self) -> None:
        while self._queue and not self._closed:
            frame = self._queue.popleft()
            try:
                result = self.handler.handle(frame, self.listener, self.peer)
            except CloseConnection as e:
                self._close(str(e))
                return
            except Exception:
                log.exception("unexpected error handling a request from %s; closing the connection", self.peer)
                self._close()
                return
            if isinstance(result, defer.Deferred):
                if result.called:  # finished synchronously: take its result without recursing
                    box: list = []
                    result.addBoth(box.append)
                    result = box[0]
                    if isinstance(result, Failure):
                        self._failed(result)
                        return
                else:
                    self._busy = True
                    result.addCallbacks(self._deferred_done, self._failed)
                    return
            self._send(result)
        if self._paused and not self._closed and len(self._queue) <= MAX_QUEUED_REQUESTS // 2:
            self._paused = False
            self.transport.resumeProducing()

    def _deferred_done(self, response: bytes | None) -> None:
        self._busy = False
        self._send(response)
        self._process()

    def _failed(self, failure: Failure) -> None:
        self._busy = False
        if failure.check(CloseConnection):
            self._close(str(failure.value))
        else:
            log.error("unexpected error handling a request from %s; closing the connection: %s",
                      self.peer, failure.getTraceback())
            self._close()

    def _send(self, response: bytes | None) -> None:
        if response is not None and not self._closed:
            self.transport.writeSequence([_SIZE.pack(len(response)), response])

    def _close(self, reason: str | None = None) -> None:
        if reason:
            log.warning("closing connection from %s: %s", self.peer, reason)
        self._closed = True
        self._queue.clear()
        self.transport.loseConnection()


class KafkaServerFactory(protocol.ServerFactory):
    """Builds a KafkaConnection per accepted socket on one listener."""

    def __init__(self, handler: RequestHandler, listener: str, max_request_size: int):
        self.handler = handler
        self.listener = listener
        self.max_request_size = max_request_size
        self.connections: set[KafkaConnection] = set()

    def buildProtocol(self, addr) -> KafkaConnection:
        conn = KafkaConnection(self.handler, self.listener, self.max_request_size)
        conn.factory = self
        return conn

    def close_all(self) -> None:
        for conn in list(self.connections):
            conn.transport.loseConnection()
