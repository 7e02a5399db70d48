"""A partition leader's ISR changes sent to the controller as AlterIsr (KIP-497), as Kafka 2.8's
brokers send them from inter.broker.protocol.version 2.7-IV2 on (its AlterIsrManager and
BrokerToControllerChannelManager in one small class).

Invariant: one batch of ISR changes is one AlterIsr to the controller this broker's metadata
cache names: a call in process when that is this broker's own active controller, else a request
on one kept connection, replaced when the controller moves. Every partition of the batch gets
one outcome, as ``isr_writer`` promises: its new zk version when the controller wrote exactly
the ISR asked for; None when the controller found another zk version (INVALID_UPDATE_VERSION);
an exception otherwise (another error code, another state answered, no controller known, a
failed request). The controller writes the state znode and sends UpdateMetadata to every live
broker itself, so a leader that uses this writes no /isr_change_notification node.
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.internet import defer

from odradek.protocol.apis import alter_isr as API
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.znodes import LeaderIsrAndControllerEpoch

from ..network.broker_client import BrokerClient

TopicPartition = tuple[str, int]
Outcome = Any   # int (new zk version) | None | Exception


class AlterIsrSender:
    """``isr_writer`` of a broker whose inter.broker.protocol.version has AlterIsr."""

    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], cache: Callable[[], Any],
                 controller: Callable[[], Any], listener: str, reactor: Any, security: Any = None,
                 request_timeout_ms: int = 30000):
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._cache = cache
        self._controller = controller
        self.listener = listener
        self.reactor = reactor
        self.security = security
        self.request_timeout_ms = request_timeout_ms
        self._client: BrokerClient | None = None
        self._client_for: tuple[int, str, int] | None = None   # (controller id, host, port)

    def __call__(self, states: dict[TopicPartition, LeaderIsrAndControllerEpoch]) -> defer.Deferred:
        return defer.ensureDeferred(self._send(states))

    async def _send(self, states: dict[TopicPartition, LeaderIsrAndControllerEpoch]
                    ) -> dict[TopicPartition, Outcome]:
        cache = self._cache()
        controller_id = cache.controller_id if cache is not None else None
        if controller_id is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "no controller known yet")
        asked = {tp: (s.leader_epoch, list(s.isr), s.zk_version) for tp, s in states.items()}
        local = self._controller()
        if controller_id == self.broker_id and local is not None and local.is_active:
            answered = await local.alter_isr(self.broker_id, self._broker_epoch(), asked)
        else:
            answered = await self._remote(cache, controller_id, asked)
        return {tp: _outcome(states[tp], answered.get(tp, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                                       "not in the controller's answer")))
                for tp in states}

    async def _remote(self, cache: Any, controller_id: int, asked: dict) -> dict[TopicPartition, Any]:
        endpoint = cache.endpoint(controller_id, self.listener)
        if endpoint is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"controller {controller_id} has no {self.listener} listener")
        client = self._client_to(controller_id, *endpoint)
        topics: dict[str, list[dict]] = {}
        for (topic, index), (leader_epoch, isr, version) in asked.items():
            topics.setdefault(topic, []).append({"partition_index": index, "leader_epoch": leader_epoch,
                                                 "new_isr": isr, "current_isr_version": version})
        resp = await client.send(API, 0, {"broker_id": self.broker_id, "broker_epoch": self._broker_epoch(),
                                          "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        if resp.error_code:
            raise KafkaError(ErrorCode(resp.error_code), f"AlterIsr to controller {controller_id}")
        out: dict[TopicPartition, Any] = {}
        for t in resp.topics:
            for p in t.partitions:
                out[(t.name, p.partition_index)] = (
                    ErrorCode(p.error_code) if p.error_code else
                    LeaderIsrAndControllerEpoch(p.leader_id, p.leader_epoch, list(p.isr), 0, p.current_isr_version))
        return out

    def _client_to(self, controller_id: int, host: str, port: int) -> BrokerClient:
        if self._client is None or self._client_for != (controller_id, host, port):
            self.close()
            self._client = BrokerClient(self.reactor, host, port, f"broker-{self.broker_id}-alter-isr",
                                        request_timeout_ms=self.request_timeout_ms, fail_when_unreachable=True,
                                        security=self.security)
            self._client_for = (controller_id, host, port)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client, self._client_for = None, None


def _outcome(asked: LeaderIsrAndControllerEpoch, answer: Any) -> Outcome:
    if isinstance(answer, Exception):
        return answer
    if isinstance(answer, ErrorCode):
        return None if answer == ErrorCode.INVALID_UPDATE_VERSION else KafkaError(answer, "AlterIsr")
    if (answer.leader, answer.leader_epoch, list(answer.isr)) != (asked.leader, asked.leader_epoch, list(asked.isr)):
        return KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"the controller answered leader {answer.leader} epoch "
                          f"{answer.leader_epoch} ISR {list(answer.isr)}")
    return answer.zk_version
