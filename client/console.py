"""``odradek console-producer`` / ``odradek console-consumer``: Kafka's console tools.

Invariant: the producer turns each stdin line into one record (key split off
at ``key.separator`` when ``parse.key=true``) and flushes at EOF; the consumer
assigns every partition of the topic (or ``--partition``), or with
``--group`` subscribes as a member of that group (committing its offsets),
prints records in DefaultMessageFormatter's layout and always ends with
``Processed a total of N messages`` on stderr, also after Ctrl-C.
"""
from __future__ import annotations

import signal
import sys
import time
from typing import Any

from .config import parse_properties
from .structs import TopicPartition
from .tools import ArgParser, ToolError, as_bool, kv_pairs, properties_file, resolve_bootstrap, run_tool

_TS_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


# -- console producer ---------------------------------------------------------------------

def producer_parser() -> ArgParser:
    ap = ArgParser(prog="odradek console-producer", description="Read lines from stdin, send one record each.")
    ap.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--property", action="append", default=[], help="parse.key=true, key.separator=<sep>")
    ap.add_argument("--producer-property", action="append", default=[])
    ap.add_argument("--producer.config", dest="producer_config")
    ap.add_argument("--compression-codec", nargs="?", const="gzip", default=None)
    ap.add_argument("--request-required-acks", default="1")
    ap.add_argument("--timeout", type=int, default=1000, help="linger.ms (Kafka's default 1000)")
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--sync", action="store_true")
    ap.add_argument("--max-block-ms", type=int, default=60000)
    ap.add_argument("--request-timeout-ms", type=int, default=1500)
    ap.add_argument("--message-send-max-retries", type=int, default=3)
    ap.add_argument("--retry-backoff-ms", type=int, default=100)
    return ap


def producer_config(args: Any) -> dict[str, Any]:
    """Producer settings from the command line (tool defaults < --producer.config < --producer-property)."""
    cfg: dict[str, Any] = {
        "acks": args.request_required_acks,
        "linger.ms": 0 if args.sync else args.timeout,
        "max.block.ms": args.max_block_ms,
        "request.timeout.ms": args.request_timeout_ms,
        "retries": args.message_send_max_retries,
        "retry.backoff.ms": args.retry_backoff_ms,
        "delivery.timeout.ms": max(120000, args.timeout + args.request_timeout_ms),
    }
    if args.batch_size is not None:
        cfg["batch.size"] = args.batch_size
    if args.compression_codec:
        cfg["compression.type"] = args.compression_codec
    cfg.update(properties_file(args.producer_config))
    cfg.update(kv_pairs(args.producer_property, "--producer-property"))
    cfg["bootstrap.servers"] = resolve_bootstrap(args.bootstrap_server or cfg.get("bootstrap.servers"))
    return cfg


def producer_main(argv: list[str]) -> int:
    def body() -> int:
        from .producer import Producer

        args = producer_parser().parse_args(argv)
        props = kv_pairs(args.property, "--property")
        parse_key = as_bool(props.get("parse.key", "false"))
        sep = props.get("key.separator", "\t")
        ignore_error = as_bool(props.get("ignore.error", "false"))
        producer = Producer(producer_config(args))
        errors: list[BaseException] = []
        try:
            for lineno, raw in enumerate(sys.stdin.buffer, 1):
                line = raw.rstrip(b"\n").rstrip(b"\r")
                key = None
                value = line
                if parse_key:
                    k, found, v = line.partition(sep.encode())
                    if not found:
                        if ignore_error:
                            value = line
                        else:
                            raise ToolError(f"No key found on line {lineno}: {line.decode('utf-8', 'replace')}")
                    else:
                        key, value = k, v
                fut = producer.send(args.topic, value, key=key)
                fut.add_errback(errors.append)
                if args.sync:
                    fut.get()
            producer.flush()
        except KeyboardInterrupt:
            pass
        finally:
            producer.close()
        if errors:
            raise ToolError(f"{len(errors)} record(s) failed: {errors[0]}")
        return 0
    return run_tool(body)


# -- console consumer ---------------------------------------------------------------------

def consumer_parser() -> ArgParser:
    ap = ArgParser(prog="odradek console-consumer", description="Print records of a topic to stdout.")
    ap.add_argument("--bootstrap-server", dest="bootstrap_server")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--from-beginning", action="store_true")
    ap.add_argument("--partition", type=int)
    ap.add_argument("--offset", default=None, help="earliest, latest or a number (needs --partition)")
    ap.add_argument("--max-messages", type=int)
    ap.add_argument("--timeout-ms", type=int)
    ap.add_argument("--property", action="append", default=[])
    ap.add_argument("--consumer-property", action="append", default=[])
    ap.add_argument("--consumer.config", dest="consumer_config")
    ap.add_argument("--group", help="consumer group id: subscribe as a group member and commit offsets")
    ap.add_argument("--isolation-level", default="read_uncommitted")
    ap.add_argument("--skip-message-on-error", action="store_true")
    return ap


