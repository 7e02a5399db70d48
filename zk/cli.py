"""The ``odradek`` console script: one table of subcommands, each loaded lazily.

Invariant: a subcommand lives in the layer it belongs to (admin tools in zk,
broker start in broker, console and perf tools in client); this module only
names them, so ``odradek topics`` never imports Twisted and errors leave as one
line on stderr with exit code 1, never a traceback.
"""
from __future__ import annotations

import importlib
import sys

# name -> (module, function, one-line help). The function takes argv (list[str]) and
# returns an exit code.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "cluster": ("odradek.zk.cluster_cli", "main", "local ZooKeeper ensemble + brokers: up | down | status"),
    "zookeeper": ("odradek.zk.ensemble", "main", "start one ZooKeeper node"),
    "broker": ("odradek.broker.main", "main", "start one broker: broker start server.properties"),
    "topics": ("odradek.zk.topics_cli", "main", "create, list, describe, alter, delete topics (like kafka-topics.sh --zookeeper)"),
    "acls": ("odradek.zk.acls_cli", "main", "add, remove, list ACLs (like kafka-acls.sh)"),
    "configs": ("odradek.zk.configs_cli", "main", "describe, alter configs and SCRAM credentials (like kafka-configs.sh)"),
    "leader-election": ("odradek.zk.leader_election_cli", "main",
                        "preferred replica election (like kafka-leader-election.sh --election-type preferred)"),
    "reassign-partitions": ("odradek.zk.reassign_partitions_cli", "main",
                            "move partitions' replicas between brokers (like kafka-reassign-partitions.sh)"),
    "delete-records": ("odradek.client.delete_records_cli", "main",
                       "move partitions' log start offsets forward (like kafka-delete-records.sh)"),
    "delegation-tokens": ("odradek.client.delegation_tokens_cli", "main",
                          "create, renew, expire, describe delegation tokens (like kafka-delegation-tokens.sh)"),
    "transactions": ("odradek.client.transactions_cli", "main",
                     "describe-producers: a partition's active producers (like Kafka 3.0's kafka-transactions.sh)"),
    "dump-log": ("odradek.broker.log.dump_log", "main",
                 "print a partition's log, index, txn index and snapshot files (like kafka-dump-log.sh)"),
    "broker-api-versions": ("odradek.client.broker_api_versions_cli", "main",
                            "each broker's API version ranges (like kafka-broker-api-versions.sh)"),
    "get-offsets": ("odradek.client.get_offsets_cli", "main",
                    "partitions' earliest, latest or by-time offsets (like GetOffsetShell / kafka-get-offsets.sh)"),
    "log-dirs": ("odradek.client.log_dirs_cli", "main", "each broker's log dirs and partition sizes (like kafka-log-dirs.sh)"),
    "console-producer": ("odradek.client.console", "producer_main", "records from stdin to a topic"),
    "console-consumer": ("odradek.client.console", "consumer_main", "records from a topic to stdout"),
    "perf": ("odradek.client.perf", "main", "producer | consumer benchmarks (kafka-*-perf-test output)"),
    "consumer-groups": ("odradek.client.consumer_groups_cli", "main",
                        "list, describe, reset offsets of, delete consumer groups"),
    "ui": ("odradek.client.ui.server", "main", "a live, read-only web view of the cluster (http://127.0.0.1:8080/)"),
    "demo": ("odradek.client.demo", "main", "produce and consume keyed records through a demo topic"),
    "connect-standalone": ("odradek.pipeline.connect.cli", "standalone_main",
                           "a Connect worker in standalone mode: worker.properties connector.properties ..."),
    "connect-distributed": ("odradek.pipeline.connect.cli", "distributed_main",
                            "a Connect worker in distributed mode (REST API on port 8083)"),
    "pipeline": ("odradek.pipeline.cli", "main", "the Spark page-view pipeline: generate | run | top"),
}


class CommandError(Exception):
    """Raised by a subcommand for an error that is the user's to fix: printed as one line."""


def usage() -> str:
    lines = ["usage: odradek <command> [options]", "", "commands:"]
    lines += [f"  {name:<18} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"odradek: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 1
    module_name, func_name, _ = COMMANDS[name]
    func = getattr(importlib.import_module(module_name), func_name)
    try:
        return int(func(rest) or 0)
    except CommandError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # Run as `python -m odradek.zk.cli`: dispatch through the imported module so that
    # subcommands' CommandError is the class caught above, not a __main__ copy.
    from odradek.zk.cli import main as _main
    sys.exit(_main())
