"""The socket server: Kafka connections over Twisted TCP, a thin shell around the sans-IO
``protocol/connection.py:ServerConnection``.

Invariant: on each connection, requests are handled one after another in arrival order (Kafka
mutes a channel while a request is in flight), and responses leave in request order; a parked
request (long-poll fetch) holds the connection's queue. Better than Kafka: a Produce behind parked
Produces (acks=all, waiting for the ISR) is handled at once, so a producer's requests in flight
replicate together instead of one replication round trip after another; not while a client quota
is on (its throttle mutes the connection between requests) or SASL is authenticating. A frame
larger than ``socket.request.max.bytes`` closes the connection once the responses owed for the
requests before it have been sent; a CloseConnection (garbage, an acks=0 failure) closes it at
once. Either closes only that connection. The responses answered while handling one read (a
pipelining client's many requests) go out together at its end (and before any close), in order:
on a plaintext socket through its ``SocketWriter`` (one ``sendmsg``, no copy into Twisted's
buffer), on TLS as one ``writeSequence``. So do the responses of other connections that the
handling completed (a follower's Fetch that moved the high watermark completes the parked acks=all
Produces of many producers): one write per connection at the end, not one per response. On a
plaintext listener the rest of a large request is received straight into its frame's buffer
(``socket_reader.py``), and a large Produce is handled from that buffer, lent
(``protocol/connection.py:FrameReader``). A connection over the ``ConnectionQuotas`` limits is
closed as soon as it is accepted; one with no request in progress and no bytes either way for
``connections.max.idle.ms`` is closed by its factory.
On a TLS listener the socket is TLS from its first byte (Twisted's TLS over pyOpenSSL); on a SASL
listener every frame goes to the connection's ``SaslAuthenticator`` until it has authenticated
(a failure closes the connection ``connection.failed.authentication.delay.ms`` after its error
response, handling nothing more meanwhile; a SASL request that does not decode closes it at
once, as Kafka does). Each request carries the
connection's principal: the SASL user (a delegation token's owner, flagged token-authenticated),
else the client certificate's mapped DN, else ``User:ANONYMOUS``. A request throttled by a client
quota (KIP-219) mutes its connection: the response goes out at once (held back as long for request
versions older than KIP-219), then no more requests are read or handled from that connection until
the throttle time has passed. With metrics on (the factory's ``request_stats``), every answered
request is recorded once, with the instants its last byte arrived, its handler started, it parked
(if it did), its response was ready and handed to the transport (Kafka's RequestMetrics phases; a
response held back by a throttle counts as handed over when it is ready).
"""
from __future__ import annotations

import logging
from collections import deque
from functools import partial
from itertools import repeat
from time import perf_counter
from typing import Any

from twisted.internet import protocol, task
from twisted.python.failure import Failure

from odradek.protocol.connection import RequestTicket, ServerConnection
from odradek.protocol.errors import KafkaError

from ..apis.context import CloseConnection
from ..completion import Completion
from ..security.listeners import ListenerSecurity
from ..security.principal import ANONYMOUS, certificate_dn, user
from ..security.sasl_server import CredentialLookup, SaslAuthenticator, SaslFailure, TokenLookup
from .connection_quotas import ConnectionQuotas
from .request_handler import RequestHandler, completion_of, is_deferred
from .socket_buffers import USE_DEFAULT, set_buffer_sizes
from .socket_reader import DirectReadPort
from .socket_writer import SocketWriter, plain_socket

log = logging.getLogger(__name__)

MAX_QUEUED_REQUESTS = 64  # beyond this many unhandled frames we stop reading the socket
MAX_OVERLAPPED = 64       # Produces parked at once per connection; those behind wait in the queue


class _Handling:
    """How deep the reactor is in handling reads (``KafkaConnection._process`` within another's,
    through a completed parked request), and the connections whose responses wait for the
    outermost one to end (the reactor is one thread: one of these for all listeners)."""

    def __init__(self) -> None:
        self.depth = 0
        self.unflushed: dict[KafkaConnection, None] = {}


