"""One blocking TCP connection to one broker, with ApiVersions negotiation and pipelining.

Invariant: responses on a connection arrive in request order, so in-flight
requests live in a FIFO and every frame read completes the head of that FIFO
(its correlation id must match, or the connection is closed). Every request is
sent at ``version_for(api)`` = min(our max, broker max), refused when that is
below the broker's or our minimum. A dead socket fails every in-flight request
with a retriable ``ConnectionLost`` and the connection is never reused.

ApiVersions: v3 first; on UNSUPPORTED_VERSION (answered in v0 format) retry at
the broker's advertised max for key 18; on a disconnect retry with v0.

With ``security`` (``client/security.py``) the socket is TLS from the start and, on a SASL
listener, the connection authenticates (SaslHandshake v1, SaslAuthenticate rounds) right after
ApiVersions, before ``connect()`` returns; a refused login raises ``KafkaError``
(SASL_AUTHENTICATION_FAILED) and is not retried. Data TLS has already decrypted is read along
with the socket's, so a poll on the socket never misses a buffered response.

A connection is used by one thread at a time (its owner's).
"""
from __future__ import annotations

import select
import socket
import ssl
import time
from types import ModuleType
from typing import Any, Callable, Mapping, Sequence

from odradek.protocol.apis import api_versions as _api_versions
from odradek.protocol.connection import ClientConnection
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.sasl import SaslClient, SaslClientError, exchange

from .security import ClientSecurity

SOFTWARE_NAME = "odradek"
SOFTWARE_VERSION = "0.1.0"

# Our ceiling per API key (below the codec's own max): Produce 8, Fetch 11 are what
# the 2.8 broker advertises; the rest follow the codec.
VERSION_CAPS: dict[int, int] = {0: 8, 1: 11}
# Our floor per API key: magic-2 record batches need Produce >= 3 and Fetch >= 4.
VERSION_FLOORS: dict[int, int] = {0: 3, 1: 4}

_CHUNK = 262144
_PROBE_AFTER_S = 1.0   # a connection idle this long is checked for the broker's close before it is reused

Callback = Callable[[Any, "KafkaError | None"], None]


