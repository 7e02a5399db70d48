"""``odradek get-offsets``: partitions' offsets for a time, as Kafka's GetOffsetShell
(kafka-run-class kafka.tools.GetOffsetShell; kafka-get-offsets.sh from 3.0) prints them.

Invariant: read-only (ListOffsets through odradek's Consumer, no group); one line
``topic:partition:offset`` per partition in partition order; ``--time -1`` is the log end
offset, ``-2`` the log start offset, any other value a timestamp in ms (the first offset whose
timestamp is at or after it; the offset field is empty when there is none, as in Kafka's tool).
"""
from __future__ import annotations

import sys
from typing import Iterable

from .consumer import Consumer
from .structs import TopicPartition
from .tools import ArgParser, ToolError, properties_file, resolve_bootstrap, run_tool

LATEST, EARLIEST = -1, -2


def main(argv: Iterable[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        ap = ArgParser(prog="odradek get-offsets", description=__doc__.split("\n")[0])
        ap.add_argument("--bootstrap-server", dest="bootstrap_server")
        ap.add_argument("--broker-list", dest="broker_list", help="Kafka 2.8's name for --bootstrap-server")
        ap.add_argument("--topic", required=True)
        ap.add_argument("--partitions", default="", help="comma-separated partition ids (default: all)")
        ap.add_argument("--time", type=int, default=LATEST, help="-1 latest, -2 earliest, or a timestamp in ms")
        ap.add_argument("--command-config", dest="command_config",
                        help="client properties file (security.protocol, ssl.*, sasl.*)")
        args = ap.parse_args(argv)
        bootstrap = resolve_bootstrap(args.bootstrap_server or args.broker_list)
        config = {**properties_file(args.command_config), "bootstrap.servers": bootstrap,
                  "enable.auto.commit": False, "client.id": "odradek-get-offsets"}
        try:
            wanted = [int(p) for p in args.partitions.split(",") if p.strip()]
        except ValueError:
            raise ToolError(f"--partitions {args.partitions!r} is not a comma-separated list of partition ids") from None
        consumer = Consumer(config)
        try:
            existing = consumer.partitions_for_topic(args.topic)
            if existing is None:
                raise ToolError(f"topic '{args.topic}' does not exist")
            missing = [p for p in wanted if p not in existing]
            if missing:
                raise ToolError(f"partition(s) {missing} of topic '{args.topic}' do not exist")
            tps = [TopicPartition(args.topic, p) for p in sorted(wanted or existing)]
            if args.time == LATEST:
                offsets: dict[TopicPartition, int | None] = dict(consumer.end_offsets(tps))
            elif args.time == EARLIEST:
                offsets = dict(consumer.beginning_offsets(tps))
            else:
                found = consumer.offsets_for_times({tp: args.time for tp in tps})
                offsets = {tp: None if (at := found.get(tp)) is None else at.offset for tp in tps}
        finally:
            consumer.close()
        for tp in tps:
            offset = offsets.get(tp)
            print(f"{tp.topic}:{tp.partition}:{'' if offset is None else offset}")
        return 0

    return run_tool(body)
