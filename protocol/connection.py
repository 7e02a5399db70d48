"""The Kafka connection, sans-IO: framing, correlation ids and in-flight requests, for both ends.

Invariant: bytes go in (``receive_data``) and come out (the parts a caller writes) in order; no
socket, thread or reactor is touched here, so the broker's Twisted server and client, odradek's
blocking clients and the test fakes all frame, match and queue the same way.

- ``FrameReader`` cuts ``int32 size + frame`` units out of a stream. A size above
  ``max_frame_size`` (``socket.request.max.bytes`` on a broker) or below zero stops the reader:
  the frames before it are still delivered, ``oversize`` holds the size, and nothing after it
  is read. A frame that arrives whole in one chunk costs one copy (the run of whole frames in a
  chunk is cut in one C call, ``_frames.c:cut``, where that is built); a larger one is gathered
  into a buffer of its final size (no re-concatenation), which the caller may fill straight from
  the socket (``body_space``). A reader with a ``lend`` rule hands out the large frames it picks
  as writable views of that buffer instead of copies (a broker's Produce requests, whose batches
  the log stamps in place and appends from there; the fetch responses a follower appends), and
  reuses the buffer only once nothing holds a view of it any more.
- ``ClientConnection`` (the requesting side) gives each request the next correlation id,
  keeps the requests awaiting a response in a FIFO, and matches every response to the oldest
  of them: a response whose correlation id differs, that does not decode, or that nobody
  asked for sets ``violation`` (the responses matched before it are still returned) and the
  caller must close the connection. An
  ApiVersions error answered in the v0 layout (UNSUPPORTED_VERSION) is decoded as v0.
- ``ServerConnection`` (the answering side) hands out request frames in arrival order, each as a
  ``RequestTicket``, one at a time (Kafka mutes a channel while a request is in flight), except
  that, when the caller allows it, a Produce is handed out while only Produces are owed (one
  parked for acks=all does not hold back the appends of those behind it). Responses leave in
  request order whatever order they are given in: ``respond`` returns the tickets now due.
  ``close_after_owed`` (an oversize frame, a handler's CloseConnection) lets the responses
  already owed leave before the close.
"""
from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from sys import getrefcount
from types import ModuleType
from typing import Any, Callable, Generic, Mapping, TypeVar

from . import header as _header
from .errors import ErrorCode, KafkaError

_SIZE = struct.Struct(">i")
_I16 = struct.Struct(">h")
API_VERSIONS_KEY = 18
SMALL_FRAME = 65536  # below this a size prefix is joined to its frame; above, written apart
MAX_SPARE = 16 << 20  # a gathering buffer up to this size is kept for the next large frame
LEND_FROM = 65536     # a frame this large may be lent (a view of the gathering buffer), not copied
# the references to the spare buffer while nothing else holds it: the reader's, a local name's
# and getrefcount's argument (a view of it holds one more, through its managed buffer)
_UNSHARED = 3

T = TypeVar("T")

_cut: Callable[[bytes | memoryview, int, int, list[bytes | memoryview]], int] | None
try:   # whole frames cut in C (_frames.c), exactly as the loop in FrameReader.feed cuts them
    from ._frames import cut as _cut
except ImportError:   # built without a C compiler
    _cut = None


class ProtocolViolation(Exception):
    """The peer broke the framing or the request/response pairing: close the connection."""


def frame_parts(frame: bytes) -> list[bytes]:
    """What to write for one frame: size prefix and frame, joined when small (one write),
    apart when large (no copy of a large frame)."""
    size = _SIZE.pack(len(frame))
    return [size + frame] if len(frame) < SMALL_FRAME else [size, frame]


def frame_of_parts(parts: list[Any]) -> list[Any]:
    """What to write for one frame given as parts (``header.response_encoder(..., parts=True)``): the size
    prefix joined to the first part (the response header and fields before the records), then
    the other parts as they are."""
    return [_SIZE.pack(sum(map(len, parts))) + parts[0], *parts[1:]]


