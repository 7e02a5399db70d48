"""ControllerContext: the active controller's in-memory picture of the cluster.

Invariant: filled by ``onControllerFailover`` from ZooKeeper and changed only by
the controller's single event loop; ``leadership`` holds the last state znode
content we read or wrote (with its zk_version), ``partition_states`` and
``replica_states`` the state machines' current states. A replica is online when its
broker is live and the broker did not answer KAFKA_STORAGE_ERROR for it in a LeaderAndIsr
since it registered (``replicas_on_offline_dirs``, Kafka's ``replicasOnOfflineDirs``).
Plain data, no I/O.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Iterable

from odradek.zk.znodes import BrokerInfo, LeaderIsrAndControllerEpoch, ReplicaAssignment

from .states import PartitionState, ReplicaState

TopicPartition = tuple[str, int]
PartitionReplica = tuple[TopicPartition, int]     # ((topic, partition), broker id)


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = 0
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)  # incl. shutting down
    shutting_down: set[int] = field(default_factory=set)
    all_topics: set[str] = field(default_factory=set)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[PartitionReplica, ReplicaState] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    topics_with_deletion_started: set[str] = field(default_factory=set)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)
    # KIP-455: the adding/removing replicas of partitions whose assignment has them, and the
    # partitions whose reassignment the controller is driving (Kafka's partitionsBeingReassigned)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)     # KIP-516, from /brokers/topics/<t>
    reassigning_replicas: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)
    partitions_being_reassigned: set[TopicPartition] = field(default_factory=set)

    # ------------------------------------------------------------ brokers

    def live_broker_ids(self) -> set[int]:
        """Live brokers that are not shutting down (eligible leaders)."""
        return set(self.live_brokers) - self.shutting_down

    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    def broker_epoch(self, broker_id: int) -> int:
        info = self.live_brokers.get(broker_id)
        return info.epoch if info is not None else -1

    def is_replica_online(self, broker_id: int, tp: TopicPartition,
                          include_shutting_down: bool = False) -> bool:
        ids = self.live_or_shutting_down_broker_ids() if include_shutting_down else self.live_broker_ids()
        return broker_id in ids and tp not in self.replicas_on_offline_dirs.get(broker_id, ())

    def online_replicas(self, tp: TopicPartition, include_shutting_down: bool = False) -> set[int]:
        """The brokers that could lead ``tp`` now (live, its replica not on an offline log dir)."""
        return {b for b in self.replicas(tp) if self.is_replica_online(b, tp, include_shutting_down)}

    # ------------------------------------------------------------ topics and assignment

    def set_assignment(self, tp: TopicPartition, replicas: list[int]) -> None:
        self.assignments.setdefault(tp[0], {})[tp[1]] = list(replicas)
        ra = self.reassigning_replicas.get(tp)
        if ra is not None and ra.replicas != list(replicas):
            self.set_full_assignment(tp, ReplicaAssignment(
                list(replicas), [b for b in ra.adding_replicas if b in replicas],
                [b for b in ra.removing_replicas if b in replicas]))

    def set_full_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        """The replicas and, during a reassignment, which of them are being added and removed."""
        self.assignments.setdefault(tp[0], {})[tp[1]] = list(assignment.replicas)
        if assignment.is_being_reassigned:
            self.reassigning_replicas[tp] = ReplicaAssignment(
                list(assignment.replicas), list(assignment.adding_replicas), list(assignment.removing_replicas))
        else:
            self.reassigning_replicas.pop(tp, None)

    def full_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return self.reassigning_replicas.get(tp) or ReplicaAssignment(self.replicas(tp))

    def is_topic_being_reassigned(self, topic: str) -> bool:
        return any(tp[0] == topic for tp in self.partitions_being_reassigned)

    def replicas(self, tp: TopicPartition) -> list[int]:
        return self.assignments.get(tp[0], {}).get(tp[1], [])

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def all_partitions(self) -> list[TopicPartition]:
        return [tp for t in sorted(self.assignments) for tp in self.partitions_for_topic(t)]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replicas(tp)]

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> list[PartitionReplica]:
        ids = set(broker_ids)
        return [(tp, b) for tp in self.all_partitions() for b in self.replicas(tp) if b in ids]

    def replicas_for_partitions(self, partitions: Iterable[TopicPartition]) -> list[PartitionReplica]:
        return [(tp, b) for tp in partitions for b in self.replicas(tp)]

    def offline_replicas(self, tp: TopicPartition) -> list[int]:
        return [b for b in self.replicas(tp) if not self.is_replica_online(b, tp, include_shutting_down=True)]

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_for_topic(topic):
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            for b in self.replicas(tp):
                self.replica_states.pop((tp, b), None)
            self.reassigning_replicas.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
        self.assignments.pop(topic, None)
        self.topic_ids.pop(topic, None)
        self.all_topics.discard(topic)
        self.topics_to_delete.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        self.topics_with_deletion_started.discard(topic)

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_delete

    # ------------------------------------------------------------ states

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states.get(tp, PartitionState.NON_EXISTENT)

    def replica_state(self, pr: PartitionReplica) -> ReplicaState:
        return self.replica_states.get(pr, ReplicaState.NON_EXISTENT)

    def partitions_in_state(self, *states: PartitionState) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if self.partition_state(tp) in states]

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionReplica]:
        return [pr for pr in self.replicas_for_partitions(self.partitions_for_topic(topic))
                if self.replica_state(pr) == state]

    def reset(self) -> None:
        """Forget everything (on resignation)."""
        self.__init__()  # type: ignore[misc]
