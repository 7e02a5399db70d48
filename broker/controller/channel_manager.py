"""ControllerChannelManager: one BrokerClient and one ordered request queue per live broker.

Invariant: requests to a broker leave one at a time in the order the controller
queued them (LeaderAndIsr before UpdateMetadata before StopReplica of one
batch); a request that fails on the network is retried (with backoff) for as
long as the broker stays in the channel, then dropped when the broker is
removed. Each answered request is handed to ``on_response(request, body)``.
Reactor thread only.
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
class _BrokerChannel:
    info: BrokerInfo
    client: Any
    queue: deque = field(default_factory=deque)
    pumping: bool = False
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
        ep = self._endpoint(info)
        client = self.client_factory(self.reactor, ep.host, ep.port,
                                     f"controller-{self.controller_id}-to-broker-{info.id}",
                                     request_timeout_ms=self.request_timeout_ms)
        self.channels[info.id] = _BrokerChannel(info, client)

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
            ch.queue.append(req)
            if not ch.pumping:
                ch.pumping = True
                defer.Deferred.fromCoroutine(self._pump(ch)).addErrback(
                    lambda f: log.error("channel pump failed: %s", f.getTraceback()))

    async def _pump(self, ch: _BrokerChannel) -> None:
        try:
            while ch.queue and not ch.removed:
                req: OutRequest = ch.queue[0]
                try:
                    body = await ch.client.send(req.api_module, req.version, req.body)
                except BrokerClientError as exc:
                    if ch.removed:
                        return
                    log.info("controller -> broker %d %s failed (%s); retrying", req.broker_id, req.api, exc)
                    await task.deferLater(self.reactor, self.retry_backoff_s, lambda: None)
                    continue
                if ch.removed:
                    return
                ch.queue.popleft()
                if self.on_response is not None:
                    try:
                        self.on_response(req, body)
                    except Exception:
                        log.exception("controller response handler failed")
        finally:
            ch.pumping = False

    def pending(self, broker_id: int) -> int:
        ch = self.channels.get(broker_id)
        return len(ch.queue) if ch else 0

    def shutdown(self) -> None:
        for b in list(self.channels):
            self.remove_broker(b)
