"""``odradek log-dirs --describe``: each broker's log dirs and partition sizes, as
kafka-log-dirs.sh prints them (DescribeLogDirs).

Invariant: read-only; prints Kafka's two progress lines, then one JSON line
(``{"version":1,"brokers":[{"broker":N,"logDirs":[{"logDir":..,"error":..,"partitions":[..]}]}]}``),
with an offline dir's error as Kafka's exception name.
"""
from __future__ import annotations

import json
import sys
from typing import Iterable

from .admin import AdminClient
from .tools import ArgParser, ToolError, properties_file, resolve_bootstrap, run_tool

EXCEPTIONS = {"KAFKA_STORAGE_ERROR": "KafkaStorageException"}


def main(argv: Iterable[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        ap = ArgParser(prog="odradek log-dirs", description=__doc__.split("\n")[0])
        ap.add_argument("--describe", action="store_true", required=True)
        ap.add_argument("--bootstrap-server", dest="bootstrap_server")
        ap.add_argument("--topic-list", dest="topic_list", help="comma-separated topics (default: all)")
        ap.add_argument("--broker-list", dest="broker_list", help="comma-separated broker ids (default: all)")
        ap.add_argument("--command-config", dest="command_config",
                        help="client properties file (security.protocol, ssl.*, sasl.*)")
        args = ap.parse_args(argv)
        try:
            brokers = [int(b) for b in args.broker_list.split(",") if b.strip()] if args.broker_list else None
        except ValueError:
            raise ToolError(f"--broker-list {args.broker_list!r} is not a comma-separated list of broker ids") from None
        topics = [t for t in args.topic_list.split(",") if t.strip()] if args.topic_list else None
        config = {**properties_file(args.command_config), "bootstrap.servers": resolve_bootstrap(args.bootstrap_server),
                  "client.id": "odradek-log-dirs"}
        print("Querying brokers for log directories information")
        with AdminClient(config) as admin:
            described = admin.describe_log_dirs(brokers, topics)
        print(f"Received log directory information from brokers {','.join(str(b) for b in described)}")
        print(json.dumps({"version": 1, "brokers": [
            {"broker": b, "logDirs": [
                {"logDir": d["log_dir"], "error": EXCEPTIONS.get(d["error"], d["error"]),
                 "partitions": [{"partition": f"{p['topic']}-{p['partition']}", "size": p["size"],
                                 "offsetLag": p["offset_lag"], "isFuture": p["is_future"]} for p in d["partitions"]]}
                for d in dirs]} for b, dirs in described.items()]}, separators=(",", ":")))
        return 0

    return run_tool(body)
