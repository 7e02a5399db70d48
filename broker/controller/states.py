"""Partition and replica states of the classic controller, each with ONE table of legal moves.

Invariant: a state only changes through ``State.transition_to(target)``, which
returns ``target`` or raises ``IllegalStateTransition``; the tables are Kafka
2.8's ``validPreviousStates`` (PartitionStateMachine.scala / ReplicaStateMachine.scala)
turned around into "legal next states".
"""
from __future__ import annotations

from enum import Enum


class IllegalStateTransition(Exception):
    """A state machine was asked for a move its table does not allow."""


class PartitionState(Enum):
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"

    def transition_to(self, target: "PartitionState") -> "PartitionState":
        if target not in PARTITION_TRANSITIONS[self]:
            raise IllegalStateTransition(f"partition {self.value} -> {target.value}")
        return target


PARTITION_TRANSITIONS: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.NON_EXISTENT: frozenset({PartitionState.NEW}),
    PartitionState.NEW: frozenset({PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.ONLINE: frozenset({PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.OFFLINE: frozenset({PartitionState.ONLINE, PartitionState.OFFLINE,
                                       PartitionState.NON_EXISTENT}),
}


class ReplicaState(Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"

    def transition_to(self, target: "ReplicaState") -> "ReplicaState":
        if target not in REPLICA_TRANSITIONS[self]:
            raise IllegalStateTransition(f"replica {self.value} -> {target.value}")
        return target


_R = ReplicaState
REPLICA_TRANSITIONS: dict[ReplicaState, frozenset[ReplicaState]] = {
    _R.NON_EXISTENT: frozenset({_R.NEW}),
    _R.NEW: frozenset({_R.ONLINE, _R.OFFLINE}),
    _R.ONLINE: frozenset({_R.ONLINE, _R.OFFLINE}),
    _R.OFFLINE: frozenset({_R.ONLINE, _R.OFFLINE, _R.DELETION_STARTED, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.DELETION_SUCCESSFUL, _R.DELETION_INELIGIBLE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.NON_EXISTENT}),
    _R.DELETION_INELIGIBLE: frozenset({_R.ONLINE, _R.OFFLINE}),
}