class FrameReader:
    """Reassembles size-prefixed frames from a byte stream."""

    __slots__ = ("max_frame_size", "lend", "oversize", "_head", "_body", "_size", "missing", "_spare")

    def __init__(self, max_frame_size: int, lend: Callable[[bytearray], bool] | None = None) -> None:
        self.max_frame_size = max_frame_size
        self.lend = lend                   # which large frames come out as views (see the module doc)
        self.oversize: int | None = None   # the size of the frame that stopped the reader
        self._head = b""                   # a partial size prefix
        self._body: bytearray | None = None  # gathers the frame in progress (may be longer)
        self._size = 0                     # ... whose size is this
        self.missing = 0                   # ... and this much of it is still to come (0: none in progress)
        self._spare: bytearray | None = None  # the last gathering buffer, reused (no fresh pages)

    @property
    def buffered(self) -> int:
        """Bytes held for a frame not yet complete."""
        return len(self._head) + self._size - self.missing

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes | memoryview]:
        """The frames completed by ``data``, in order (without their size prefix)."""
        if type(data) is bytes and self._body is None and not self._head and len(data) >= 4:
            (size,) = _SIZE.unpack_from(data, 0)   # the common case: exactly one whole frame
            if len(data) == size + 4 and self.oversize is None and size <= self.max_frame_size:
                return [data[4:]]
        frames: list[bytes | memoryview] = []
        if self.oversize is not None:
            return frames
        # bytes are sliced as they are (one copy per frame); anything else through a memoryview
        view: bytes | memoryview = data if type(data) is bytes else memoryview(data)
        pos, end = 0, len(view)
        while pos < end:
            body = self._body
            if body is not None:  # filling a frame that started in an earlier chunk
                take = min(self.missing, end - pos)
                filled = self._size - self.missing
                body[filled:filled + take] = view[pos:pos + take]
                self.missing -= take
                pos += take
                if self.missing:
                    break
                frames.append(self._finish())
                continue
            if self._head:
                need = 4 - len(self._head)
                if end - pos < need:
                    self._head += bytes(view[pos:end])
                    break
                (size,) = _SIZE.unpack(self._head + bytes(view[pos:pos + need]))
                self._head = b""
                pos += need
            elif end - pos < 4:
                self._head = bytes(view[pos:end])
                break
            elif _cut is not None and (stop := _cut(view, pos, self.max_frame_size, frames)) != pos:
                pos = stop   # whole frames, cut in C; what follows them is taken on the next turn
                continue
            else:
                (size,) = _SIZE.unpack_from(view, pos)
                pos += 4
            if size < 0 or size > self.max_frame_size:
                self.oversize = size
                break
            if end - pos >= size:
                frame = view[pos:pos + size]
                frames.append(frame if type(frame) is bytes else bytes(frame))
                pos += size
            else:
                self._start(size)
        return frames

    def body_space(self) -> memoryview | None:
        """The unfilled rest of a frame in progress, to receive straight into (``recv_into``)
        and then report with ``body_filled``; None when no frame is in progress."""
        return None if self._body is None else memoryview(self._body)[self._size - self.missing:self._size]

    def body_filled(self, n: int) -> list[bytes | memoryview]:
        """``n`` bytes were written into ``body_space()``: the frame, if that completed it."""
        assert self._body is not None and 0 <= n <= self.missing
        self.missing -= n
        return [] if self.missing else [self._finish()]

    def _start(self, size: int) -> None:
        spare = self._spare
        if spare is None or len(spare) < size or getrefcount(spare) > _UNSHARED:
            spare = bytearray(size)   # none yet, too small, or a frame lent from it is still held
        self._body, self._size, self.missing = spare, size, size

    def _finish(self) -> bytes | memoryview:
        body, size = self._body, self._size
        assert body is not None
        self._spare = body if len(body) <= MAX_SPARE else None
        self._body, self._size, self.missing = None, 0, 0
        if self.lend is not None and size >= LEND_FROM and self.lend(body):
            return memoryview(body)[:size]
        return bytes(memoryview(body)[:size])


