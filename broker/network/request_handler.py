"""Request dispatch: header → handler module → encoded response (or close).

Invariant: every frame ends in exactly one of: an encoded response (header+body,
no size prefix), None (no response: acks=0 produce), or CloseConnection, either now or later
as the value of a ``Completion`` (the CloseConnection then as a Failure): whatever a handler
answers later, through ``respond_when`` or a coroutine's Deferred, reaches the socket layer as a
Completion, its one kind of pending answer. CloseConnection is for a
garbage header, an unknown API key, an unsupported version of any API but
ApiVersions, or a body that does not decode (what Kafka does; a Metadata body may be followed
by bytes that are ignored, see TRAILING_BYTES_IGNORED). ApiVersions at an
unsupported version gets a v0-format UNSUPPORTED_VERSION reply listing our APIs.
A handler's KafkaError or unexpected exception becomes that API's error response
(unexpected ones as UNKNOWN_SERVER_ERROR, logged with a traceback): the broker
never dies of a bad request. An error message too long for its response field (one quoting
a client's 32767-character name) is sent cut to MAX_ERROR_MESSAGE characters.
While a client quota is set (``ctx.quotas.active``, ``broker/quotas/request_quotas.py``), each
handled request is recorded against its quotas before its response is encoded, and a throttle is
passed to the connection's ``throttle(ms, hold_response)``; with none set, that costs one check.
"""
from __future__ import annotations

import logging
import time
from types import ModuleType
from typing import Any, Callable

from twisted.internet import defer
from twisted.python.failure import Failure

from odradek.protocol.apis.fetch import API_KEY as FETCH_KEY
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.header import (RequestHeader, decode_request_header, encode_response, header_reader,
                                     response_encoder)
from odradek.protocol.produce_one import PRODUCE_FRAME, OnePartitionProduce, read_produce_frame
from odradek.protocol.schema import EncodeError

from .. import apis
from ..apis import api_versions
from ..apis.context import BrokerContext, CloseConnection, RequestContext, settle
from ..completion import Completion

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
_new_tuple = tuple.__new__
# Metadata: bytes after a request's last field are ignored, as Kafka's parser does (it never checks
# for them). librdkafka writes the null topic array of an all-topics Metadata v9+ request as a
# 4-byte placeholder; Kafka reads one byte of it as the array and the next ones as the two flags
# and the tag count, which is what odradek reads too. Other APIs stay strict.
TRAILING_BYTES_IGNORED = frozenset({3})
# A connection's throttle: (milliseconds, hold the response back too) -> None
Throttle = Callable[[int, bool], None]


