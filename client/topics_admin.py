"""The ``--bootstrap-server`` backend of ``odradek topics`` (the command itself, its checks and
its output, is ``odradek.zk.topics_cli``): kafka-topics.sh 2.8's AdminClientTopicService.

Invariant: talks to the cluster only through ``AdminClient`` (configured from
``--command-config``: security.protocol, sasl.*, ssl.*), as kafka-topics.sh does: topics listed by
Metadata, created with CreateTopics (partitions and replication factor left to the cluster's
``num.partitions`` / ``default.replication.factor`` when not given), grown with CreatePartitions,
deleted with DeleteTopics, described from Metadata, DescribeConfigs and
ListPartitionReassignments. A refusal comes back as the broker's ``KafkaError``; nothing is
printed here.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError

from .admin import AdminClient
from .config import ConfigError
from .structs import NewPartitions, NewTopic, TopicPartition
from .tools import ToolError, properties_file

# what a user gets as one line (besides a broker's KafkaError): an unreadable --command-config, a bad property
USER_ERRORS = (ToolError, ConfigError)


@dataclass
class AdminPartition:
    partition: int
    replicas: list[int]
    leader: int | None   # None: no leader
    isr: list[int]


@dataclass
class AdminTopic:
    """One topic as kafka-topics --describe --bootstrap-server shows it."""
    name: str
    partitions: list[AdminPartition]
    config: dict[str, str]   # the entries whose source is not DEFAULT_CONFIG, in the broker's order
    min_isr: int | None      # the topic's min.insync.replicas, whatever its source
    topic_id: str | None = None   # Kafka's Uuid.toString
    moving: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)   # reassignments: adding, removing
    marked_for_deletion: bool = False   # (not known through the admin API)


class TopicsAdmin:
    """kafka-topics' operations through a broker."""

    def __init__(self, bootstrap_server: str, command_config: str | None) -> None:
        self.admin = AdminClient({**properties_file(command_config), "bootstrap.servers": bootstrap_server,
                                  "client.id": "odradek-topics"})

    def close(self) -> None:
        self.admin.close()

    def topics(self) -> list[str]:
        return self.admin.list_topics()

    def create_topic(self, name: str, partitions: int | None, replication_factor: int | None,
                     config: dict[str, str], assignment: dict[int, list[int]] | None) -> None:
        """CreateTopics, after kafka-topics' own checks of the counts given (ToolError)."""
        if replication_factor is not None and not 1 <= replication_factor <= 32767:
            raise ToolError("The replication factor must be between 1 and 32767 inclusive")
        if partitions is not None and partitions < 1:
            raise ToolError("The partitions must be greater than 0")
        self.admin.create_topics([NewTopic(name, -1 if partitions is None else partitions,
                                           -1 if replication_factor is None else replication_factor,
                                           config, assignment)])

    def delete(self, names: list[str]) -> None:
        self.admin.delete_topics(names)

    def add_partitions(self, names: list[str], count: int, assignment: dict[int, list[int]] | None) -> None:
        """Grow each topic to ``count`` partitions; of ``assignment`` (all partitions, as
        --replica-assignment gives them) only those past a topic's current ones are sent."""
        grow = {}
        for described in self.admin.describe_topics(names):
            current = len(described["partitions"])
            added = None if assignment is None else [r for p, r in sorted(assignment.items()) if p >= current]
            grow[described["topic"]] = NewPartitions(count, added)
        self.admin.create_partitions(grow)

    def describe(self, names: list[str]) -> tuple[set[int], list[AdminTopic]]:
        """(the live brokers, each topic's description)."""
        configs = self.admin.describe_configs([("topic", n) for n in names])
        live = {b["node_id"] for b in self.admin.describe_cluster()["brokers"]}
        described = [d for d in self.admin.describe_topics(names) if d["error_code"] == ErrorCode.NONE]
        moving = self._reassignments([TopicPartition(d["topic"], p["partition"])
                                      for d in described for p in d["partitions"]])
        topics = []
        for d in described:
            entries = configs[("topic", d["topic"])]
            if isinstance(entries, KafkaError):
                raise entries
            min_isr = next((e.value for e in entries if e.name == "min.insync.replicas"), None)
            topics.append(AdminTopic(
                d["topic"], [AdminPartition(p["partition"], p["replicas"], p["leader"] if p["leader"] >= 0 else None,
                                            p["isr"]) for p in d["partitions"]],
                {e.name: e.value or "" for e in entries if e.source != "DEFAULT_CONFIG"},
                None if min_isr is None else int(min_isr),
                None if d["topic_id"] is None else base64.urlsafe_b64encode(d["topic_id"].bytes).decode().rstrip("="),
                {tp.partition: (r["adding_replicas"], r["removing_replicas"])
                 for tp, r in moving.items() if tp.topic == d["topic"]}))
        return live, topics

    def _reassignments(self, partitions: list[TopicPartition]) -> dict[TopicPartition, dict[str, Any]]:
        """The reassignments in progress; none where the broker refuses to tell (an authorizer
        without Describe on the cluster), as kafka-topics goes on without them."""
        if not partitions:
            return {}
        try:
            return self.admin.list_partition_reassignments(partitions)
        except KafkaError as e:
            if e.code in (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_VERSION):
                return {}
            raise