@dataclass(eq=False, slots=True)
class PendingRequest(Generic[T]):
    """A request awaiting its response; ``token`` is the caller's (a Deferred, a callback ...)."""
    correlation_id: int
    api: ModuleType
    version: int
    token: T


class ClientConnection(Generic[T]):
    """The requesting end of one connection."""

    def __init__(self, client_id: str | None, max_frame_size: int = 0x7FFFFFFF,
                 first_correlation_id: int = 0, lend_responses: bool = False) -> None:
        self.client_id = client_id
        # lent responses: their RECORDS are views into the reader's buffer (a follower's fetches)
        self.reader = FrameReader(max_frame_size, _every_frame if lend_responses else None)
        self.in_flight: deque[PendingRequest[T]] = deque()
        self.violation: str | None = None  # set once the peer broke the protocol: close
        self._next_id = first_correlation_id & 0x7FFFFFFF

    def next_correlation_id(self) -> int:
        cid = self._next_id
        self._next_id = (cid + 1) & 0x7FFFFFFF
        return cid

    def send_request(self, api: ModuleType, version: int, body: Mapping[str, Any], token: T,
                     expect_response: bool = True) -> tuple[PendingRequest[T], list[bytes]]:
        """Encode a request: the pending entry (queued when a response is expected) and the
        parts to write. Encoding errors raise before anything is queued."""
        cid = self.next_correlation_id()
        frame = _header.encode_request(api, version, cid, self.client_id, body)
        pending = PendingRequest(cid, api, version, token)
        if expect_response:
            self.in_flight.append(pending)
        return pending, frame_parts(frame)

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[tuple[PendingRequest[T], Any]]:
        """The requests completed by ``data``, each with its decoded response body."""
        return self._complete(self.reader.feed(data))

    def receive_body(self, n: int) -> list[tuple[PendingRequest[T], Any]]:
        """``n`` bytes were received into ``reader.body_space()``: the requests completed."""
        return self._complete(self.reader.body_filled(n))

    def _complete(self, frames: list[bytes | memoryview]) -> list[tuple[PendingRequest[T], Any]]:
        done: list[tuple[PendingRequest[T], Any]] = []
        if self.violation is not None:
            return done
        try:
            for frame in frames:
                done.append(self._match(frame))
            if self.reader.oversize is not None:
                raise ProtocolViolation(f"response frame of {self.reader.oversize} bytes")
        except ProtocolViolation as exc:
            self.violation = str(exc)
        return done

    def fail_all(self) -> list[PendingRequest[T]]:
        """Forget every in-flight request (the connection is gone) and return them, oldest first."""
        failed = list(self.in_flight)
        self.in_flight.clear()
        return failed

    def _match(self, frame: bytes | memoryview) -> tuple[PendingRequest[T], Any]:
        if not self.in_flight:
            raise ProtocolViolation("a response without a request")
        pending = self.in_flight[0]
        version = pending.version
        if pending.api.API_KEY == API_VERSIONS_KEY and len(frame) >= 6 \
                and _I16.unpack_from(frame, 4)[0] == ErrorCode.UNSUPPORTED_VERSION:
            version = 0  # an unsupported ApiVersions version is answered in the v0 layout
        try:
            cid, body = _header.decode_response(pending.api, version, frame)
        except KafkaError as exc:
            raise ProtocolViolation(f"undecodable {pending.api.NAME} v{version} response: {exc}") from None
        if cid != pending.correlation_id:
            raise ProtocolViolation(f"correlation id {cid} != expected {pending.correlation_id}")
        self.in_flight.popleft()
        return pending, body


_PRODUCE_KEY = b"\x00\x00"   # Produce's api key (0), as a request frame begins


def _is_produce(frame: bytes | bytearray | memoryview) -> bool:
    return frame[:2] == _PRODUCE_KEY


def _every_frame(frame: bytearray) -> bool:
    return True


