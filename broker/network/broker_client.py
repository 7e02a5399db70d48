"""BrokerClient: one Twisted connection for broker-to-broker requests (controller, fetcher),
a thin shell around the sans-IO ``protocol/connection.py:ClientConnection``.

Invariant: requests leave in ``send()`` order, each with a fresh correlation id;
responses are matched to the oldest in-flight request and must carry its correlation
id (anything else drops the connection). Every Deferred returned by ``send()`` fires
exactly once: with the decoded response, or with ``DisconnectedError`` (connection
lost while in flight), ``RequestTimedOutError`` or ``ClientClosedError``. Unsent
requests wait in a queue while the client (re)connects with exponential backoff, or,
with ``fail_when_unreachable``, fail at once with ``UnreachableError`` when a connection
attempt fails (for senders that would rather re-route than wait: the txn marker channel).
With ``security`` (the inter-broker listener's ``InterBrokerSecurity``) the connection is TLS
and/or authenticates with SASL (SaslHandshake v1, then SaslAuthenticate rounds) before any
queued request leaves; a failed authentication drops the connection and is retried like a
failed connect. Reactor thread only.
"""
from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Mapping

from twisted.internet import defer, protocol
from twisted.python.failure import Failure

from odradek.protocol.connection import ClientConnection, PendingRequest
from odradek.protocol.sasl import SaslClient, exchange

from .socket_buffers import USE_DEFAULT, set_buffer_sizes, tcp_socket
from .socket_reader import connect_direct
from .socket_writer import SocketWriter, plain_socket

log = logging.getLogger(__name__)


class BrokerClientError(Exception):
    """Base class of BrokerClient failures (all are retriable by reconnecting)."""


class DisconnectedError(BrokerClientError):
    pass


class UnreachableError(BrokerClientError):
    pass


class RequestTimedOutError(BrokerClientError):
    pass


class ClientClosedError(BrokerClientError):
    pass


@dataclass(eq=False)
class _Request:
    api: ModuleType
    version: int
    body: Mapping[str, Any]
    deferred: defer.Deferred
    timer: Any = None


class _Protocol(protocol.Protocol):
    transport: Any  # a TCP transport, set by makeConnection before connectionMade

    def __init__(self, owner: "BrokerClient"):
        self.owner = owner
        # responses lent (a fetch's records are views into the reader's buffer, appended from there)
        self.conn: ClientConnection[_Request] = ClientConnection(owner.client_id, first_correlation_id=owner._next_id,
                                                                 lend_responses=True)
        self.reader = self.conn.reader   # what DirectReadClient looks at before each read
        self.writer: SocketWriter | None = None   # a plaintext connection's (connectionMade)

    def connectionMade(self) -> None:
        # as Kafka's Selector does: a follower's fetch or a controller request goes out at once,
        # never held back by Nagle's algorithm behind an unacknowledged segment
        self.transport.setTcpNoDelay(True)
        # requests leave in the call that sends them, not a reactor turn later (socket_writer.py)
        sock = plain_socket(self.transport)
        self.writer = SocketWriter(self.transport, sock) if sock is not None else None
        if self.owner.receive_buffer_bytes != USE_DEFAULT:
            set_buffer_sizes(tcp_socket(self.transport), receive=self.owner.receive_buffer_bytes)
        self.owner._connected(self)

    def dataReceived(self, data: bytes) -> None:
        self.owner._completed(self, self.conn.receive_data(data))

    def receive_space(self) -> memoryview | None:
        """``DirectReadClient``: where to receive the rest of a large frame straight into."""
        return self.reader.body_space()

    def body_received(self, n: int) -> None:
        """``DirectReadClient``: ``n`` bytes were received into ``receive_space()``."""
        self.owner._completed(self, self.conn.receive_body(n))

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.owner._disconnected(self, reason)


class _Factory(protocol.ClientFactory):
    def __init__(self, owner: "BrokerClient"):
        self.owner = owner

    def buildProtocol(self, addr: Any) -> _Protocol:
        return _Protocol(self.owner)

    def clientConnectionFailed(self, connector: Any, reason: Failure) -> None:
        self.owner._connect_failed(reason)