_HANDLING = _Handling()


class KafkaConnection(protocol.Protocol):
    """One client connection."""

    factory: "KafkaServerFactory | None" = None
    transport: Any  # a TCP transport (ITCPTransport and IPushProducer), set by makeConnection

    def __init__(self, handler: RequestHandler, listener: str, max_length: int,
                 security: ListenerSecurity | None = None, scram_lookup: CredentialLookup | None = None,
                 token_lookup: TokenLookup | None = None):
        self.handler = handler
        self.listener = listener
        self.conn = ServerConnection(max_length)
        self.reader = self.conn.reader   # what DirectReadServer looks at before each read
        self.security = security
        self.principal = ANONYMOUS
        self.token_authenticated = False
        self._tls_pending = security is not None and security.tls_context is not None
        self.sasl: SaslAuthenticator | None = None
        if security is not None and security.sasl is not None:
            assert scram_lookup is not None, "a SASL listener needs a SCRAM credential lookup"
            self.sasl = SaslAuthenticator(security.sasl.mechanisms, security.sasl.plain_users, scram_lookup,
                                          lambda frame: self.handler.handle(frame, self.listener, self.peer),
                                          token_lookup)
        self.peer = ""
        self.ip = ""
        self._closed = False
        self._paused = False
        self._counted = False      # holds a place in the factory's ConnectionQuotas
        self._handling = False     # in _handle_queued: an answer completed meanwhile need not re-enter it
        self._muted = False        # throttled by a client quota: nothing more is read or handled
        self._throttle: tuple[int, bool] | None = None   # set by the request handler for the next _send
        self.last_active = 0.0     # the factory clock's seconds at the last byte in or out
        self._arrivals: deque[float] = deque()   # with metrics: when each queued frame was complete
        self._out: list[bytes] = []              # responses not yet handed to the transport (see _flush)
        self._writer: SocketWriter | None = None  # a plaintext TCP connection's (see socket_writer.py)
        self._sent_timings: list[tuple] = []     # with metrics: their timings, recorded when handed over

    def connectionMade(self) -> None:
        sock = plain_socket(self.transport)
        if sock is not None:
            self._writer = SocketWriter(self.transport, sock)
        peer = self.transport.getPeer()
        self.ip = str(getattr(peer, "host", "?"))
        self.peer = f"{self.ip}:{getattr(peer, 'port', '?')}"
        factory = self.factory
        if factory is not None:
            if factory.quotas is not None:
                refused = factory.quotas.try_accept(self.listener, self.ip)
                if refused is not None:
                    log.info("refusing a connection on %s from %s: %s", self.listener, self.peer, refused)
                    self._closed = True
                    self.transport.abortConnection()
                    return
                self._counted = True
            factory.connections.add(self)
            self.last_active = factory.clock.seconds()
        try:
            self.transport.setTcpNoDelay(True)
        except Exception:
            pass

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self._closed = True
        factory = self.factory
        if factory is not None:
            factory.connections.discard(self)
            if self._counted and factory.quotas is not None:
                self._counted = False
                factory.quotas.release(self.listener, self.ip)

    def idle(self, now: float, idle_s: float) -> bool:
        """No request in progress and nothing sent or received for ``idle_s``."""
        return (not self._closed and self.conn.owed == 0 and not self._muted and self.conn.queued == 0
                and now - self.last_active > idle_s)

    def dataReceived(self, data: bytes) -> None:
        if not self._closed:
            self._received(self.conn.receive_data(data))

    def receive_space(self) -> memoryview | None:
        """``DirectReadServer``: where to receive the rest of a large frame straight into."""
        return None if self._closed else self.conn.receive_space()

    def body_received(self, n: int) -> None:
        """``DirectReadServer``: ``n`` bytes were received into ``receive_space()``."""
        if not self._closed:
            self._received(self.conn.receive_body(n))

    def _received(self, count: int) -> None:
        """Bytes were received, completing ``count`` requests: note when, then handle."""
        factory = self.factory
        if factory is not None:
            self.last_active = factory.clock.seconds()
            if count and factory.request_stats is not None:
                self._arrivals.extend(repeat(perf_counter(), count))
        self._process()
        if self.conn.queued > MAX_QUEUED_REQUESTS and not self._paused and not self._closed:
            self._paused = True
            self.transport.pauseProducing()

    # -------------------------------------------------------------- processing

    def _process(self) -> None:
        if self._handling:
            return   # the loop running below picks up whatever is handled or due now
        self._handling = True
        handling = _HANDLING
        handling.depth += 1
        try:
            self._handle_queued()
        finally:
            self._handling = False
            handling.depth -= 1
            if handling.depth:   # within another connection's handling: written when it ends
                handling.unflushed[self] = None
            else:
                self._flush()
                while handling.unflushed:
                    unflushed, handling.unflushed = handling.unflushed, {}
                    for conn in unflushed:
                        conn._flush()

    def _may_overlap(self) -> bool:
        """May a Produce be handled while Produces are parked (see the module invariant)?"""
        return (self.sasl is None or self.sasl.complete) and self.handler.produce_may_overlap()

    def _handle_queued(self) -> None:
        conn = self.conn
        while not self._closed and not self._muted and \
                (ticket := conn.next_request(0 < conn.owed < MAX_OVERLAPPED and self._may_overlap())) is not None:
            frame = ticket.frame
            if self._tls_pending:
                self._tls_principal()
            stats = self.factory.request_stats if self.factory is not None else None
            if stats is not None:
                ticket.context = (stats.kind_of(frame), self._arrivals.popleft() if self._arrivals
                                  else perf_counter(), perf_counter())
            try:
                if self.sasl is not None and not self.sasl.complete:
                    result = self._authenticate(frame)
                else:
                    result = self.handler.handle(frame, self.listener, self.peer, self.principal,
                                                 self.token_authenticated, self.throttle)
            except CloseConnection as e:
                if conn.owed > 1:   # behind parked Produces (an acks=0 failure): they are answered first
                    conn.close_now(str(e))
                    self._send(ticket, None)
                    continue
                self._close_now(str(e))
                return
            except Exception:
                log.exception("unexpected error handling a request from %s; closing the connection", self.peer)
                self._close_now("unexpected error")
                return
            if type(result) is Completion:   # an answer that comes later (or has come already)
                if result.done:   # take it without recursing
                    result = result.result
                    if isinstance(result, Failure):
                        self._failed(result)
                        return
                else:
                    if ticket.context is not None:
                        ticket.context += (perf_counter(),)
                    result.add_callback(partial(self._answered_later, ticket))
                    continue
            self._send(ticket, result)
        if self._closed:
            return
        if conn.close_reason is not None and conn.should_close:
            self._close_now(conn.close_reason)
        elif self._paused and not self._muted and conn.queued <= MAX_QUEUED_REQUESTS // 2:
            self._paused = False
            self.transport.resumeProducing()

    def _tls_principal(self) -> None:
        """An SSL client that presented a certificate is the certificate's mapped DN."""
        self._tls_pending = False
        cert = self.transport.getPeerCertificate()
        security = self.security
        if cert is None or security is None or security.principal_mapper is None:
            return
        try:
            self.principal = user(security.principal_mapper.name(certificate_dn(cert.to_cryptography())))
        except ValueError as e:
            raise CloseConnection(f"client certificate not mapped to a principal: {e}") from None

    def _authenticate(self, frame: bytes | memoryview) -> Any:
        assert self.sasl is not None
        try:
            answer = self.sasl.receive(bytes(frame))   # (a lent Produce frame is a view)
            return completion_of(answer) if is_deferred(answer) else answer   # (a credential lookup's)
        except SaslFailure as e:
            raise CloseConnection(f"SASL authentication failed: {e}") from None
        except KafkaError as e:  # a SASL request that does not decode (or a version it lacks): Kafka closes
            raise CloseConnection(f"undecodable request during SASL authentication ({e})") from None

    def _answered_later(self, ticket: RequestTicket, response: bytes | list | None | Failure) -> None:
        if isinstance(response, Failure):
            self._failed(response)
            return
        self._send(ticket, response)
        self._process()

    def _failed(self, failure: Failure) -> None:
        if failure.check(CloseConnection):
            self._close_now(str(failure.value))
        else:
            log.error("unexpected error handling a request from %s; closing the connection: %s",
                      self.peer, failure.getTraceback())
            self._close_now("unexpected error")

    def throttle(self, ms: int, hold_response: bool) -> None:
        """The request being handled is throttled: mute the connection when its response is sent."""
        self._throttle = (ms, hold_response)

    def _mute(self, ms: int, ticket: RequestTicket, held: bytes | list | None, holding: bool) -> None:
        self._muted = True
        if not self._paused:
            self.transport.pauseProducing()
        clock = self.factory.clock if self.factory is not None else _reactor()
        clock.callLater(ms / 1000.0, self._unmute, ticket, held, holding)

    def _unmute(self, ticket: RequestTicket, held: bytes | list | None, holding: bool) -> None:
        self._muted = False
        if self._closed:
            return
        if holding:
            self._send(ticket, held)
        if not self._paused:
            self.transport.resumeProducing()
        self._process()

    def _send(self, ticket: RequestTicket, response: bytes | list | None) -> None:
        timing = ticket.context
        ready = perf_counter() if timing is not None else 0.0
        if self._throttle is not None:
            (ms, hold), self._throttle = self._throttle, None
            self._mute(ms, ticket, response, hold)
            if hold:   # recorded now: a response held back by a throttle counts as handed over when ready
                if timing is not None:
                    ticket.context = None
                    self._record([(timing, ready)])
                return
        if timing is not None:
            ticket.context = (timing, ready)
        for due in self.conn.respond(ticket, response):
            if not self._closed:
                self._out += due.parts()
            if due.context is not None:
                self._sent_timings.append(due.context)
        sasl = self.sasl
        if sasl is not None and self.conn.close_reason is None:
            if sasl.principal is not None:
                self.principal = sasl.principal
                self.token_authenticated = sasl.token_authenticated
            elif sasl.failed is not None:
                self._failed_authentication(sasl.failed)

    def _flush(self) -> None:
        """Hand the answered responses to the transport in one write, then record their timings."""
        out = self._out
        if out:
            self._out = []
            if not self._closed:
                if self._writer is not None:
                    self._writer.write(out)
                else:
                    self.transport.writeSequence(out)
            if self.factory is not None:
                self.last_active = self.factory.clock.seconds()
        if self._sent_timings:
            sent, self._sent_timings = self._sent_timings, []
            self._record(sent)

    def _record(self, answered: list[tuple[tuple, float]]) -> None:
        """Record the timings of requests just handed to the transport (there are timings only
        when the factory has request stats)."""
        assert self.factory is not None
        self.factory.request_stats.record(answered, perf_counter())

    def _failed_authentication(self, why: str) -> None:
        """Handle nothing more, and close after connection.failed.authentication.delay.ms (Kafka's
        delay: it slows password guessing, and lets the client read the error before the close)."""
        log.info("Failed authentication with %s (%s)", self.peer, why)
        reason = f"SASL authentication failed: {why}"
        self._flush()   # the error response leaves before the close
        self.conn.close_now(reason)
        self._closed = True
        factory = self.factory
        if factory is not None and factory.failed_auth_delay_s > 0:
            factory.clock.callLater(factory.failed_auth_delay_s, self.transport.loseConnection)
        else:
            self.transport.loseConnection()

    def _close_now(self, reason: str) -> None:
        reason = " ".join(reason.split())  # one log line, even for a decoder's multi-line message
        log.warning("closing connection from %s: %s", self.peer, reason)
        self.close(reason)

    def close(self, reason: str) -> None:
        self._flush()   # the responses owed leave before the close
        self.conn.close_now(reason)
        self._closed = True
        self.transport.loseConnection()


