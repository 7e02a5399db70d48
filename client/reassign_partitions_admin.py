"""``odradek reassign-partitions --bootstrap-server``: the tool's cluster access through the admin
API (kafka-reassign-partitions.sh's default mode since Kafka 2.5).

Invariant: the tool itself (parsing, plans, report lines) is ``odradek.zk.reassign_partitions_cli``;
this backend answers its questions with plain values through one ``AdminClient`` configured from
``--command-config``: live brokers (Metadata), current replicas (Metadata), ongoing reassignments
(ListPartitionReassignments), starts and cancellations (AlterPartitionReassignments), throttle
configs (IncrementalAlterConfigs) and log dir moves (AlterReplicaLogDirs, DescribeLogDirs). A Kafka error leaves as the tool's one-line error.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from odradek.protocol.errors import ErrorCode, KafkaError

from .admin import AdminClient
from .structs import TopicPartition, TopicPartitionReplica
from .config import ConfigError
from .tools import ToolError, properties_file

RESOURCE = {"topics": "topic", "brokers": "broker"}


class AdminBackend:
    def __init__(self, admin: AdminClient, error: Callable[[str], Exception]):
        self.admin = admin
        self.error = error

    def _checked(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except KafkaError as e:
            raise self.error(f"{e.code.name}: {e.message}" if e.message else e.code.name) from None

    def brokers(self) -> list[int]:
        return self._checked(lambda: [b["node_id"] for b in self.admin.describe_cluster()["brokers"]])

    def topic_assignments(self, topics: list[str]) -> dict[str, dict[int, list[int]]]:
        out = {}
        for t in self._checked(lambda: self.admin.describe_topics(topics)):
            if t["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise self.error(f"Topic {t['topic']} not found")
            out[t["topic"]] = {p["partition"]: list(p["replicas"]) for p in t["partitions"]}
        return out

    def ongoing(self) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        found = self._checked(self.admin.list_partition_reassignments)
        return {(tp.topic, tp.partition): (r["replicas"], r["adding_replicas"], r["removing_replicas"])
                for tp, r in found.items()}

    def alter(self, reassignments: dict[tuple[str, int], list[int] | None]) -> dict[tuple[str, int], str]:
        results = self._checked(lambda: self.admin.alter_partition_reassignments(
            {TopicPartition(t, p): r for (t, p), r in reassignments.items()}))
        return {(tp.topic, tp.partition): e.message or e.code.name for tp, e in results.items() if e is not None}

    def set_configs(self, entity_type: str, name: str, configs: dict[str, str], delete: Iterable[str]) -> None:
        self._checked(lambda: self.admin.incremental_alter_configs((RESOURCE[entity_type], name), configs, delete))

    def alter_log_dirs(self, moves: dict[tuple[str, int, int], str]) -> dict[tuple[str, int, int], str | None]:
        """{replica: None (started) | the error code's name}."""
        results = self._checked(lambda: self.admin.alter_replica_log_dirs(
            {TopicPartitionReplica(*r): d for r, d in moves.items()}))
        return {tuple(r): None if e is None else e.code.name for r, e in results.items()}

    def replica_log_dirs(self, replicas: list[tuple[str, int, int]]
                         ) -> dict[tuple[str, int, int], tuple[str | None, str | None]]:
        """{replica: (current dir, future dir)}."""
        infos = self._checked(lambda: self.admin.describe_replica_log_dirs([TopicPartitionReplica(*r) for r in replicas]))
        return {tuple(r): (i.current_log_dir, i.future_log_dir) for r, i in infos.items()}

    def close(self) -> None:
        self.admin.close()


def open_backend(bootstrap: str, command_config: str | None, error: Callable[[str], Exception]) -> AdminBackend:
    try:
        config = {**properties_file(command_config), "bootstrap.servers": bootstrap,
                  "client.id": "odradek-reassign-partitions"}
        return AdminBackend(AdminClient(config), error)
    except (ToolError, ConfigError) as exc:   # an unreadable --command-config, a bad setting
        raise error(str(exc)) from None