class ConnectionLost(KafkaError):
    """The socket broke (or never connected); retriable."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message)


class InFlightRequest:
    """A request sent and (unless acks=0) awaiting its response."""

    __slots__ = ("correlation_id", "api", "version", "sent_at", "callback", "response", "error", "done")

    def __init__(self, correlation_id: int, api: ModuleType, version: int, callback: Callback | None):
        self.correlation_id = correlation_id
        self.api = api
        self.version = version
        self.sent_at = time.monotonic()
        self.callback = callback
        self.response: Any = None
        self.error: KafkaError | None = None
        self.done = False

    def complete(self, response: Any, error: KafkaError | None) -> None:
        self.response, self.error, self.done = response, error, True
        if self.callback is not None:
            self.callback(response, error)


class BrokerConnection:
    """A connection to ``host:port`` (broker ``node_id``, -1 while bootstrapping)."""

    def __init__(self, host: str, port: int, *, node_id: int = -1, client_id: str | None = None,
                 request_timeout_ms: int = 30000, connect_timeout_ms: int = 10000,
                 send_buffer_bytes: int = 131072, receive_buffer_bytes: int = 65536,
                 security: ClientSecurity | None = None, max_idle_ms: int = 540000) -> None:
        self.host, self.port, self.node_id = host, port, node_id
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000.0
        self.connect_timeout = connect_timeout_ms / 1000.0
        self._sndbuf, self._rcvbuf = send_buffer_bytes, receive_buffer_bytes
        self._sock: socket.socket | None = None
        self._conn: ClientConnection[InFlightRequest] = ClientConnection(client_id)
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.api_versions_version: int | None = None
        self._closed_error: KafkaError | None = None
        self._chunk = bytearray(_CHUNK)
        self.security = security
        self.max_idle_ms = max_idle_ms          # connections.max.idle.ms (-1: never)
        self._last_active = time.monotonic()    # the last byte sent or received

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port}>"

    # -- lifecycle ------------------------------------------------------------

    @property
    def in_flight(self) -> Sequence[Any]:
        """The requests awaiting a response, oldest first."""
        return self._conn.in_flight

    @property
    def connected(self) -> bool:
        """Open and fit for a request. With nothing in flight, a connection idle for longer than
        ``connections.max.idle.ms`` is closed (the broker would close it soon: its own limit is
        longer by default), and one idle for a second is first checked for a close by the broker,
        which Kafka's clients notice in their poll; a request sent on either would be lost."""
        if self._sock is None or self._closed_error is not None:
            return False
        if not self._conn.in_flight:
            idle = time.monotonic() - self._last_active
            if idle >= _PROBE_AFTER_S and (0 <= self.max_idle_ms < idle * 1000 or self._peer_closed()):
                self.close(ConnectionLost(f"connection to {self.host}:{self.port} closed after {idle:.0f} s idle"))
                return False
        return True

    def _peer_closed(self) -> bool:
        """Whether the broker closed this connection, which has nothing in flight: anything it
        reads then is the close, or bytes the broker had no reason to send (a TLS record that
        holds no data, a session ticket, is neither)."""
        sock = self._sock
        assert sock is not None
        try:
            if not select.select([sock], [], [], 0)[0]:
                return False
            sock.settimeout(0)
            try:
                sock.recv(1)
            finally:
                sock.settimeout(self.request_timeout)
        except (ssl.SSLWantReadError, BlockingIOError):
            return False
        except OSError:
            pass
        return True

    def connect(self) -> "BrokerConnection":
        """Open the socket and negotiate API versions (blocking)."""
        version = _api_versions.MAX_VERSION
        while True:
            self._open_socket()
            try:
                resp = self._api_versions_request(version)
            except ConnectionLost:
                self._drop_socket()
                if version == 0:
                    raise
                version = 0  # an old broker drops the socket on an unknown ApiVersions version
                continue
            if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
                broker_max = next((k.max_version for k in resp.api_keys if k.api_key == _api_versions.API_KEY), 0)
                new_version = min(version - 1, broker_max)
                if new_version < 0:
                    self.close()
                    raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "broker rejects every ApiVersions version")
                version = new_version
                # the broker keeps the connection open after an error-35 reply
                self._drop_socket()
                continue
            if resp.error_code != ErrorCode.NONE:
                self.close()
                raise KafkaError(resp.error_code, "ApiVersions failed")
            self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            self.api_versions_version = version
            if self.security is not None and self.security.sasl_mechanism:
                self._authenticate(self.security)
            return self

    def _authenticate(self, security: ClientSecurity) -> None:
        """SASL right after ApiVersions; a refusal closes the connection and raises."""
        assert security.sasl_mechanism and security.username and security.password
        steps = exchange(SaslClient(security.sasl_mechanism, security.username, security.password,
                                    security.token_auth))
        resp = None
        try:
            while True:
                try:
                    api, version, body = steps.send(resp)
                except StopIteration:
                    return
                resp = self.request(api, body, version=version)
        except SaslClientError as exc:
            self.close()
            raise KafkaError(ErrorCode(exc.code), str(exc)) from None
        except KafkaError:
            self.close()
            raise

    def _open_socket(self) -> None:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as exc:
            raise ConnectionLost(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if self._sndbuf > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._sndbuf)
            if self._rcvbuf > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._rcvbuf)
        except OSError:
            pass
        sock.settimeout(self.request_timeout)
        if self.security is not None:
            try:
                sock = self.security.wrap(sock, self.host)
            except (OSError, ValueError) as exc:
                raise ConnectionLost(f"TLS handshake with {self.host}:{self.port} failed: {exc}") from None
        self._sock = sock
        self._closed_error = None
        self._last_active = time.monotonic()
        self._conn = ClientConnection(self.client_id, first_correlation_id=self._conn.next_correlation_id())

    def _drop_socket(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock = None
        self._conn.fail_all()

    def _api_versions_request(self, version: int) -> Any:
        """One ApiVersions round trip, blocking (before anything else is pipelined)."""
        body = {"client_software_name": SOFTWARE_NAME, "client_software_version": SOFTWARE_VERSION}
        req = self.send(_api_versions, body, version=version)
        sock = self._sock
        assert sock is not None
        deadline = time.monotonic() + self.request_timeout
        while not req.done:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConnectionLost("timed out waiting for a response")
            sock.settimeout(remaining)
            try:
                chunk = sock.recv(4096)
            except OSError as exc:
                raise ConnectionLost(f"read failed: {exc}") from None
            finally:
                sock.settimeout(self.request_timeout)
            if not chunk:
                raise ConnectionLost(f"{self.host}:{self.port} closed the connection")
            for pending, resp in self._conn.receive_data(chunk):
                pending.token.complete(resp, None)
            if self._conn.violation is not None:
                raise ConnectionLost(self._conn.violation)
        return req.response

    def close(self, error: KafkaError | None = None) -> list[InFlightRequest]:
        """Close the socket; fail and return the requests still in flight."""
        err = error or ConnectionLost(f"connection to {self.host}:{self.port} closed")
        self._closed_error = err
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        failed = [p.token for p in self._conn.fail_all()]
        for req in failed:
            req.complete(None, err)
        return failed

    def fileno(self) -> int:
        return self._sock.fileno() if self._sock is not None else -1

    # -- versions -------------------------------------------------------------

    def version_for(self, api: ModuleType, max_version: int | None = None) -> int:
        """The version to use for ``api``: min(our max, broker max), checked against both minima."""
        key = api.API_KEY
        ours_max = min(api.Request.max_version, api.Response.max_version, VERSION_CAPS.get(key, 1 << 15))
        if max_version is not None:
            ours_max = min(ours_max, max_version)
        ours_min = max(api.Request.min_version, VERSION_FLOORS.get(key, 0))
        if key not in self.api_versions:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"broker does not support {api.NAME}")
        broker_min, broker_max = self.api_versions[key]
        version = min(ours_max, broker_max)
        if version < max(ours_min, broker_min):
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                             f"no common {api.NAME} version (ours {ours_min}-{ours_max}, "
                             f"broker {broker_min}-{broker_max})")
        return version

    # -- sending --------------------------------------------------------------

    def send(self, api: ModuleType, body: Mapping[str, Any], *, version: int | None = None,
             callback: Callback | None = None, expect_response: bool = True) -> InFlightRequest:
        """Send a request (pipelined); ``callback(response, error)`` runs when it completes.

        With ``expect_response=False`` (Produce acks=0) the request completes at once.
        """
        if self._sock is None or self._closed_error is not None:
            raise self._closed_error or ConnectionLost("not connected")
        if version is None:
            version = self.version_for(api)
        req = InFlightRequest(-1, api, version, callback)
        pending, parts = self._conn.send_request(api, version, body, req, expect_response)
        req.correlation_id = pending.correlation_id
        try:
            for part in parts:
                self._sock.sendall(part)
            self._last_active = time.monotonic()
        except OSError as exc:
            if expect_response:  # it never left: the caller gets the exception, not the callback
                self._conn.in_flight.pop()
            err = ConnectionLost(f"send to {self.host}:{self.port} failed: {exc}")
            self.close(err)
            raise err from None
        if not expect_response:
            req.complete(None, None)
        return req

    def request(self, api: ModuleType, body: Mapping[str, Any], *, version: int | None = None,
                timeout: float | None = None) -> Any:
        """Send one request and block for its response (raises KafkaError on failure)."""
        req = self.send(api, body, version=version)
        deadline = time.monotonic() + (self.request_timeout if timeout is None else timeout)
        while not req.done:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                err = KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"{api.NAME} to {self.host}:{self.port}")
                self.close(err)
                raise err
            sock = self._sock
            if sock is None:
                break
            try:
                ready, _, _ = select.select([sock], [], [], remaining)
            except (OSError, ValueError):
                break
            if ready:
                self.read_responses()
        if req.error is not None:
            raise req.error
        return req.response

    # -- receiving ------------------------------------------------------------

    def read_responses(self) -> list[InFlightRequest]:
        """Read what the socket has (call when it is readable); complete finished requests."""
        sock = self._sock
        if sock is None or self._closed_error is not None:
            return []
        conn = self._conn
        try:
            space = conn.reader.body_space() if conn.reader.missing > _CHUNK else None
            if space is not None:   # a large frame: read straight into it
                n = sock.recv_into(space)
                completed = conn.receive_body(n) if n else None
            else:
                n = sock.recv_into(self._chunk)
                completed = conn.receive_data(memoryview(self._chunk)[:n]) if n else None
        except (BlockingIOError, InterruptedError, socket.timeout):
            return []
        except OSError as exc:
            self.close(ConnectionLost(f"read from {self.host}:{self.port} failed: {exc}"))
            return []
        if completed is None:
            self.close(ConnectionLost(f"{self.host}:{self.port} closed the connection"))
            return []
        self._last_active = time.monotonic()
        done = []
        for pending, resp in completed:
            pending.token.complete(resp, None)
            done.append(pending.token)
        if conn.violation is not None:
            self.close(ConnectionLost(conn.violation))
        elif isinstance(sock, ssl.SSLSocket) and sock.pending():
            done += self.read_responses()   # decrypted bytes a poll on the socket cannot see
        return done

    def expired(self, now: float | None = None) -> bool:
        """Whether the oldest in-flight request has waited longer than request.timeout.ms."""
        if not self._conn.in_flight:
            return False
        now = time.monotonic() if now is None else now
        return now - self._conn.in_flight[0].token.sent_at > self.request_timeout
