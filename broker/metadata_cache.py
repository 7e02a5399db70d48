"""The broker's view of the cluster, filled ONLY by the controller's UpdateMetadata.

Invariant: every broker answers Metadata from this cache and nothing else (no
ZooKeeper reads per request). An UpdateMetadata replaces the live-broker list and
controller id wholesale and upserts the partition states it carries; a state whose
leader is -2 (LeaderDuringDelete) removes that partition, and a topic with no
partitions left is gone. Plain object: no I/O, no Twisted; listeners are told after
every update so waiters (CreateTopics, DeleteTopics) can re-check their condition.
Stamps: ``version`` grows at every update; ``brokers_version`` is the version at which the
live-broker list last changed, ``topics_version`` the one at which a topic last came or went,
``topic_stamp(t)`` the version at which topic t's partition states
were last written, so an answer built from them (Metadata's, ``broker/apis/metadata_answers.py``)
is current while both stamps are those it was built at. States are never changed in place.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable

LEADER_DURING_DELETE = -2
NO_LEADER = -1

TopicPartition = tuple[str, int]


@dataclass
class BrokerMetadata:
    """A live broker: its endpoints per listener name and rack."""
    id: int
    endpoints: dict[str, tuple[str, int]]  # listener name -> (host, port)
    rack: str | None = None


@dataclass
class PartitionMetadata:
    """One partition as the controller last described it."""
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    topic_id: uuid.UUID | None = None      # UpdateMetadata v7+ (None: not sent, or the zero UUID)
    is_new: bool = False   # LeaderAndIsr v1+: a replica new to this broker (its log may go to a live dir)


class MetadataCache:
    """Live brokers, partition states and the controller id, as last sent by the controller."""

    def __init__(self, broker_id: int, cluster_id: str | None = None):
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.controller_id: int | None = None
        self.controller_epoch = -1
        self._brokers: dict[int, BrokerMetadata] = {}
        self._topics: dict[str, dict[int, PartitionMetadata]] = {}
        self._sorted_topics: list[str] | None = []
        self.version = 0
        self.brokers_version = 0
        self.topics_version = 0          # the version at which a topic was last added or removed
        self._topic_stamps: dict[str, int] = {}
        self._listeners: list[Callable[[], None]] = []

    # ----------------------------------------------------------------- updates

    def update(self, controller_id: int, controller_epoch: int, brokers: Iterable[BrokerMetadata],
               partition_states: Iterable[PartitionMetadata]) -> list[TopicPartition]:
        """Apply one UpdateMetadata; returns the partitions it deleted."""
        self.controller_id = controller_id if controller_id >= 0 else None
        self.controller_epoch = controller_epoch
        self.version += 1
        version = self.version
        alive = {b.id: b for b in brokers}
        if alive != self._brokers:
            self.brokers_version = version
        self._brokers = alive
        deleted: list[TopicPartition] = []
        stamps, topics = self._topic_stamps, self._topics
        for st in partition_states:
            if st.leader == LEADER_DURING_DELETE:
                parts = topics.get(st.topic)
                if parts is not None and parts.pop(st.partition, None) is not None:
                    deleted.append((st.topic, st.partition))
                    stamps[st.topic] = version
                    if not parts:
                        del topics[st.topic]
                        del stamps[st.topic]
                        self._sorted_topics = None
                        self.topics_version = version
            else:
                parts = topics.get(st.topic)
                if parts is None:
                    parts = topics[st.topic] = {}
                    self._sorted_topics = None
                    self.topics_version = version
                parts[st.partition] = st
                stamps[st.topic] = version
        self._notify()
        return deleted

    def add_listener(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[], None]) -> None:
        try:
            self._listeners.remove(callback)
        except ValueError:
            pass

    def _notify(self) -> None:
        for cb in list(self._listeners):
            cb()

    # ----------------------------------------------------------------- queries

    def alive_brokers(self) -> list[BrokerMetadata]:
        return [self._brokers[b] for b in sorted(self._brokers)]

    def brokers_on(self, listener: str) -> list[tuple[BrokerMetadata, tuple[str, int]]]:
        """Live brokers with an endpoint on ``listener``, with that (host, port), by id."""
        return [(b, b.endpoints[listener]) for b in self.alive_brokers() if listener in b.endpoints]

    def alive_broker_ids(self) -> set[int]:
        return set(self._brokers)

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self._brokers

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        broker = self._brokers.get(broker_id)
        return None if broker is None else broker.endpoints.get(listener)

    def topics(self) -> list[str]:
        if self._sorted_topics is None:
            self._sorted_topics = sorted(self._topics)
        return list(self._sorted_topics)

    def topic_stamp(self, topic: str) -> int:
        """The cache version at which ``topic``'s partition states last changed (-1: unknown)."""
        return self._topic_stamps.get(topic, -1)

    def contains_topic(self, topic: str) -> bool:
        return topic in self._topics

    def topic_id(self, topic: str) -> uuid.UUID | None:
        """The topic's id as the controller sent it (None: unknown or sent without one)."""
        parts = self._topics.get(topic)
        return next(iter(parts.values())).topic_id if parts else None

    def topic_with_id(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id (None: none known)."""
        return next((t for t in self._topics if self.topic_id(t) == topic_id), None)

    def partitions(self, topic: str) -> dict[int, PartitionMetadata] | None:
        return self._topics.get(topic)

    def partition_state(self, topic: str, partition: int) -> PartitionMetadata | None:
        parts = self._topics.get(topic)
        return None if parts is None else parts.get(partition)

    def topic_has_leaders(self, topic: str, num_partitions: int | None = None) -> bool:
        """True once the topic is known and every partition has a leader."""
        parts = self._topics.get(topic)
        if not parts:
            return False
        if num_partitions is not None and len(parts) < num_partitions:
            return False
        return all(st.leader >= 0 for st in parts.values())
