"""Kafka's rack-unaware replica assignment (AdminUtils.assignReplicasToBrokersRackUnaware).

Invariant: for the same inputs (and the same fixed start index) this returns
exactly Kafka 2.8's assignment; the first replica of each partition is its
preferred leader. Errors are ``KafkaError``s with the codes Kafka's
CreateTopics/CreatePartitions return, so the broker's handlers reuse this module.
"""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from odradek.protocol.errors import ErrorCode, KafkaError

_rand = random.Random()


def assign_replicas_to_brokers(n_partitions: int, replication_factor: int, broker_list: Sequence[int],
                               fixed_start_index: int = -1, start_partition_id: int = -1,
                               rng: random.Random | None = None) -> dict[int, list[int]]:
    """Kafka's ``assignReplicasToBrokers`` for brokers without racks.

    ``broker_list`` is used in the order given (Kafka passes live brokers sorted by id).
    Partition ids start at ``max(0, start_partition_id)``.
    """
    if n_partitions <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(broker_list):
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Replication factor: {replication_factor} larger than available brokers: "
                         f"{len(broker_list)}.")
    return assign_replicas_to_brokers_rack_unaware(n_partitions, replication_factor, broker_list,
                                                   fixed_start_index, start_partition_id, rng)


def assign_replicas_to_brokers_rack_unaware(n_partitions: int, replication_factor: int,
                                            broker_list: Sequence[int], fixed_start_index: int = -1,
                                            start_partition_id: int = -1,
                                            rng: random.Random | None = None) -> dict[int, list[int]]:
    """The algorithm itself (no argument checks beyond what it needs)."""
    rng = rng or _rand
    brokers = list(broker_list)
    n = len(brokers)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    next_replica_shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    current = max(0, start_partition_id)
    result: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if current > 0 and current % n == 0:
            next_replica_shift += 1
        first = (current + start_index) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[_replica_index(first, next_replica_shift, j, n)])
        result[current] = replicas
        current += 1
    return result


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def validate_new_assignment(assignment: Mapping[int, Sequence[int]], expected_replication_factor: int,
                            available_broker_ids: set[int]) -> None:
    """Kafka's ``AdminZkClient.validateReplicaAssignment`` (used when adding partitions)."""
    for partition, replicas in assignment.items():
        if not replicas:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Cannot have replication factor of 0 for partition id {partition}.")
        if len(set(replicas)) != len(replicas):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "Duplicate brokers not allowed in replica assignment: "
                             f"{', '.join(map(str, replicas))} for partition id {partition}.")
        if not set(replicas) <= available_broker_ids:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE,
                             f"Some brokers specified for partition id {partition} are not available. "
                             f"Specified brokers: {', '.join(map(str, replicas))}, "
                             f"available brokers: {', '.join(map(str, sorted(available_broker_ids)))}.")
        if len(replicas) != expected_replication_factor:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "Inconsistent replication factor between partitions, partition 0 has "
                             f"{expected_replication_factor} while partition {partition} has {len(replicas)}.")


def validate_topic_assignment(assignment: Mapping[int, Sequence[int]]) -> None:
    """Kafka's assignment checks in ``AdminZkClient.validateTopicCreate``."""
    if not assignment:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The replica assignment is empty")
    if len({len(r) for r in assignment.values()}) != 1:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "All partitions should have the same number of replicas")
    for replicas in assignment.values():
        if len(replicas) != len(set(replicas)):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Duplicate replica assignment found: {dict(assignment)}")
        if not replicas:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if sorted(assignment) != list(range(len(assignment))):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "partitions should be a consecutive 0-based integer sequence")


def start_index_for_new_partitions(broker_ids: Sequence[int], partition0_first_replica: int) -> int:
    """Kafka's addPartitions start index: first broker with id >= partition 0's leader, else 0."""
    for i, b in enumerate(broker_ids):
        if b >= partition0_first_replica:
            return i
    return 0
