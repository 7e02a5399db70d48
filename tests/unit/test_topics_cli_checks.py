"""``odradek topics``' flag checks per mode and its --describe lines, without a cluster (the
commands themselves run against real clusters in tests/integration/test_topics_cli*.py).

Invariant: the flags kafka-topics.sh 2.8 refuses in a mode are refused there with its message, and
those it takes are taken; a reassignment in progress shows as kafka-topics shows it through a
broker: its adding replicas left out of the replication factor (so a partition is
under-replicated only against the replicas it keeps), and listed on the partition's line.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from odradek.zk.cli import CommandError
from odradek.zk.topics_cli import build_parser, check_args, describe_lines


def checked(*argv: str) -> str:
    return check_args(build_parser().parse_args(list(argv)))


@pytest.mark.parametrize("argv,message", [
    (("--bootstrap-server", "b:1", "--zookeeper", "z:2", "--list"),
     "Only one of --bootstrap-server or --zookeeper must be specified"),
    (("--command-config", "f", "--list"), "--command-config can only be used with --bootstrap-server"),
    (("--bootstrap-server", "b:1", "--alter", "--topic", "t", "--config", "a=b", "--partitions", "2"),
     'Option combination "[bootstrap-server],[config]" can\'t be used with option "[alter]"'),
    (("--bootstrap-server", "b:1", "--alter", "--topic", "t"), 'Missing required argument "[partitions]"'),
    (("--bootstrap-server", "b:1", "--alter", "--topic", "t", "--partitions", "2", "--delete-config", "a"),
     'Option "[delete-config]" can\'t be used with option "[bootstrap-server]"'),
    (("--bootstrap-server", "b:1", "--describe", "--if-exists"), 'Missing required argument "[topic]"'),
    (("--zookeeper", "z:2", "--create", "--topic", "t"), 'Missing required argument "[partitions]"'),
])
def test_refused_flags(argv, message):
    with pytest.raises(CommandError) as e:
        checked(*argv)
    assert message in str(e.value)


def test_through_a_broker_the_cluster_defaults_stand_in_for_partitions_and_replication_factor():
    assert checked("--bootstrap-server", "b:1", "--create", "--topic", "t") == "create"
    assert checked("--bootstrap-server", "b:1", "--command-config", "f", "--alter", "--topic", "t",
                   "--partitions", "3", "--replica-assignment", "1:2,2:3,3:1") == "alter"


@dataclass
class Partition:
    partition: int
    leader: int | None
    replicas: list[int]
    isr: list[int]


@dataclass
class Topic:
    name: str
    partitions: list[Partition]
    config: dict[str, str] = field(default_factory=dict)
    topic_id: str | None = "AAAAAAAAAAAAAAAAAAAAAQ"
    marked_for_deletion: bool = False


def described(*flags: str, min_isr: int | None = None) -> list[str]:
    # partition 0 moves from 1,2,3 to 2,3,4: replicas 1,2,3,4 while 4 is added and 1 removed
    topic = Topic("t", [Partition(1, 3, [3, 1, 2], [3, 1, 2]), Partition(0, 2, [2, 3, 4, 1], [2, 3, 1])],
                  {"retention.ms": "5"})
    args = build_parser().parse_args(["--describe", *flags])
    return describe_lines(topic, {1, 2, 3, 4}, args, min_isr, {0: ([4], [1])})


def test_a_reassignment_shows_as_kafka_topics_shows_it():
    assert described() == [
        "Topic: t\tTopicId: AAAAAAAAAAAAAAAAAAAAAQ\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: retention.ms=5",
        "\tTopic: t\tPartition: 0\tLeader: 2\tReplicas: 2,3,4,1\tIsr: 2,3,1\tAdding Replicas: 4\tRemoving Replicas: 1",
        "\tTopic: t\tPartition: 1\tLeader: 3\tReplicas: 3,1,2\tIsr: 3,1,2",
    ]
    # three of the three replicas it keeps are in sync: not under-replicated though 4 is not yet
    assert described("--under-replicated-partitions") == []
    assert described("--at-min-isr-partitions", min_isr=3) == [
        "\tTopic: t\tPartition: 0\tLeader: 2\tReplicas: 2,3,4,1\tIsr: 2,3,1\tAdding Replicas: 4\tRemoving Replicas: 1",
        "\tTopic: t\tPartition: 1\tLeader: 3\tReplicas: 3,1,2\tIsr: 3,1,2"]
    assert described("--under-min-isr-partitions", min_isr=4) == described("--at-min-isr-partitions", min_isr=3)
    assert described("--topics-with-overrides") == [described()[0]]
