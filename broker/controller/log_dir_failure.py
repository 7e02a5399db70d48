"""The controller's half of log-dir failure (Kafka 2.8 ``processLogDirEventNotification``,
``onBrokerLogDirFailure``, ``processLeaderAndIsrResponseReceived``).

Invariant: a broker's replicas on offline log dirs are learned only from its LeaderAndIsr
answers (KAFKA_STORAGE_ERROR per partition) and kept in
``ControllerContext.replicas_on_offline_dirs`` until the broker registers again; a replica
newly found there goes Offline (``on_replicas_become_offline``: partitions it led elect
another live ISR member, it leaves the ISR and gets StopReplica). A
``/log_dir_event_notification/log_dir_event_<seq>`` only makes the controller send
LeaderAndIsr to the broker for every replica it hosts (replica state Online -> Online);
the notifications are deleted once handled, and all of them at failover (the new
controller asks every broker anyway).
"""
from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, Iterable, Protocol

from odradek.protocol.errors import ErrorCode

from .context import ControllerContext, PartitionReplica, TopicPartition
from .replica_state_machine import ReplicaStateMachine
from .states import ReplicaState

log = logging.getLogger(__name__)


class LogDirEventBackend(Protocol):
    async def get_log_dir_event_notifications(self) -> list[str]: ...
    async def get_broker_ids_from_log_dir_events(self, names: list[str]) -> list[int]: ...
    async def delete_log_dir_event_notifications(self, names: list[str]) -> None: ...


def partition_errors(version: int, request_body: dict[str, Any], response: Any) -> dict[TopicPartition, int]:
    """(topic, partition) -> error code of a LeaderAndIsr response. v5 names topics by id, and
    odradek's controller sends no ids, so v5 topics are matched to the request's in order."""
    out: dict[TopicPartition, int] = {}
    if version <= 4:
        for e in getattr(response, "partition_errors", None) or []:
            out[(e.topic_name, e.partition_index)] = e.error_code
        return out
    names = [t["topic_name"] for t in request_body.get("topic_states", [])]
    for name, t in zip(names, getattr(response, "topics", None) or []):
        for e in t.partition_errors:
            out[(name, e.partition_index)] = e.error_code
    return out


class LogDirFailureEvents:
    def __init__(self, ctx: ControllerContext, zk: LogDirEventBackend, rsm: ReplicaStateMachine,
                 on_replicas_become_offline: Callable[[list[PartitionReplica]], Awaitable[None]]):
        self.ctx = ctx
        self.zk = zk
        self.rsm = rsm
        self.on_replicas_become_offline = on_replicas_become_offline

    async def on_failover(self) -> None:
        """Delete pending notifications (and arm the watch): every broker gets LeaderAndIsr now."""
        names = await self.zk.get_log_dir_event_notifications()
        if names:
            await self.zk.delete_log_dir_event_notifications(names)

    async def on_notification(self) -> None:
        names = await self.zk.get_log_dir_event_notifications()
        if not names:
            return
        try:
            brokers = sorted(set(await self.zk.get_broker_ids_from_log_dir_events(names)))
            log.info("controller: log dir failure reported by brokers %s", brokers)
            await self.on_broker_log_dir_failure(brokers)
        finally:
            await self.zk.delete_log_dir_event_notifications(names)

    async def on_broker_log_dir_failure(self, brokers: Iterable[int]) -> None:
        """Ask each broker about every replica it hosts: its answers name the offline ones."""
        live = self.ctx.live_or_shutting_down_broker_ids()
        replicas = self.ctx.replicas_on_brokers(b for b in brokers if b in live)
        await self.rsm.handle_state_changes(replicas, ReplicaState.ONLINE)

    async def on_leader_and_isr_response(self, broker_id: int, errors: dict[TopicPartition, int]) -> None:
        ctx = self.ctx
        if broker_id not in ctx.live_or_shutting_down_broker_ids():
            return
        offline = {tp for tp, code in errors.items() if code == ErrorCode.KAFKA_STORAGE_ERROR}
        online = {tp for tp, code in errors.items() if code == ErrorCode.NONE}
        previous = ctx.replicas_on_offline_dirs.get(broker_id, set())
        current = (previous - online) | offline
        ctx.replicas_on_offline_dirs[broker_id] = current
        new = sorted(current - previous)
        if new:
            log.info("controller: replicas %s of broker %d are on offline log dirs", new, broker_id)
            await self.on_replicas_become_offline([(tp, broker_id) for tp in new])

    def forget_brokers(self, brokers: Iterable[int]) -> None:
        """A broker that registered again (or died) starts with every log dir online."""
        for b in brokers:
            self.ctx.replicas_on_offline_dirs.pop(b, None)