class BrokerClient:
    """A reconnecting request/response client to one broker."""

    def __init__(self, reactor: Any, host: str, port: int, client_id: str | None,
                 request_timeout_ms: int = 30000, reconnect_backoff_ms: int = 50,
                 reconnect_backoff_max_ms: int = 1000, connect_timeout_s: float = 10.0,
                 fail_when_unreachable: bool = False, security: Any = None,
                 receive_buffer_bytes: int = USE_DEFAULT):
        self.reactor = reactor
        self.host, self.port = host, port
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000.0
        self._backoff_min = reconnect_backoff_ms / 1000.0
        self._backoff_max = reconnect_backoff_max_ms / 1000.0
        self._backoff = self._backoff_min
        self._connect_timeout = connect_timeout_s
        self._fail_when_unreachable = fail_when_unreachable
        self._proto: _Protocol | None = None
        self._connecting = False
        self._reconnect_call: Any = None
        self._closed = False
        self._next_id = 0   # correlation ids keep counting across reconnects
        self._unsent: deque[_Request] = deque()
        self.security = security
        self.receive_buffer_bytes = receive_buffer_bytes   # SO_RCVBUF (socket_buffers.py)

    # ------------------------------------------------------------ public

    @property
    def connected(self) -> bool:
        return self._proto is not None

    def send(self, api: ModuleType, version: int, body: Mapping[str, Any],
             timeout_ms: int | None = None) -> defer.Deferred:
        """Send ``body`` as ``api`` at ``version``; Deferred[Struct] of the response body. It times
        out after ``timeout_ms`` if given, else the client's request timeout."""
        if self._closed:
            return defer.fail(ClientClosedError(f"client to {self.host}:{self.port} is closed"))
        d: defer.Deferred = defer.Deferred()
        r = _Request(api, version, body, d)
        timeout = self.request_timeout if timeout_ms is None else timeout_ms / 1000.0
        r.timer = self.reactor.callLater(timeout, self._timed_out, r)
        self._unsent.append(r)
        self._flush()
        return d

    def close(self) -> None:
        """Fail everything pending with ClientClosedError and drop the connection."""
        if self._closed:
            return
        self._closed = True
        if self._reconnect_call is not None and self._reconnect_call.active():
            self._reconnect_call.cancel()
        self._reconnect_call = None
        exc = ClientClosedError("client closed")
        proto, self._proto = self._proto, None
        if proto is not None:
            self._fail([p.token for p in proto.conn.fail_all()], exc)
            if proto.transport is not None:
                proto.transport.loseConnection()
        self._fail(list(self._unsent), exc)
        self._unsent.clear()

    # ------------------------------------------------------------ internals

    def _flush(self) -> None:
        proto = self._proto
        if proto is None:
            self._ensure_connecting()
            return
        while self._unsent:
            r = self._unsent.popleft()
            try:
                self._write(proto, r)
            except Exception as exc:  # a body our codec cannot encode fails only its request
                self._settle(r, exc)

    def _write(self, proto: _Protocol, r: _Request) -> None:
        pending, parts = proto.conn.send_request(r.api, r.version, r.body, r)
        self._next_id = (pending.correlation_id + 1) & 0x7FFFFFFF
        if proto.writer is not None:
            proto.writer.write(parts)
        else:
            proto.transport.writeSequence(parts)

    def _ensure_connecting(self) -> None:
        if self._closed or self._connecting or self._proto is not None:
            return
        if self._reconnect_call is not None and self._reconnect_call.active():
            return
        self._connecting = True
        tls = self.security.tls_context_for if self.security is not None else None
        if tls is not None:
            self.reactor.connectSSL(self.host, self.port, _Factory(self), tls(self.host),
                                    timeout=self._connect_timeout)
        else:
            connect_direct(self.reactor, self.host, self.port, _Factory(self), self._connect_timeout)

    def _schedule_reconnect(self) -> None:
        if self._closed or not self._unsent:
            return
        delay = self._backoff
        self._backoff = min(self._backoff * 2, self._backoff_max)
        self._reconnect_call = self.reactor.callLater(delay, self._reconnect)

    def _reconnect(self) -> None:
        self._reconnect_call = None
        if self._unsent:
            self._ensure_connecting()

    def _connected(self, proto: _Protocol) -> None:
        if self._closed:
            self._connecting = False
            proto.transport.loseConnection()
            return
        if self.security is not None and self.security.sasl_mechanism:
            defer.Deferred.fromCoroutine(self._authenticate(proto))
            return
        self._ready(proto)

    def _ready(self, proto: _Protocol) -> None:
        self._connecting = False
        self._proto = proto
        self._backoff = self._backoff_min
        self._flush()

    def _exchange(self, proto: _Protocol, api: ModuleType, version: int, body: Mapping[str, Any]) -> defer.Deferred:
        """One request on a connection not yet handed to the queue (the SASL exchange)."""
        r = _Request(api, version, body, defer.Deferred())
        self._write(proto, r)
        r.timer = self.reactor.callLater(self.request_timeout, self._settle, r,
                                         RequestTimedOutError("SASL authentication timed out"))
        return r.deferred

    async def _authenticate(self, proto: _Protocol) -> None:
        """SASL on a fresh connection, before it is handed to the queue."""
        sec = self.security
        steps = exchange(SaslClient(sec.sasl_mechanism, sec.username, sec.password))
        try:
            resp = None
            while True:
                try:
                    api, version, body = steps.send(resp)
                except StopIteration:
                    break
                resp = await self._exchange(proto, api, version, body)
        except Exception as e:
            log.warning("SASL authentication to %s:%d failed: %s", self.host, self.port, e)
            proto.transport.loseConnection()
            return
        if self._closed:
            proto.transport.loseConnection()
            return
        self._ready(proto)

    def _connect_failed(self, reason: Failure) -> None:
        self._connecting = False
        log.debug("connect to %s:%d failed: %s", self.host, self.port, reason.getErrorMessage())
        if self._fail_when_unreachable:
            unsent = list(self._unsent)
            self._unsent.clear()
            self._fail(unsent, UnreachableError(f"cannot connect to {self.host}:{self.port}: "
                                                f"{reason.getErrorMessage()}"))
            return
        self._schedule_reconnect()

    def _disconnected(self, proto: _Protocol, reason: Failure) -> None:
        if self._proto is not proto:
            self._fail([p.token for p in proto.conn.fail_all()],
                       DisconnectedError(f"connection to {self.host}:{self.port} lost"))
            if self._connecting:    # lost while authenticating: try again later
                self._connecting = False
                self._schedule_reconnect()
            return
        self._proto = None
        self._connecting = False
        self._fail([p.token for p in proto.conn.fail_all()],
                   DisconnectedError(f"connection to {self.host}:{self.port} lost"))
        self._schedule_reconnect()

    def _completed(self, proto: _Protocol, done: list[tuple[PendingRequest[_Request], Any]]) -> None:
        for pending, body in done:
            self._settle(pending.token, body)
        if proto.conn.violation is not None:
            log.warning("dropping the connection to %s:%d: %s", self.host, self.port, proto.conn.violation)
            proto.transport.loseConnection()

    def _timed_out(self, r: _Request) -> None:
        r.timer = None
        exc = RequestTimedOutError(f"request to {self.host}:{self.port} timed out")
        if r in self._unsent:
            self._unsent.remove(r)
            self._settle(r, exc)
            return
        proto = self._proto
        if proto is not None and any(p.token is r for p in proto.conn.in_flight):
            # Like Kafka's NetworkClient: a timed-out in-flight request costs the connection
            # (the others in flight fail with DisconnectedError when it is gone).
            self._settle(r, exc)
            proto.transport.loseConnection()

    def _fail(self, requests: list[_Request], exc: Exception) -> None:
        for r in requests:
            self._settle(r, exc)

    @staticmethod
    def _settle(r: _Request, result: Any) -> None:
        if r.timer is not None and r.timer.active():
            r.timer.cancel()
        r.timer = None
        if r.deferred.called:
            return
        if isinstance(result, Exception):
            r.deferred.errback(result)
        else:
            r.deferred.callback(result)