class RequestHandler:
    """Turns request frames into response frames for one broker."""

    def __init__(self, ctx: BrokerContext, handlers: dict[int, ModuleType] | None = None):
        self.ctx = ctx
        self.handlers = apis.HANDLERS if handlers is None else handlers
        self._routes: dict[tuple[int, int], Route] = {}   # (API key, version) -> its route, once supported
        self._read_header = header_reader()   # decode_request_header in C, when built

    def handle(self, frame: bytes | memoryview, listener: str = "PLAINTEXT", peer: str = "", principal: str = "User:ANONYMOUS",
               token_authenticated: bool = False, throttle: Throttle | None = None) -> bytes | list | None | Completion:
        quotas = self.ctx.quotas
        timed = throttle is not None and quotas is not None and quotas.active
        # the common Produce, header and body read in one go (no client quota: it needs the request)
        common = None if timed or frame[:2] != PRODUCE_FRAME else read_produce_frame(frame)
        if common is not None:
            header, one = common
            offset = -1   # (not needed: the body is read)
        else:
            read = self._read_header
            got = None if read is None else read(frame)
            if got is None:   # (the C reader leaves the frames it does not read to the Python one)
                try:
                    got = decode_request_header(frame)
                except KafkaError as e:
                    raise CloseConnection(f"malformed request header ({e})") from None
            header, offset = got
        version = header.api_version
        route = self._routes.get((header.api_key, version))
        if route is None:
            route = self._route(header)
            if route is None:   # an ApiVersions at a version this broker lacks: answered in v0
                return encode_response(api_versions.API, 0, header.correlation_id,
                                       api_versions.response(ErrorCode.UNSUPPORTED_VERSION))
        if common is not None:
            rc = None if self.ctx.authorizer is None else RequestContext(
                header.api_key, version, header.correlation_id, header.client_id, listener, peer, principal,
                token_authenticated)   # what the authorizer reads
            return self._produce_one(frame, header, route, rc, one)
        try:
            req = route.decode(frame, offset, route.allow_trailing)   # the frame itself: no copy of the body
        except KafkaError as e:
            raise CloseConnection(f"undecodable {route.module.API.NAME} v{version} request ({e.message or e})") from None
        rc = _new_tuple(RequestContext, (header.api_key, version, header.correlation_id, header.client_id, listener,
                                         peer, principal, token_authenticated))   # (without __new__'s frame)
        started = time.perf_counter() if timed else 0.0
        try:
            result = route.handle(self.ctx, rc, req)
        except CloseConnection:
            raise
        except Exception as e:
            result = self._error_body(route.module, req, header, e)
        kind = type(result)
        if kind is not dict and kind is not Completion and is_deferred(result):
            result, kind = completion_of(result), Completion   # a coroutine handler's answer, or its Failure
        if kind is Completion:   # answered later: a body, or a Failure standing in for one
            if timed and throttle is not None:
                handler_s = time.perf_counter() - started
                result = settle(result, lambda body: body if isinstance(body, Failure) else
                                self._throttle(body, rc, req, len(frame), handler_s, throttle))
            return settle(result, lambda body: self._answer_later(
                body, route, header, lambda f: self._error_body(route.module, req, header, f.value, f)))
        if timed and throttle is not None:
            result = self._throttle(result, rc, req, len(frame), time.perf_counter() - started, throttle)
        return self._encode(result, route, header)

    def _answer_later(self, body: Any, route: Route, header: RequestHeader,
                      error_body: Callable[[Failure], dict | None]) -> Any:
        """The encoded answer to a body that came later, or to the Failure that came instead (its
        ``error_body``; a CloseConnection stays a Failure, for the socket layer)."""
        if isinstance(body, Failure):
            if body.check(CloseConnection):
                return body
            body = error_body(body)
        return self._encode(body, route, header)

    def _route(self, header: RequestHeader) -> Route | None:
        """The route of a header's API key and version, remembered; None for an ApiVersions at a
        version this broker lacks; CloseConnection for any other key or version it lacks."""
        module = self.handlers.get(header.api_key)
        if module is None:
            raise CloseConnection(f"unknown API key {header.api_key}")
        lo, hi = apis.version_range(module)
        if not lo <= header.api_version <= hi:
            if header.api_key == API_VERSIONS_KEY:
                return None
            raise CloseConnection(f"unsupported version {header.api_version} of {module.API.NAME} "
                                  f"(supported {lo}-{hi})")
        route = self._routes[(header.api_key, header.api_version)] = Route(module, header.api_version)
        return route

    def _produce_one(self, frame: bytes | memoryview, header: RequestHeader, route: Route,
                     rc: RequestContext | None, one: OnePartitionProduce) -> bytes | list | None | Completion:
        """The common Produce (``produce.handle_one``), taken only where nothing needs the decoded
        request (no client quota); an error is answered as ``handle`` answers it."""
        module = route.module

        def error_body(exc: BaseException, failure: Failure | None = None) -> dict | None:
            req = route.decode(frame, decode_request_header(frame)[1])
            return self._error_body(module, req, header, exc, failure)

        try:
            result = module.handle_one(self.ctx, rc, header, one)
        except CloseConnection:
            raise
        except Exception as e:
            result = error_body(e)
        if type(result) is bytes:   # the plain answer, encoded whole
            return result
        if type(result) is Completion:
            return settle(result, lambda r: r if type(r) is bytes else self._answer_later(
                r, route, header, lambda f: error_body(f.value, f)))
        return self._encode(result, route, header)

    def produce_may_overlap(self) -> bool:
        """Whether a connection may have a Produce handled while its earlier Produces are parked
        (``socket_server.py``): not while a client quota is set, whose throttle mutes a connection
        between one request and the next."""
        quotas = self.ctx.quotas
        return quotas is None or not quotas.active

    def _throttle(self, body: Any, rc: RequestContext, req: Any, size: int, handler_s: float,
                  throttle: Throttle) -> Any:
        quotas = self.ctx.quotas
        if quotas is not None and quotas.active:
            ms, hold = quotas.after_request(rc.api_key, rc.api_version, rc.client_id, rc.principal, req, body,
                                            size, handler_s)
            if ms > 0:
                throttle(ms, hold)
        return body

    def _error_body(self, module: ModuleType, req, header: RequestHeader, exc: BaseException,
                    failure: Failure | None = None) -> dict | None:
        if isinstance(exc, KafkaError):
            code = exc.code
        else:
            code = ErrorCode.UNKNOWN_SERVER_ERROR
            log.error("error handling %s v%d (correlation id %d, client %s)", module.API.NAME, header.api_version,
                      header.correlation_id, header.client_id,
                      exc_info=(type(exc), exc, failure.getTracebackObject() if failure else exc.__traceback__))
        return module.error_response(req, header.api_version, code)

    @staticmethod
    def _encode(body: dict | None, route: Route, header: RequestHeader) -> bytes | list | None:
        if body is None:
            return None
        try:
            return route.encode(header.correlation_id, body)
        except EncodeError:
            if _clip_messages(body):  # a message quoting a client's 32767-char name: answer it cut short
                return RequestHandler._encode(body, route, header)
            log.exception("cannot encode the %s v%d response", route.module.API.NAME, header.api_version)
            raise CloseConnection("response encoding failed") from None
        except Exception:
            log.exception("cannot encode the %s v%d response", route.module.API.NAME, header.api_version)
            raise CloseConnection("response encoding failed") from None