class RequestTicket:
    """One request handed out by a ServerConnection: its frame, then its response once given;
    ``context`` is the caller's (the broker keeps the request's timings there)."""

    __slots__ = ("frame", "produce", "answered", "response", "context")

    def __init__(self, frame: bytes | memoryview) -> None:
        self.frame = frame   # a large Produce's is a view lent by the reader (see FrameReader)
        self.produce = frame[:2] == _PRODUCE_KEY   # _is_produce, without a call per request
        self.answered = False
        self.response: bytes | list[Any] | None = None   # a list: parts (``frame_of_parts``)
        self.context: Any = None

    def parts(self) -> list[Any]:
        """What to write for its response (nothing for none)."""
        response = self.response
        if response is None:
            return []
        return frame_of_parts(response) if isinstance(response, list) else frame_parts(response)


@dataclass(eq=False)
class ServerConnection:
    """The answering end of one connection: request frames in, responses out, in order."""
    max_frame_size: int
    reader: FrameReader = field(init=False)
    close_reason: str | None = field(default=None, init=False)
    _queue: deque[bytes | memoryview] = field(default_factory=deque, init=False)
    _owed: deque[RequestTicket] = field(default_factory=deque, init=False)   # handed out, in order

    def __post_init__(self) -> None:
        self.reader = FrameReader(self.max_frame_size, _is_produce)

    @property
    def queued(self) -> int:
        """Request frames received and not yet handed out."""
        return len(self._queue)

    @property
    def owed(self) -> int:
        """Requests handed out whose responses have not all left yet."""
        return len(self._owed)

    def receive_data(self, data: bytes | bytearray | memoryview) -> int:
        """Bytes read: how many requests they completed."""
        if self.close_reason is not None:
            return 0
        frames = self.reader.feed(data)
        self._queue.extend(frames)
        if self.reader.oversize is not None:
            self.close_after_owed(f"request of {self.reader.oversize} bytes exceeds "
                                  f"socket.request.max.bytes ({self.max_frame_size})")
        return len(frames)

    def receive_space(self) -> memoryview | None:
        """The unfilled rest of the frame in progress, to receive straight into and report with
        ``receive_body``; None when no frame is in progress or nothing more is read."""
        return None if self.close_reason is not None else self.reader.body_space()

    def receive_body(self, n: int) -> int:
        """``n`` bytes were received into ``receive_space()``: how many requests they completed."""
        frames = self.reader.body_filled(n)
        self._queue.extend(frames)
        return len(frames)

    def next_request(self, overlap_produce: bool = False) -> RequestTicket | None:
        """The next request to handle, or None while one is owed or none waits; with
        ``overlap_produce``, a Produce is handed out while every request owed is a Produce."""
        queue = self._queue
        if not queue:
            return None
        # what is owed is either Produces only or a single request of another kind (nothing is
        # handed out behind one), so the first owed tells which
        if self._owed and not (overlap_produce and self._owed[0].produce and _is_produce(queue[0])):
            return None
        ticket = RequestTicket(queue.popleft())
        self._owed.append(ticket)
        return ticket

    def respond(self, ticket: RequestTicket, response: bytes | list[Any] | None) -> list[RequestTicket]:
        """Give ``ticket``'s response (None: no response); the tickets whose responses are now
        due, in request order (none while an earlier request is still unanswered)."""
        ticket.answered, ticket.response = True, response
        owed = self._owed
        if len(owed) == 1 and owed[0] is ticket:   # the common case: the only request owed
            owed.popleft()
            return [ticket]
        due = []
        while owed and owed[0].answered:
            due.append(owed.popleft())
        return due

    def close_after_owed(self, reason: str) -> None:
        """Answer what was received before this point, then close; read nothing more."""
        if self.close_reason is None:
            self.close_reason = reason

    def close_now(self, reason: str) -> None:
        """Close at once: nothing more is handled (a request that cannot be answered)."""
        self.close_after_owed(reason)
        self._queue.clear()

    @property
    def should_close(self) -> bool:
        """True once a close was asked for and every owed response has been given."""
        return self.close_reason is not None and not self._owed and not self._queue
