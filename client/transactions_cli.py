"""``odradek transactions describe-producers``: Kafka 3.0's kafka-transactions.sh
describe-producers (DescribeProducers, KIP-664; Kafka 2.8 serves the API but has no tool).

Invariant: asks the partition's leader (or the replica on ``--broker-id``) and prints Kafka 3.0's
table: a header row ProducerId, ProducerEpoch, LatestCoordinatorEpoch, LastSequence, LastTimestamp,
CurrentTransactionStartOffset, then one row per active producer, each column padded to its widest
value and followed by a tab; an open transaction's start offset or ``None``. A partition the
broker refuses is one line on stderr and exit status 1. Read-only.
"""
from __future__ import annotations

import sys
from typing import Iterable, Sequence

from odradek.protocol.errors import KafkaError

from .admin import AdminClient
from .structs import TopicPartition
from .tools import ArgParser, ToolError, properties_file, resolve_bootstrap, run_tool

HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
           "CurrentTransactionStartOffset")


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Kafka's prettyPrintTable: each value padded to its column's width, then a tab."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["".join(v.ljust(w) + "\t" for v, w in zip(r, widths)) for r in rows]


def main(argv: Iterable[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        ap = ArgParser(prog="odradek transactions", description=__doc__.split("\n")[0])
        ap.add_argument("--bootstrap-server", dest="bootstrap_server")
        ap.add_argument("--command-config", dest="command_config",
                        help="client properties file (security.protocol, ssl.*, sasl.*)")
        sub = ap.add_subparsers(dest="command", required=True)
        dp = sub.add_parser("describe-producers", help="the active producers of a partition")
        dp.add_argument("--topic", required=True)
        dp.add_argument("--partition", type=int, required=True)
        dp.add_argument("--broker-id", dest="broker_id", type=int,
                        help="ask this broker's replica instead of the leader")
        args = ap.parse_args(argv)
        config = {**properties_file(args.command_config), "bootstrap.servers": resolve_bootstrap(args.bootstrap_server),
                  "client.id": "odradek-transactions"}
        tp = TopicPartition(args.topic, args.partition)
        with AdminClient(config) as admin:
            result = admin.describe_producers([tp], broker_id=args.broker_id)[tp]
        if isinstance(result, KafkaError):
            where = "the leader" if args.broker_id is None else f"broker {args.broker_id}"
            raise ToolError(f"Failed to describe producers for partition {tp.topic}-{tp.partition} on {where}: "
                            f"{result.code.name}")
        rows = [HEADERS] + [(str(s.producer_id), str(s.producer_epoch), str(s.coordinator_epoch),
                             str(s.last_sequence), str(s.last_timestamp),
                             "None" if s.current_transaction_start_offset < 0 else str(s.current_transaction_start_offset))
                            for s in result]
        for line in table(rows):
            print(line)
        return 0

    return run_tool(body)
