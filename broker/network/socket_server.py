"""The socket server: Kafka connections over Twisted TCP, a thin shell around the sans-IO
``protocol/connection.py:ServerConnection``.

Invariant: on each connection, requests are handled strictly one after another in
arrival order (Kafka mutes a channel while a request is in flight), so responses
leave in request order; a parked request (long-poll fetch, acks=all produce) holds
the connection's queue. A frame larger than ``socket.request.max.bytes`` closes the
connection once the responses owed for the requests before it have been sent; a
CloseConnection (garbage, an acks=0 failure) closes it at once. Either closes only
that connection. Responses go out as one ``writeSequence``.
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer, protocol
from twisted.python.failure import Failure

from odradek.protocol.connection import ServerConnection

from ..apis.context import CloseConnection
from .request_handler import RequestHandler

log = logging.getLogger(__name__)

MAX_QUEUED_REQUESTS = 64  # beyond this many unhandled frames we stop reading the socket


class KafkaConnection(protocol.Protocol):
    """One client connection."""

    factory: "KafkaServerFactory | None" = None
    transport: Any  # a TCP transport (ITCPTransport and IPushProducer), set by makeConnection

    def __init__(self, handler: RequestHandler, listener: str, max_length: int):
        self.handler = handler
        self.listener = listener
        self.conn = ServerConnection(max_length)
        self.peer = ""
        self._closed = False
        self._paused = False

    def connectionMade(self) -> None:
        peer = self.transport.getPeer()
        self.peer = f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}"
        try:
            self.transport.setTcpNoDelay(True)
        except Exception:
            pass
        if self.factory is not None:
            self.factory.connections.add(self)

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self._closed = True
        if self.factory is not None:
            self.factory.connections.discard(self)

    def dataReceived(self, data: bytes) -> None:
        if self._closed:
            return
        self.conn.receive_data(data)
        self._process()
        if self.conn.queued > MAX_QUEUED_REQUESTS and not self._paused and not self._closed:
            self._paused = True
            self.transport.pauseProducing()

    # -------------------------------------------------------------- processing

    def _process(self) -> None:
        conn = self.conn
        while not self._closed and (frame := conn.next_request()) is not None:
            try:
                result = self.handler.handle(frame, self.listener, self.peer)
            except CloseConnection as e:
                self._close_now(str(e))
                return
            except Exception:
                log.exception("unexpected error handling a request from %s; closing the connection", self.peer)
                self._close_now("unexpected error")
                return
            if isinstance(result, defer.Deferred):
                if result.called:  # finished synchronously: take its result without recursing
                    box: list[Any] = []
                    result.addBoth(box.append)
                    result = box[0]
                    if isinstance(result, Failure):
                        self._failed(result)
                        return
                else:
                    result.addCallbacks(self._deferred_done, self._failed)
                    return
            self._send(result)
        if self._closed:
            return
        if conn.close_reason is not None and conn.should_close:
            self._close_now(conn.close_reason)
        elif self._paused and conn.queued <= MAX_QUEUED_REQUESTS // 2:
            self._paused = False
            self.transport.resumeProducing()

    def _deferred_done(self, response: bytes | None) -> None:
        self._send(response)
        self._process()

    def _failed(self, failure: Failure) -> None:
        if failure.check(CloseConnection):
            self._close_now(str(failure.value))
        else:
            log.error("unexpected error handling a request from %s; closing the connection: %s",
                      self.peer, failure.getTraceback())
            self._close_now("unexpected error")

    def _send(self, response: bytes | None) -> None:
        parts = self.conn.respond(response)
        if parts and not self._closed:
            self.transport.writeSequence(parts)

    def _close_now(self, reason: str) -> None:
        log.warning("closing connection from %s: %s", self.peer, reason)
        self.conn.close_now(reason)
        self._closed = True
        self.transport.loseConnection()


class KafkaServerFactory(protocol.ServerFactory):
    """Builds a KafkaConnection per accepted socket on one listener."""

    def __init__(self, handler: RequestHandler, listener: str, max_request_size: int):
        self.handler = handler
        self.listener = listener
        self.max_request_size = max_request_size
        self.connections: set[KafkaConnection] = set()

    def buildProtocol(self, addr: Any) -> KafkaConnection:  # type: ignore[override]  # Twisted types it loosely
        conn = KafkaConnection(self.handler, self.listener, self.max_request_size)
        conn.factory = self
        return conn

    def close_all(self) -> None:
        for conn in list(self.connections):
            conn.transport.loseConnection()
