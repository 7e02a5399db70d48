"""ControllerChannelManager: one BrokerClient and one ordered request queue per live broker.

Invariant: requests to a broker leave in the order the controller queued them
(LeaderAndIsr before UpdateMetadata before StopReplica of one batch), pipelined on one
connection: a request is written as soon as it is queued, without waiting for the
answer to the one before. The broker serves one connection's controller requests one
at a time in arrival order, so each is applied after those queued before it, as with
Kafka's one-at-a-time RequestSendThread, without a round trip (and the controller's own
busy reactor) between them. Answers are handed to ``on_response(request, body)`` in
queue order. When a request fails on the network, the client is closed (nothing sent
through it is written afterwards), and after a backoff every unanswered request is sent
again, in order, on a new client; this goes on for as long as the broker stays in the
channel, and its requests are dropped when it is removed. A request failed by anything but
the network (its body could not be encoded) is logged and dropped. Reactor thread only.
"""
from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from twisted.internet import defer, task

from odradek.broker.network.broker_client import BrokerClient, BrokerClientError
from odradek.zk.znodes import BrokerInfo

from .request_batch import OutRequest

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Sent:
    request: OutRequest
    answer: defer.Deferred | None = None   # None: not written on the current client


@dataclass(eq=False)
class _BrokerChannel:
    info: BrokerInfo
    client: Any
    queue: deque[_Sent] = field(default_factory=deque)   # unanswered, in order
    pumping: bool = False
    retrying: bool = False   # waiting out a backoff: hold new requests back
    removed: bool = False


class ControllerChannelManager:
    def __init__(self, reactor, controller_id: int, listener: str = "PLAINTEXT",
                 on_response: Callable[[OutRequest, Any], None] | None = None,
                 client_factory: Callable[..., Any] = BrokerClient, retry_backoff_s: float = 0.1,
                 request_timeout_ms: int = 30000):
        self.reactor = reactor
        self.controller_id = controller_id
        self.listener = listener
        self.on_response = on_response
        self.client_factory = client_factory
        self.retry_backoff_s = retry_backoff_s
        self.request_timeout_ms = request_timeout_ms
        self.channels: dict[int, _BrokerChannel] = {}

    def _endpoint(self, info: BrokerInfo):
        try:
            return info.endpoint(self.listener)
        except KeyError:
            log.error("broker %d has no endpoint for listener %s; using %s", info.id, self.listener,
                      info.endpoint().listener)
            return info.endpoint()

    def add_broker(self, info: BrokerInfo) -> None:
        old = self.channels.get(info.id)
        if old is not None:
            if old.info.endpoints == info.endpoints and old.info.epoch == info.epoch:
                return
            self.remove_broker(info.id)
        self.channels[info.id] = _BrokerChannel(info, self._new_client(info))

    def _new_client(self, info: BrokerInfo) -> Any:
        ep = self._endpoint(info)
        return self.client_factory(self.reactor, ep.host, ep.port,
                                   f"controller-{self.controller_id}-to-broker-{info.id}",
                                   request_timeout_ms=self.request_timeout_ms)

    def remove_broker(self, broker_id: int) -> None:
        ch = self.channels.pop(broker_id, None)
        if ch is not None:
            ch.removed = True
            ch.queue.clear()
            ch.client.close()

    def send(self, requests: list[OutRequest]) -> None:
        for req in requests:
            ch = self.channels.get(req.broker_id)
            if ch is None:
                log.debug("dropping %s to broker %d: not connected", req.api, req.broker_id)
                continue
            sent = _Sent(req)
            ch.queue.append(sent)
            if not ch.retrying:
                self._write(ch, sent)
            if not ch.pumping:
                ch.pumping = True
                defer.Deferred.fromCoroutine(self._pump(ch)).addErrback(
                    lambda f: log.error("channel pump failed: %s", f.getTraceback()))

    @staticmethod
    def _write(ch: _BrokerChannel, sent: _Sent) -> None:
        req = sent.request
        sent.answer = ch.client.send(req.api_module, req.version, req.body)

    async def _pump(self, ch: _BrokerChannel) -> None:
        """Hand the answers on in queue order; on a network failure, resend what is unanswered."""
        try:
            while ch.queue and not ch.removed:
                head = ch.queue[0]
                assert head.answer is not None
                try:
                    body = await head.answer
                except BrokerClientError as exc:
                    if ch.removed:
                        return
                    log.info("controller -> broker %d %s failed (%s); retrying", ch.info.id, head.request.api, exc)
                    await self._retry(ch)
                    continue
                except Exception:   # not the network's doing (a body the codec refused): no retry helps
                    log.exception("controller -> broker %d %s failed; dropped", ch.info.id, head.request.api)
                    ch.queue.popleft()
                    continue
                if ch.removed:
                    return
                ch.queue.popleft()
                if self.on_response is not None:
                    try:
                        self.on_response(head.request, body)
                    except Exception:
                        log.exception("controller response handler failed")
        finally:
            ch.pumping = False

    async def _retry(self, ch: _BrokerChannel) -> None:
        """Close the client (what waits in it fails, and none of it is written later), wait
        the backoff, then write every unanswered request again, in order, on a new client."""
        ch.retrying = True
        for sent in ch.queue:
            if sent.answer is not None:
                sent.answer.addErrback(lambda f: None)   # answered by the retry, not by this
                sent.answer = None
        ch.client.close()
        await task.deferLater(self.reactor, self.retry_backoff_s, lambda: None)
        ch.retrying = False
        if ch.removed:
            return
        ch.client = self._new_client(ch.info)
        for sent in ch.queue:
            self._write(ch, sent)

    def pending(self, broker_id: int) -> int:
        ch = self.channels.get(broker_id)
        return len(ch.queue) if ch else 0

    def shutdown(self) -> None:
        for b in list(self.channels):
            self.remove_broker(b)
