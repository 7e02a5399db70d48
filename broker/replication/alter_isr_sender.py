"""A partition leader's ISR changes sent to the controller as AlterIsr (KIP-497), as Kafka 2.8's
brokers send them from inter.broker.protocol.version 2.7-IV2 on (its AlterIsrManager).

Invariant: one batch of ISR changes is one AlterIsr to the active controller, through this
broker's ``ControllerChannel``: a call in process when that is this broker's own controller, else
a request on the channel's kept connection. Every partition of the batch gets one outcome, as
``isr_writer`` promises: its new zk version when the controller wrote exactly the ISR asked for;
None when the controller found another zk version (INVALID_UPDATE_VERSION); an exception
otherwise (another error code, another state answered, no controller known, a failed request).
The controller writes the state znode and sends UpdateMetadata to every live broker itself, so a
leader that uses this writes no /isr_change_notification node.
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.internet import defer

from odradek.protocol.apis import alter_isr as API
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.znodes import LeaderIsrAndControllerEpoch

from ..network.controller_channel import ControllerChannel

TopicPartition = tuple[str, int]
Outcome = Any   # int (new zk version) | None | Exception


class AlterIsrSender:
    """``isr_writer`` of a broker whose inter.broker.protocol.version has AlterIsr."""

    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], channel: ControllerChannel):
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._channel = channel

    def __call__(self, states: dict[TopicPartition, LeaderIsrAndControllerEpoch]) -> defer.Deferred:
        return defer.ensureDeferred(self._send(states))

    async def _send(self, states: dict[TopicPartition, LeaderIsrAndControllerEpoch]
                    ) -> dict[TopicPartition, Outcome]:
        asked = {tp: (s.leader_epoch, list(s.isr), s.zk_version) for tp, s in states.items()}
        local = self._channel.local()
        if local is not None:
            answered = await local.alter_isr(self.broker_id, self._broker_epoch(), asked)
        else:
            answered = await self._remote(asked)
        return {tp: _outcome(states[tp], answered.get(tp, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                                       "not in the controller's answer")))
                for tp in states}

    async def _remote(self, asked: dict) -> dict[TopicPartition, Any]:
        topics: dict[str, list[dict]] = {}
        for (topic, index), (leader_epoch, isr, version) in asked.items():
            topics.setdefault(topic, []).append({"partition_index": index, "leader_epoch": leader_epoch,
                                                 "new_isr": isr, "current_isr_version": version})
        resp = await self._channel.send(API, 0, {"broker_id": self.broker_id, "broker_epoch": self._broker_epoch(),
                                                 "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        if resp.error_code:
            raise KafkaError(ErrorCode(resp.error_code), "AlterIsr to the controller")
        out: dict[TopicPartition, Any] = {}
        for t in resp.topics:
            for p in t.partitions:
                out[(t.name, p.partition_index)] = (
                    ErrorCode(p.error_code) if p.error_code else
                    LeaderIsrAndControllerEpoch(p.leader_id, p.leader_epoch, list(p.isr), 0, p.current_isr_version))
        return out


def _outcome(asked: LeaderIsrAndControllerEpoch, answer: Any) -> Outcome:
    if isinstance(answer, Exception):
        return answer
    if isinstance(answer, ErrorCode):
        return None if answer == ErrorCode.INVALID_UPDATE_VERSION else KafkaError(answer, "AlterIsr")
    if (answer.leader, answer.leader_epoch, list(answer.isr)) != (asked.leader, asked.leader_epoch, list(asked.isr)):
        return KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"the controller answered leader {answer.leader} epoch "
                          f"{answer.leader_epoch} ISR {list(answer.isr)}")
    return answer.zk_version
