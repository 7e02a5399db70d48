"""Kafka's rack-unaware replica assignment, against outputs of Kafka's own algorithm."""
import random

import pytest

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.assignment import (assign_replicas_to_brokers, start_index_for_new_partitions,
                                   validate_new_assignment, validate_topic_assignment)


def test_kafka_admin_test_expected_assignment():
    # Kafka's AdminTest.testReplicaAssignment: brokers 0..4, 10 partitions, RF 3, fixed start index 0.
    expected = {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }
    assert assign_replicas_to_brokers(10, 3, [0, 1, 2, 3, 4], fixed_start_index=0) == expected


def test_fixed_start_index_by_hand():
    # n=3, start=shift=1: first=(p+1)%3; shift becomes 2 at p=3; follower=(first+1+shift%2)%3.
    assert assign_replicas_to_brokers(6, 2, [1, 2, 3], fixed_start_index=1) == {
        0: [2, 1], 1: [3, 2], 2: [1, 3], 3: [2, 3], 4: [3, 1], 5: [1, 2]}
    # RF = n: every broker once per partition.
    assert assign_replicas_to_brokers(4, 3, [10, 20, 30], fixed_start_index=0) == {
        0: [10, 20, 30], 1: [20, 30, 10], 2: [30, 10, 20], 3: [10, 30, 20]}


def test_start_partition_id_continues_numbering_and_shift():
    # adding partitions 6,7 to a topic whose partition 0 leads on broker 3 (brokers 1,2,3)
    start = start_index_for_new_partitions([1, 2, 3], 3)
    assert start == 2
    assert assign_replicas_to_brokers(2, 2, [1, 2, 3], start, 6) == {6: [3, 2], 7: [1, 3]}
    assert start_index_for_new_partitions([1, 2], 5) == 0


def test_single_broker():
    assert assign_replicas_to_brokers(3, 1, [7]) == {0: [7], 1: [7], 2: [7]}


def test_random_start_is_balanced_and_valid():
    rng = random.Random(42)
    for _ in range(50):
        n = rng.randint(1, 6)
        rf = rng.randint(1, n)
        brokers = sorted(rng.sample(range(100), n))
        result = assign_replicas_to_brokers(n * 4, rf, brokers, rng=rng)
        assert sorted(result) == list(range(n * 4))
        for replicas in result.values():
            assert len(replicas) == rf == len(set(replicas))
            assert set(replicas) <= set(brokers)
        leaders = [r[0] for r in result.values()]
        assert all(leaders.count(b) == 4 for b in brokers)


@pytest.mark.parametrize("args,code", [
    ((0, 1, [1]), ErrorCode.INVALID_PARTITIONS),
    ((-1, 1, [1]), ErrorCode.INVALID_PARTITIONS),
    ((1, 0, [1]), ErrorCode.INVALID_REPLICATION_FACTOR),
    ((1, 2, [1]), ErrorCode.INVALID_REPLICATION_FACTOR),
    ((1, 1, []), ErrorCode.INVALID_REPLICATION_FACTOR),
])
def test_errors(args, code):
    with pytest.raises(KafkaError) as info:
        assign_replicas_to_brokers(*args)
    assert info.value.code == code


def test_rf_error_message():
    with pytest.raises(KafkaError, match="Replication factor: 4 larger than available brokers: 3."):
        assign_replicas_to_brokers(1, 4, [1, 2, 3])


def test_validate_topic_assignment():
    validate_topic_assignment({0: [1, 2], 1: [2, 3]})
    for bad in ({0: [1, 2], 1: [2]}, {0: [1, 1]}, {1: [1]}, {}):
        with pytest.raises(KafkaError) as info:
            validate_topic_assignment(bad)
        assert info.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_validate_new_assignment():
    validate_new_assignment({2: [1, 2]}, 2, {1, 2, 3})
    with pytest.raises(KafkaError) as info:
        validate_new_assignment({2: [1, 9]}, 2, {1, 2, 3})
    assert info.value.code == ErrorCode.BROKER_NOT_AVAILABLE
    with pytest.raises(KafkaError) as info:
        validate_new_assignment({2: [1]}, 2, {1, 2, 3})
    assert info.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
