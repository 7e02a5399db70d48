"""One blocking TCP connection to one broker, with ApiVersions negotiation and pipelining.

Invariant: responses on a connection arrive in request order, so in-flight
requests live in a FIFO and every frame read completes the head of that FIFO
(its correlation id must match, or the connection is closed). Every request is
sent at ``version_for(api)`` = min(our max, broker max), refused when that is
below the broker's or our minimum. A dead socket fails every in-flight request
with a retriable ``ConnectionLost`` and the connection is never reused.

ApiVersions: v3 first; on UNSUPPORTED_VERSION (answered in v0 format) retry at
the broker's advertised max for key 18; on a disconnect retry with v0.

A connection is used by one thread at a time (its owner's).
"""
from __future__ import annotations

import collections
import select
import socket
import struct
import time
from types import ModuleType
from typing import Any, Callable, Mapping

from odradek.protocol import header as _header
from odradek.protocol.apis import api_versions as _api_versions
from odradek.protocol.errors import ErrorCode, KafkaError

SOFTWARE_NAME = "odradek"
SOFTWARE_VERSION = "0.1.0"

# Our ceiling per API key (below the codec's own max): Produce 8, Fetch 11 are what
# the 2.8 broker advertises; the rest follow the codec.
VERSION_CAPS: dict[int, int] = {0: 8, 1: 11}
# Our floor per API key: magic-2 record batches need Produce >= 3 and Fetch >= 4.
VERSION_FLOORS: dict[int, int] = {0: 3, 1: 4}