class Formatter:
    """Kafka's DefaultMessageFormatter: [ts][partition][offset][key] value, separated by key.separator."""

    def __init__(self, props: dict[str, str]) -> None:
        self.print_ts = as_bool(props.get("print.timestamp", "false"))
        self.print_partition = as_bool(props.get("print.partition", "false"))
        self.print_offset = as_bool(props.get("print.offset", "false"))
        self.print_key = as_bool(props.get("print.key", "false"))
        self.print_value = as_bool(props.get("print.value", "true"))
        self.sep = props.get("key.separator", "\t")
        self.line_sep = props.get("line.separator", "\n")

    def format(self, rec: Any) -> str:
        cols = []
        if self.print_ts:
            tt = _TS_TYPES.get(rec.timestamp_type)
            cols.append(f"{tt}:{rec.timestamp}" if tt and rec.timestamp >= 0 else "NO_TIMESTAMP")
        if self.print_partition:
            cols.append(f"Partition:{rec.partition}")
        if self.print_offset:
            cols.append(f"Offset:{rec.offset}")
        if self.print_key:
            cols.append("null" if rec.key is None else rec.key.decode("utf-8", "replace"))
        if self.print_value:
            cols.append("null" if rec.value is None else rec.value.decode("utf-8", "replace"))
            return self.sep.join(cols) + self.line_sep
        return self.sep.join(cols)


def consumer_config(args: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"isolation.level": args.isolation_level,
                           "auto.offset.reset": "earliest" if args.from_beginning else "latest"}
    cfg.update(properties_file(args.consumer_config))
    cfg.update(kv_pairs(args.consumer_property, "--consumer-property"))
    if getattr(args, "group", None):
        cfg["group.id"] = args.group
    cfg["bootstrap.servers"] = resolve_bootstrap(args.bootstrap_server or cfg.get("bootstrap.servers"))
    return cfg


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def consumer_main(argv: list[str]) -> int:
    count = 0
    started = False

    def body() -> int:
        nonlocal count, started
        from .consumer import Consumer

        args = consumer_parser().parse_args(argv)
        if args.offset is not None and args.partition is None:
            raise ToolError("The partition is required when offset is specified.")
        if args.offset is not None and args.from_beginning:
            raise ToolError("Options --from-beginning and --offset cannot be specified together.")
        fmt = Formatter(kv_pairs(args.property, "--property"))
        consumer = Consumer(consumer_config(args))
        started = True
        try:
            parts = consumer.partitions_for_topic(args.topic)
            if parts is None:
                raise ToolError(f"topic {args.topic!r} does not exist")
            if consumer.config["group.id"] and args.partition is None:
                consumer.subscribe([args.topic])
                tps = []
            elif args.partition is not None:
                if args.partition not in parts:
                    raise ToolError(f"partition {args.partition} of topic {args.topic!r} does not exist")
                tps = [TopicPartition(args.topic, args.partition)]
            else:
                tps = [TopicPartition(args.topic, p) for p in sorted(parts)]
            if tps:
                consumer.assign(tps)
            if args.offset is not None:
                off = args.offset.lower()
                if off == "earliest":
                    consumer.seek_to_beginning(*tps)
                elif off == "latest":
                    consumer.seek_to_end(*tps)
                else:
                    try:
                        n = int(off)
                    except ValueError:
                        raise ToolError(f"--offset must be earliest, latest or a number, got {args.offset!r}") from None
                    if n < 0:
                        raise ToolError("--offset must be >= 0")
                    consumer.seek(tps[0], n)
            for tp in tps:  # resolve positions now, so records produced from here on are seen
                consumer.position(tp)
            out = sys.stdout
            limit = args.max_messages
            last_data = time.monotonic()
            while limit is None or count < limit:
                batch = consumer.poll(timeout_ms=200, max_records=None if limit is None else limit - count)
                if batch:
                    last_data = time.monotonic()
                    for recs in batch.values():
                        for rec in recs:
                            if limit is not None and count >= limit:
                                break
                            out.write(fmt.format(rec))
                            count += 1
                    out.flush()
                elif args.timeout_ms is not None and (time.monotonic() - last_data) * 1000 >= args.timeout_ms:
                    break
        finally:
            consumer.close()
        return 0

    try:
        signal.signal(signal.SIGTERM, _interrupt)
    except ValueError:  # not the main thread
        pass
    try:
        rc = run_tool(body)
    except KeyboardInterrupt:
        rc = 0
    if started:
        print(f"Processed a total of {count} messages", file=sys.stderr, flush=True)
    return rc


__all__ = ["producer_main", "consumer_main", "Formatter", "parse_properties"]
