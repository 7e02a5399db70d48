"""The controller's view of ZooKeeper: an async interface, one method per question or write.

Invariant: the state machines and the controller core talk to ZooKeeper only
through ``ControllerZkBackend``; every write is fenced by the controller epoch
(the implementation raises ``ControllerMovedError`` when the fence fails); reads
re-arm the watches the controller relies on. ``ThreadedZkBackend`` implements it
over ``KafkaZkClient`` with ``deferToThread``, retrying every call that fails with
connection loss once reconnected (``KafkaZkClient.retry``; a session expiry is
not retried); unit tests use an in-memory fake.
"""
from __future__ import annotations

import uuid
from typing import Callable, Iterable, Protocol

from twisted.internet import threads

from odradek.zk.session import ControllerMovedError, KafkaZkClient, UpdateResult  # noqa: F401
from odradek.zk.znodes import BrokerInfo, LeaderIsrAndControllerEpoch, ReplicaAssignment

from .context import ControllerContext, TopicPartition


class ControllerZkBackend(Protocol):
    async def get_all_brokers(self) -> dict[int, BrokerInfo]: ...
    async def get_all_topics(self) -> set[str]: ...
    async def get_replica_assignment(self, topics: Iterable[str]) -> dict[TopicPartition, ReplicaAssignment]: ...
    async def get_partition_states(self, partitions: Iterable[TopicPartition]
                                   ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]: ...
    async def create_partition_states(self, states: dict[TopicPartition, LeaderIsrAndControllerEpoch]
                                      ) -> dict[TopicPartition, Exception | None]: ...
    async def update_partition_states(self, states: dict[TopicPartition, LeaderIsrAndControllerEpoch]
                                      ) -> UpdateResult: ...
    async def get_topic_config(self, topic: str) -> dict[str, str]: ...
    async def get_topic_deletions(self) -> list[str]: ...
    async def delete_topic(self, topic: str) -> None: ...
    async def delete_topic_deletion_flags(self, topics: list[str]) -> None: ...
    async def get_isr_change_notifications(self) -> list[str]: ...
    async def get_partitions_from_isr_change_notifications(self, names: list[str]
                                                           ) -> list[TopicPartition]: ...
    async def delete_isr_change_notifications(self, names: list[str]) -> None: ...
    # optional (the shell's preferred-election and log-dir events use them; core fakes may omit them)
    async def get_log_dir_event_notifications(self) -> list[str]: ...
    async def get_broker_ids_from_log_dir_events(self, names: list[str]) -> list[int]: ...
    async def delete_log_dir_event_notifications(self, names: list[str]) -> None: ...
    async def get_preferred_replica_election(self) -> list[TopicPartition] | None: ...
    async def delete_preferred_replica_election(self) -> None: ...
    async def get_topic_ids(self, topics: Iterable[str]) -> dict[str, uuid.UUID | None]: ...
    async def set_topic_id(self, topic: str, topic_id: uuid.UUID) -> uuid.UUID | None: ...
    # partition reassignment (KIP-455)
    async def set_replica_assignment(self, topic: str, assignment: dict[int, ReplicaAssignment]) -> None: ...
    async def get_partition_state_watched(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None: ...
    async def get_partition_reassignment(self) -> tuple[dict[TopicPartition, list[int]], int] | None: ...
    async def set_partition_reassignment(self, reassignment: dict[TopicPartition, list[int]]) -> None: ...
    async def setup_feature_versioning(self, enabled: bool) -> None: ...


async def known_or_read_states(ctx: ControllerContext, zk: ControllerZkBackend,
                               partitions: list[TopicPartition]
                               ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
    """The partitions' states as last read or written, reading only the unknown ones. For a
    first write attempt: every state write is conditional on the zk_version, so a stale state
    costs one failed write, a read and a retry, never a wrong state (Kafka reads them all)."""
    current = {tp: ctx.leadership[tp] for tp in partitions if tp in ctx.leadership}
    missing = [tp for tp in partitions if tp not in current]
    if missing:
        current.update(await zk.get_partition_states(missing))
    return current


class Watches(Protocol):
    """Zero-argument callbacks (called on a kazoo thread) the backend arms on reads."""
    def broker_change(self) -> None: ...
    def topic_change(self) -> None: ...
    def topic_deletion(self) -> None: ...
    def isr_change(self) -> None: ...
    def log_dir_event(self) -> None: ...
    def partition_modification(self, topic: str) -> Callable[[], None]: ...
    def preferred_replica_election(self) -> None: ...
    def partition_reassignment(self) -> None: ...
    def reassignment_isr_change(self, tp: TopicPartition) -> Callable[[], None]: ...


class ThreadedZkBackend:
    """ControllerZkBackend over a blocking KafkaZkClient (each call in the reactor's thread pool)."""

    def __init__(self, zk: KafkaZkClient, ctx: ControllerContext, watches: Watches | None, reactor=None):
        if reactor is None:
            from twisted.internet import reactor as global_reactor
            reactor = global_reactor
        self.reactor = reactor
        self.zk = zk
        self.ctx = ctx
        self.watches = watches

    def _call(self, fn, *args, **kwargs):
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(),
                                         self.zk.retry, fn, *args, **kwargs)

    def _w(self, name: str):
        return getattr(self.watches, name) if self.watches is not None else None

    async def get_all_brokers(self):
        return await self._call(self.zk.get_all_brokers, self._w("broker_change"))

    async def get_all_topics(self):
        return await self._call(self.zk.get_all_topics, self._w("topic_change"))

    async def get_replica_assignment(self, topics):
        factory = self.watches.partition_modification if self.watches is not None else None
        return await self._call(self.zk.get_replica_assignment, list(topics), factory)

    async def get_partition_states(self, partitions):
        return await self._call(self.zk.get_partition_states, list(partitions))

    async def create_partition_states(self, states):
        return await self._call(self.zk.create_partition_states, dict(states), self.ctx.epoch_zk_version)

    async def update_partition_states(self, states):
        return await self._call(self.zk.update_partition_states_conditionally, dict(states),
                                self.ctx.epoch_zk_version)

    async def get_topic_config(self, topic):
        return await self._call(self.zk.get_entity_config, "topics", topic)

    async def get_topic_deletions(self):
        return await self._call(self.zk.get_topic_deletions, self._w("topic_deletion"))

    async def delete_topic(self, topic):
        def run() -> None:
            self.zk.delete_topic_znodes(topic, self.ctx.epoch_zk_version)
            self.zk.delete_topic_deletion_flags([topic], self.ctx.epoch_zk_version)
        return await self._call(run)

    async def delete_topic_deletion_flags(self, topics):
        return await self._call(self.zk.delete_topic_deletion_flags, list(topics), self.ctx.epoch_zk_version)

    async def get_isr_change_notifications(self):
        return await self._call(self.zk.get_isr_change_notifications, self._w("isr_change"))

    async def get_partitions_from_isr_change_notifications(self, names):
        return await self._call(self.zk.get_partitions_from_isr_change_notifications, list(names))

    async def delete_isr_change_notifications(self, names):
        return await self._call(self.zk.delete_isr_change_notifications, list(names),
                                self.ctx.epoch_zk_version)

    async def get_log_dir_event_notifications(self):
        return await self._call(self.zk.get_log_dir_event_notifications, self._w("log_dir_event"))

    async def get_broker_ids_from_log_dir_events(self, names):
        return await self._call(self.zk.get_broker_ids_from_log_dir_events, list(names))

    async def delete_log_dir_event_notifications(self, names):
        return await self._call(self.zk.delete_log_dir_event_notifications, list(names),
                                self.ctx.epoch_zk_version)

    async def get_preferred_replica_election(self):
        return await self._call(self.zk.get_preferred_replica_election,
                                self._w("preferred_replica_election"))

    async def delete_preferred_replica_election(self):
        return await self._call(self.zk.delete_preferred_replica_election, self.ctx.epoch_zk_version)

    async def set_replica_assignment(self, topic, assignment):
        return await self._call(self.zk.set_replica_assignment, topic, dict(assignment), self.ctx.epoch_zk_version)

    async def get_partition_state_watched(self, tp):
        watch = self.watches.reassignment_isr_change(tp) if self.watches is not None else None
        return await self._call(self.zk.get_partition_state, tp, watch)

    async def get_partition_reassignment(self):
        return await self._call(self.zk.get_partition_reassignment, self._w("partition_reassignment"))

    async def set_partition_reassignment(self, reassignment):
        return await self._call(self.zk.set_partition_reassignment, dict(reassignment), self.ctx.epoch_zk_version)

    async def get_topic_ids(self, topics):
        return await self._call(self.zk.get_topic_ids, list(topics))

    async def set_topic_id(self, topic, topic_id):
        return await self._call(self.zk.set_topic_id, topic, topic_id, self.ctx.epoch_zk_version)

    async def setup_feature_versioning(self, enabled):
        return await self._call(self.zk.setup_feature_versioning, enabled, self.ctx.epoch_zk_version)