_SIZE = struct.Struct(">i")
_CHUNK = 262144

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
                 send_buffer_bytes: int = 131072, receive_buffer_bytes: int = 65536) -> None:
        self.host, self.port, self.node_id = host, port, node_id
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000.0
        self.connect_timeout = connect_timeout_ms / 1000.0
        self._sndbuf, self._rcvbuf = send_buffer_bytes, receive_buffer_bytes
        self._sock: socket.socket | None = None
        self._next_cid = 0
        self.in_flight: collections.deque[InFlightRequest] = collections.deque()
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.api_versions_version: int | None = None
        self._closed_error: KafkaError | None = None
        # frame reader state
        self._chunk = bytearray(_CHUNK)
        self._head = bytearray()
        self._body: bytearray | None = None
        self._body_pos = 0

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port}>"

    # -- lifecycle ------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._sock is not None and self._closed_error is None

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
            return self

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
        self._sock = sock
        self._closed_error = None
        self._head = bytearray()
        self._body = None

    def _drop_socket(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock = None
        self.in_flight.clear()

    def _api_versions_request(self, version: int) -> Any:
        body = {"client_software_name": SOFTWARE_NAME, "client_software_version": SOFTWARE_VERSION}
        cid = self._correlation_id()
        frame = _header.encode_request(_api_versions, version, cid, self.client_id, body)
        self._send_frame(frame)
        reply = self._read_frame_blocking(time.monotonic() + self.request_timeout)
        got_cid = _SIZE.unpack_from(reply, 0)[0]
        if got_cid != cid:
            raise ConnectionLost(f"correlation id mismatch {got_cid} != {cid}")
        # An unsupported version is answered in v0 format: peek the error code first.
        error = struct.unpack_from(">h", reply, 4)[0] if len(reply) >= 6 else 0
        decode_version = 0 if error == ErrorCode.UNSUPPORTED_VERSION else version
        return _header.decode_response(_api_versions, decode_version, bytes(reply))[1]

    def close(self, error: KafkaError | None = None) -> list[InFlightRequest]:
        """Close the socket; fail and return the requests still in flight."""
        err = error or ConnectionLost(f"connection to {self.host}:{self.port} closed")
        self._closed_error = err
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        failed = list(self.in_flight)
        self.in_flight.clear()
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

    def _correlation_id(self) -> int:
        cid = self._next_cid
        self._next_cid = (cid + 1) & 0x7FFFFFFF
        return cid

    def _send_frame(self, frame: bytes) -> None:
        if self._sock is None or self._closed_error is not None:
            raise self._closed_error or ConnectionLost("not connected")
        try:
            if len(frame) < 65536:
                self._sock.sendall(_SIZE.pack(len(frame)) + frame)
            else:  # avoid copying a large produce request
                self._sock.sendall(_SIZE.pack(len(frame)))
                self._sock.sendall(frame)
        except OSError as exc:
            err = ConnectionLost(f"send to {self.host}:{self.port} failed: {exc}")
            self.close(err)
            raise err from None

    def send(self, api: ModuleType, body: Mapping[str, Any], *, version: int | None = None,
             callback: Callback | None = None, expect_response: bool = True) -> InFlightRequest:
        """Send a request (pipelined); ``callback(response, error)`` runs when it completes.

        With ``expect_response=False`` (Produce acks=0) the request completes at once.
        """
        if version is None:
            version = self.version_for(api)
        cid = self._correlation_id()
        frame = _header.encode_request(api, version, cid, self.client_id, body)
        req = InFlightRequest(cid, api, version, callback)
        self._send_frame(frame)
        if expect_response:
            self.in_flight.append(req)
        else:
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
            try:
                ready, _, _ = select.select([self._sock], [], [], remaining)
            except (OSError, ValueError, TypeError):
                break
            if ready:
                self.read_responses()
        if req.error is not None:
            raise req.error
        return req.response

    # -- receiving ------------------------------------------------------------

    def read_responses(self) -> list[InFlightRequest]:
        """Read what the socket has (call when it is readable); complete finished requests."""
        done: list[InFlightRequest] = []
        sock = self._sock
        if sock is None or self._closed_error is not None:
            return done
        try:
            if self._body is not None and len(self._body) - self._body_pos > _CHUNK:
                # a large frame: read straight into it
                n = sock.recv_into(memoryview(self._body)[self._body_pos:])
                if n == 0:
                    raise ConnectionLost(f"{self.host}:{self.port} closed the connection")
                self._body_pos += n
                if self._body_pos == len(self._body):
                    self._frame_done(self._body, done)
                return done
            n = sock.recv_into(self._chunk)
        except (BlockingIOError, InterruptedError, socket.timeout):
            return done
        except ConnectionLost as exc:
            self.close(exc)
            return done
        except OSError as exc:
            self.close(ConnectionLost(f"read from {self.host}:{self.port} failed: {exc}"))
            return done
        if n == 0:
            self.close(ConnectionLost(f"{self.host}:{self.port} closed the connection"))
            return done
        self._feed(memoryview(self._chunk)[:n], done)
        return done

    def _feed(self, data: memoryview, done: list[InFlightRequest]) -> None:
        pos, end = 0, len(data)
        while pos < end:
            if self._body is None:
                need = 4 - len(self._head)
                self._head += data[pos:pos + need]
                pos += min(need, end - pos)
                if len(self._head) == 4:
                    size = _SIZE.unpack(self._head)[0]
                    self._head = bytearray()
                    if size < 4:
                        self.close(ConnectionLost(f"bad frame size {size}"))
                        return
                    self._body = bytearray(size)
                    self._body_pos = 0
            else:
                take = min(len(self._body) - self._body_pos, end - pos)
                self._body[self._body_pos:self._body_pos + take] = data[pos:pos + take]
                self._body_pos += take
                pos += take
                if self._body_pos == len(self._body):
                    self._frame_done(self._body, done)
                    if self._closed_error is not None:
                        return

    def _frame_done(self, frame: bytearray, done: list[InFlightRequest]) -> None:
        self._body = None
        self._body_pos = 0
        if not self.in_flight:
            self.close(ConnectionLost("response without a request"))
            return
        req = self.in_flight.popleft()
        try:
            cid, resp = _header.decode_response(req.api, req.version, bytes(frame))
        except KafkaError as exc:
            self.in_flight.appendleft(req)
            self.close(ConnectionLost(f"undecodable {req.api.NAME} response: {exc}"))
            return
        if cid != req.correlation_id:
            self.in_flight.appendleft(req)
            self.close(ConnectionLost(f"correlation id mismatch {cid} != {req.correlation_id}"))
            return
        req.complete(resp, None)
        done.append(req)

    def _read_frame_blocking(self, deadline: float) -> bytearray:
        """One whole frame, blocking (used before any request is pipelined)."""
        sock = self._sock
        assert sock is not None
        buf = bytearray()
        need = 4
        size = None
        while True:
            while len(buf) < need:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ConnectionLost("timed out waiting for a response")
                sock.settimeout(remaining)
                try:
                    chunk = sock.recv(max(need - len(buf), 4096) if size is None else need - len(buf))
                except OSError as exc:
                    raise ConnectionLost(f"read failed: {exc}") from None
                finally:
                    sock.settimeout(self.request_timeout)
                if not chunk:
                    raise ConnectionLost(f"{self.host}:{self.port} closed the connection")
                buf += chunk
            if size is None:
                size = _SIZE.unpack_from(buf, 0)[0]
                need = 4 + size
                continue
            return buf[4:need]

    def expired(self, now: float | None = None) -> bool:
        """Whether the oldest in-flight request has waited longer than request.timeout.ms."""
        if not self.in_flight:
            return False
        now = time.monotonic() if now is None else now
        return now - self.in_flight[0].sent_at > self.request_timeout
