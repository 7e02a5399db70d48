"""How this broker reaches the active controller (Kafka's BrokerToControllerChannelManager): a
partition leader's AlterIsr and a stopping broker's ControlledShutdown both go through it.

Invariant: a request is for the controller this broker's metadata cache names. ``local()`` is the
in-process controller when that is this broker's own active controller (the caller asks it
directly, no network); otherwise ``send`` puts the request on one kept connection to that
controller's endpoint on the inter-broker listener (TLS/SASL as configured), replaced when the
controller moves, and failing at once when it cannot be reached or no controller is known: each
caller retries on its own schedule.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, Mapping

from twisted.internet import defer

from odradek.protocol.errors import ErrorCode, KafkaError

from .broker_client import BrokerClient


class ControllerChannel:
    def __init__(self, broker_id: int, cache: Callable[[], Any], controller: Callable[[], Any],
                 listener: str, reactor: Any, security: Any = None, request_timeout_ms: int = 30000):
        self.broker_id = broker_id
        self._cache = cache
        self._controller = controller
        self.listener = listener
        self.reactor = reactor
        self.security = security
        self.request_timeout_ms = request_timeout_ms
        self._client: BrokerClient | None = None
        self._client_for: tuple[int, str, int] | None = None   # (controller id, host, port)

    def controller_id(self) -> int:
        """The controller this broker's metadata names; KafkaError NOT_CONTROLLER if none yet."""
        cache = self._cache()
        controller_id = cache.controller_id if cache is not None else None
        if controller_id is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "no controller known yet")
        return controller_id

    def local(self) -> Any | None:
        """This broker's own controller if it is the active one the metadata names, else None."""
        controller = self._controller()
        if self.controller_id() == self.broker_id and controller is not None and controller.is_active:
            return controller
        return None

    def send(self, api: ModuleType, version: int, body: Mapping[str, Any],
             timeout_ms: int | None = None) -> defer.Deferred:
        """Deferred[response body] of ``api`` sent to the remote controller."""
        try:
            controller_id = self.controller_id()
            endpoint = self._cache().endpoint(controller_id, self.listener)
            if endpoint is None:
                raise KafkaError(ErrorCode.NOT_CONTROLLER,
                                 f"controller {controller_id} has no {self.listener} listener")
        except KafkaError as e:
            return defer.fail(e)
        client = self._client_to(controller_id, *endpoint)
        return client.send(api, version, body, timeout_ms)

    def _client_to(self, controller_id: int, host: str, port: int) -> BrokerClient:
        if self._client is None or self._client_for != (controller_id, host, port):
            self.close()
            self._client = BrokerClient(self.reactor, host, port, f"broker-{self.broker_id}-to-controller",
                                        request_timeout_ms=self.request_timeout_ms, fail_when_unreachable=True,
                                        security=self.security)
            self._client_for = (controller_id, host, port)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client, self._client_for = None, None