def _reactor() -> Any:
    from twisted.internet import reactor
    return reactor


class KafkaServerFactory(protocol.ServerFactory):
    """Builds a KafkaConnection per accepted socket on one listener."""

    def __init__(self, handler: RequestHandler, listener: str, max_request_size: int, clock: Any = None,
                 quotas: ConnectionQuotas | None = None, idle_ms: int = 600000,
                 security: ListenerSecurity | None = None, scram_lookup: CredentialLookup | None = None,
                 failed_auth_delay_ms: int = 100, token_lookup: TokenLookup | None = None):
        self.handler = handler
        self.token_lookup = token_lookup
        self.security = security
        self.failed_auth_delay_s = failed_auth_delay_ms / 1000.0
        self.scram_lookup = scram_lookup
        self.listener = listener
        self.max_request_size = max_request_size
        self.connections: set[KafkaConnection] = set()
        if clock is None:
            from twisted.internet import reactor as clock
        self.clock = clock
        self.quotas = quotas
        self.idle_s = idle_ms / 1000.0
        self.request_stats: Any = None   # broker/metrics.py:RequestStats when metrics are on
        self._idle_check: task.LoopingCall | None = None

    def startFactory(self) -> None:
        """Listening began: look for idle connections every half connections.max.idle.ms (at most
        every 30 s), so one is closed between once and one and a half times that after its last byte."""
        check = task.LoopingCall(self.close_idle)
        check.clock = self.clock
        check.start(min(max(self.idle_s / 2, 0.05), 30.0), now=False)
        self._idle_check = check

    def stopFactory(self) -> None:
        if self._idle_check is not None and self._idle_check.running:
            self._idle_check.stop()
        self._idle_check = None

    def close_idle(self) -> None:
        now = self.clock.seconds()
        for conn in [c for c in self.connections if c.idle(now, self.idle_s)]:
            log.info("closing connection from %s on %s: idle for more than connections.max.idle.ms (%d ms)",
                     conn.peer, self.listener, int(self.idle_s * 1000))
            conn.close("idle")

    def buildProtocol(self, addr: Any) -> KafkaConnection:  # type: ignore[override]  # Twisted types it loosely
        conn = KafkaConnection(self.handler, self.listener, self.max_request_size, self.security,
                               self.scram_lookup, self.token_lookup)
        conn.factory = self
        return conn

    def close_all(self) -> None:
        for conn in list(self.connections):
            conn.transport.loseConnection()


def listen(reactor: Any, host: str, port: int, factory: KafkaServerFactory,
           send_buffer_bytes: int = USE_DEFAULT, receive_buffer_bytes: int = USE_DEFAULT) -> Any:
    """Start listening for ``factory``'s listener on ``host:port`` (port 0: any free one): TLS from
    the first byte when its security has a TLS context, else plaintext with direct reads
    (``socket_reader.py``). The listening socket gets the buffer sizes (``socket_buffers.py``),
    which every connection it accepts inherits. Raises ``CannotListenError``."""
    security = factory.security
    if security is not None and security.tls_context is not None:
        listening = reactor.listenSSL(port, factory, security.tls_context, interface=host)
    else:
        listening = DirectReadPort(port, factory, interface=host, reactor=reactor)
        listening.startListening()
    set_buffer_sizes(listening.socket, send_buffer_bytes, receive_buffer_bytes)
    return listening
