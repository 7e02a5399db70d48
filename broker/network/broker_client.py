"""BrokerClient: one Twisted connection for broker-to-broker requests (controller, fetcher).

Invariant: requests leave in ``send()`` order, each with a fresh correlation id,
framed with a 4-byte big-endian size; responses are matched to the oldest
in-flight request and must carry its correlation id (anything else drops the
connection). Every Deferred returned by ``send()`` fires exactly once: with the
decoded response, or with ``DisconnectedError`` (connection lost while in flight),
``RequestTimedOutError`` or ``ClientClosedError``. Unsent requests wait in a queue
while the client (re)connects with exponential backoff. Reactor thread only.
"""
from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Mapping

from twisted.internet import defer, protocol
from twisted.protocols.basic import Int32StringReceiver

from odradek.protocol import header

log = logging.getLogger(__name__)


class BrokerClientError(Exception):
    """Base class of BrokerClient failures (all are retriable by reconnecting)."""


class DisconnectedError(BrokerClientError):
    pass


class RequestTimedOutError(BrokerClientError):
    pass


class ClientClosedError(BrokerClientError):
    pass


@dataclass(eq=False)
class _Pending:
    api: ModuleType
    version: int
    correlation_id: int
    frame: bytes
    deferred: defer.Deferred
    timer: Any = None


class _Protocol(Int32StringReceiver):
    MAX_LENGTH = 1 << 30

    def __init__(self, owner: "BrokerClient"):
        self.owner = owner

    def connectionMade(self) -> None:
        self.owner._connected(self)

    def stringReceived(self, frame: bytes) -> None:
        self.owner._frame_received(self, frame)

    def lengthLimitExceeded(self, length: int) -> None:
        log.warning("response of %d bytes exceeds the limit", length)
        self.transport.loseConnection()

    def connectionLost(self, reason=protocol.connectionDone) -> None:
        self.owner._disconnected(self, reason)


class _Factory(protocol.ClientFactory):
    def __init__(self, owner: "BrokerClient"):
        self.owner = owner

    def buildProtocol(self, addr):
        return _Protocol(self.owner)

    def clientConnectionFailed(self, connector, reason) -> None:
        self.owner._connect_failed(reason)


class BrokerClient:
    """A reconnecting request/response client to one broker."""

    def __init__(self, reactor, host: str, port: int, client_id: str | None,
                 request_timeout_ms: int = 30000, reconnect_backoff_ms: int = 50,
                 reconnect_backoff_max_ms: int = 1000, connect_timeout_s: float = 10.0):
        self.reactor = reactor
        self.host, self.port = host, port
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000.0
        self._backoff_min = reconnect_backoff_ms / 1000.0
        self._backoff_max = reconnect_backoff_max_ms / 1000.0
        self._backoff = self._backoff_min
        self._connect_timeout = connect_timeout_s
        self._proto: _Protocol | None = None
        self._connecting = False
        self._reconnect_call = None
        self._closed = False
        self._next_id = 0
        self._unsent: deque[_Pending] = deque()
        self._inflight: deque[_Pending] = deque()

    # ------------------------------------------------------------ public

    @property
    def connected(self) -> bool:
        return self._proto is not None

    def send(self, api: ModuleType, version: int, body: Mapping[str, Any]) -> defer.Deferred:
        """Send ``body`` as ``api`` at ``version``; Deferred[Struct] of the response body."""
        if self._closed:
            return defer.fail(ClientClosedError(f"client to {self.host}:{self.port} is closed"))
        cid = self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        frame = header.encode_request(api, version, cid, self.client_id, body)
        d = defer.Deferred()
        p = _Pending(api, version, cid, frame, d)
        p.timer = self.reactor.callLater(self.request_timeout, self._timed_out, p)
        self._unsent.append(p)
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
        self._fail_all(ClientClosedError("client closed"), include_unsent=True)
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.loseConnection()
        self._proto = None

    # ------------------------------------------------------------ internals

    def _flush(self) -> None:
        if self._proto is None:
            self._ensure_connecting()
            return
        while self._unsent:
            p = self._unsent.popleft()
            self._inflight.append(p)
            self._proto.sendString(p.frame)

    def _ensure_connecting(self) -> None:
        if self._closed or self._connecting or self._proto is not None:
            return
        if self._reconnect_call is not None and self._reconnect_call.active():
            return
        self._connecting = True
        self.reactor.connectTCP(self.host, self.port, _Factory(self), timeout=self._connect_timeout)

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
        self._connecting = False
        if self._closed:
            proto.transport.loseConnection()
            return
        self._proto = proto
        self._backoff = self._backoff_min
        self._flush()

    def _connect_failed(self, reason) -> None:
        self._connecting = False
        log.debug("connect to %s:%d failed: %s", self.host, self.port, reason.getErrorMessage())
        self._schedule_reconnect()

    def _disconnected(self, proto: _Protocol, reason) -> None:
        if self._proto is not proto:
            self._connecting = False
            return
        self._proto = None
        self._connecting = False
        self._fail_all(DisconnectedError(f"connection to {self.host}:{self.port} lost"),
                       include_unsent=False)
        self._schedule_reconnect()

    def _frame_received(self, proto: _Protocol, frame: bytes) -> None:
        if not self._inflight:
            log.warning("unexpected response from %s:%d", self.host, self.port)
            proto.transport.loseConnection()
            return
        p = self._inflight[0]
        try:
            cid, body = header.decode_response(p.api, p.version, frame)
        except Exception as exc:
            log.warning("undecodable response from %s:%d: %s", self.host, self.port, exc)
            proto.transport.loseConnection()
            return
        if cid != p.correlation_id:
            log.warning("correlation id %d != expected %d from %s:%d",
                        cid, p.correlation_id, self.host, self.port)
            proto.transport.loseConnection()
            return
        self._inflight.popleft()
        self._settle(p, body)

    def _timed_out(self, p: _Pending) -> None:
        p.timer = None
        exc = RequestTimedOutError(f"request {p.correlation_id} to {self.host}:{self.port} timed out")
        if p in self._unsent:
            self._unsent.remove(p)
            self._settle(p, exc)
        elif p in self._inflight:
            # Like Kafka's NetworkClient: a timed-out in-flight request costs the connection.
            self._inflight.remove(p)
            self._settle(p, exc)
            if self._proto is not None:
                self._proto.transport.loseConnection()

    def _fail_all(self, exc: Exception, include_unsent: bool) -> None:
        doomed = list(self._inflight)
        self._inflight.clear()
        if include_unsent:
            doomed += list(self._unsent)
            self._unsent.clear()
        for p in doomed:
            self._settle(p, exc)

    @staticmethod
    def _settle(p: _Pending, result: Any) -> None:
        if p.timer is not None and p.timer.active():
            p.timer.cancel()
        p.timer = None
        if p.deferred.called:
            return
        if isinstance(result, Exception):
            p.deferred.errback(result)
        else:
            p.deferred.callback(result)
