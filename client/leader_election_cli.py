"""``odradek leader-election --bootstrap-server``: kafka-leader-election.sh's admin-API mode
(ElectLeaders), preferred or unclean.

Invariant: receives the arguments already parsed and checked by ``odradek.zk.leader_election_cli``,
which also owns the report printed for both modes (``report``); talks to the cluster only through
``AdminClient``, configured from ``--admin.config``. A failure is one ``Error: ...`` line, exit 1.
"""
from __future__ import annotations

from typing import Any, Callable

from odradek.protocol.errors import ErrorCode, KafkaError

from .admin import AdminClient
from .structs import TopicPartition
from .tools import ToolError, properties_file, run_tool

Report = Callable[[str, list[tuple[str, int]], list[tuple[str, int]], list[tuple[tuple[str, int], str]]], int]
# Kafka's exception names, as kafka-leader-election.sh prints them
EXCEPTIONS = {ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "PreferredLeaderNotAvailableException",
              ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "EligibleLeadersNotAvailableException",
              ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "UnknownTopicOrPartitionException",
              ErrorCode.INVALID_TOPIC_EXCEPTION: "InvalidTopicException",
              ErrorCode.REQUEST_TIMED_OUT: "TimeoutException"}


def run(args: Any, election: str, partitions: list[tuple[str, int]] | None, report: Report) -> int:
    def body() -> int:
        config: dict[str, Any] = {**properties_file(args.admin_config), "bootstrap.servers": args.bootstrap_server,
                                  "client.id": "odradek-leader-election"}
        with AdminClient(config) as admin:
            try:
                results = admin.elect_leaders(election, None if partitions is None else
                                              [TopicPartition(t, p) for t, p in partitions], int(args.timeout * 1000))
            except KafkaError as e:
                raise ToolError(f"leader election failed: {e.code.name}: {e.message}") from None
        moved = [(tp.topic, tp.partition) for tp, e in results.items() if e is None]
        already = [(tp.topic, tp.partition) for tp, e in results.items()
                   if e is not None and e.code == ErrorCode.ELECTION_NOT_NEEDED]
        failed = [((tp.topic, tp.partition), f"{EXCEPTIONS.get(e.code, e.code.name)}: {e.message}")
                  for tp, e in results.items() if e is not None and e.code != ErrorCode.ELECTION_NOT_NEEDED]
        return report(election.upper(), sorted(moved), sorted(already), sorted(failed))
    return run_tool(body)
