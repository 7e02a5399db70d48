"""``odradek delete-records``: kafka-delete-records.sh (DeleteRecords on each partition's leader).

Invariant: reads Kafka's offset JSON file (``{"version":1,"partitions":[{"topic":"t",
"partition":0,"offset":5}]}``; offset -1 means the high watermark), refuses a bad file with one
line and nothing deleted, then prints Kafka's report: one ``partition: <t>-<p>\\tlow_watermark: <n>``
or ``partition: <t>-<p>\\terror: <exception>`` line per partition. It exits 1 when any partition
failed (kafka-delete-records.sh exits 0; a script should be able to tell).
"""
from __future__ import annotations

import json
import sys
from typing import Iterable

from odradek.protocol.errors import ErrorCode, KafkaError

from .admin import AdminClient
from .structs import TopicPartition
from .tools import ArgParser, ToolError, properties_file, resolve_bootstrap, run_tool

# Kafka's exception names for the errors DeleteRecords answers
EXCEPTIONS = {ErrorCode.OFFSET_OUT_OF_RANGE: "org.apache.kafka.common.errors.OffsetOutOfRangeException",
              ErrorCode.POLICY_VIOLATION: "org.apache.kafka.common.errors.PolicyViolationException",
              ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "org.apache.kafka.common.errors.UnknownTopicOrPartitionException",
              ErrorCode.TOPIC_AUTHORIZATION_FAILED: "org.apache.kafka.common.errors.TopicAuthorizationException",
              ErrorCode.REQUEST_TIMED_OUT: "org.apache.kafka.common.errors.TimeoutException",
              ErrorCode.LEADER_NOT_AVAILABLE: "org.apache.kafka.common.errors.LeaderNotAvailableException"}


def parse_offsets(path: str) -> dict[TopicPartition, int]:
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
        entries = [(TopicPartition(str(e["topic"]), int(e["partition"])), int(e["offset"])) for e in obj["partitions"]]
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ToolError(f"{path} is not an offset list ({{\"version\":1,\"partitions\":[{{\"topic\":..,"
                        f"\"partition\":..,\"offset\":..}}]}}): {exc!r}") from None
    if not entries:
        raise ToolError("Offset json file doesn't contain any partitions")
    parts = [tp for tp, _ in entries]
    dups = sorted({f"{tp.topic}-{tp.partition}" for tp in parts if parts.count(tp) > 1})
    if dups:
        raise ToolError(f"Offset json file contains duplicate topic partitions: {','.join(dups)}")
    return dict(entries)


def main(argv: Iterable[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        ap = ArgParser(prog="odradek delete-records", description=__doc__.split("\n")[0])
        ap.add_argument("--bootstrap-server", dest="bootstrap_server")
        ap.add_argument("--offset-json-file", dest="offset_json_file", required=True,
                        help='{"version":1,"partitions":[{"topic":"t","partition":0,"offset":5}]}')
        ap.add_argument("--command-config", dest="command_config",
                        help="client properties file (security.protocol, ssl.*, sasl.*)")
        args = ap.parse_args(argv)
        offsets = parse_offsets(args.offset_json_file)
        config = {**properties_file(args.command_config), "bootstrap.servers": resolve_bootstrap(args.bootstrap_server),
                  "client.id": "odradek-delete-records"}
        print("Executing records delete operation")
        with AdminClient(config) as admin:
            results = admin.delete_records(offsets)
        print("Records delete operation completed:")
        failed = False
        for tp in sorted(results, key=lambda tp: (tp.topic, tp.partition)):
            r = results[tp]
            if isinstance(r, KafkaError):
                failed = True
                print(f"partition: {tp.topic}-{tp.partition}\terror: {EXCEPTIONS.get(r.code, r.code.name)}")
            else:
                print(f"partition: {tp.topic}-{tp.partition}\tlow_watermark: {r}")
        return 1 if failed else 0

    return run_tool(body)