class Route:
    """One API key and version as this broker answers it, looked up once: its handler module, the
    request's decoder and the response's encoder (``RequestHandler._route``)."""

    __slots__ = ("module", "handle", "decode", "allow_trailing", "encode")

    def __init__(self, module: ModuleType, version: int) -> None:
        api = module.API
        self.module = module
        self.handle = module.handle
        self.decode = api.Request.decoder(version)
        self.allow_trailing = api.API_KEY in TRAILING_BYTES_IGNORED
        # a fetch's large records stay parts of their own (no other response carries records)
        self.encode = response_encoder(api, version, parts=api.API_KEY == FETCH_KEY)


def completion_of(d: defer.Deferred) -> Completion:
    """A Completion of what ``d`` fires with, its result or its Failure (the socket layer waits on
    Completions only)."""
    c: Completion = Completion()
    d.addBoth(c.complete)
    return c


def is_deferred(result: object) -> bool:
    """Whether a handler's result is a Deferred; a body or bytes is told by its exact type first
    (``isinstance`` against Deferred, an ``Awaitable`` ABC, costs a microsecond per request)."""
    kind = type(result)
    if kind is dict or kind is defer.Deferred or result is None or kind is list or isinstance(result, bytes):
        return kind is defer.Deferred
    return isinstance(result, defer.Deferred)


MAX_ERROR_MESSAGE = 1024  # characters of an error message kept when a response would not fit


def _clip_messages(value: object) -> bool:
    """Cut every error message inside a response body to MAX_ERROR_MESSAGE characters; whether
    any was longer (only then is a retry worth it)."""
    clipped = False
    if isinstance(value, dict):
        for key, item in value.items():
            if key.endswith("error_message") and isinstance(item, str) and len(item) > MAX_ERROR_MESSAGE:
                value[key] = item[:MAX_ERROR_MESSAGE]
                clipped = True
            elif isinstance(item, (dict, list)):
                clipped = _clip_messages(item) or clipped
    elif isinstance(value, list):
        for item in value:
            clipped = _clip_messages(item) or clipped
    return clipped
