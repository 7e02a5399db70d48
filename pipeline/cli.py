"""``odradek pipeline generate|run|top|demo|bench``: the page-view pipeline from the command line.

Invariant: every subcommand stops cleanly on Ctrl-C or at ``--duration`` (the
query is stopped, then Spark, then the clients are closed), reports user errors
as one ``Error:`` line with exit code 1, and finds the cluster by
``--bootstrap-server``, ``$ODRADEK_BOOTSTRAP_SERVERS`` or ./data/cluster.json.
"""
from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from typing import Any

from odradek.client import AdminClient, ErrorCode, KafkaError, NewTopic
from odradek.client.tools import ArgParser, ToolError, resolve_bootstrap, run_tool

from .jobs import page_views as pv

USAGE = """usage: odradek pipeline <command> [options]

commands:
  generate   produce live page-view events to page-views
  run        the Spark streaming job: page-views -> per-page one-minute counts -> page-view-counts
  top        print the top pages of the latest window as the counts change
  demo       generate + run + top together against the local cluster
  bench      records/s through the Spark source and the demo job, next to the plain Consumer
"""


def say(msg: str) -> None:
    print(msg, flush=True)


class Stopper:
    """Set by Ctrl-C/SIGTERM or at the deadline; ``wait(s)`` returns True once set."""

    def __init__(self, duration: float | None) -> None:
        self.event = threading.Event()
        self.deadline = None if not duration else time.monotonic() + duration
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: self.event.set())

    def stopped(self) -> bool:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.event.set()
        return self.event.is_set()

    def wait(self, seconds: float) -> bool:
        if self.deadline is not None:
            seconds = max(0.0, min(seconds, self.deadline - time.monotonic()))
        try:
            self.event.wait(seconds)
        except KeyboardInterrupt:
            self.event.set()
        return self.stopped()


def ensure_topics(bootstrap: str, partitions: int, replication_factor: int) -> None:
    """Create page-views and the compacted page-view-counts if missing (RF capped by live brokers)."""
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        brokers = len(admin.describe_cluster()["brokers"])
        rf = max(1, min(replication_factor, brokers))
        topics = [NewTopic(pv.SOURCE_TOPIC, partitions, rf),
                  NewTopic(pv.SINK_TOPIC, partitions, rf, topic_configs={"cleanup.policy": "compact"})]
        for name, err in admin.create_topics(topics, raise_errors=False).items():
            if err is not None and err.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise err


def _common(ap: ArgParser) -> None:
    ap.add_argument("--bootstrap-server", dest="bootstrap_server")


# -- generate ---------------------------------------------------------------------------------

def cmd_generate(argv: list[str]) -> int:
    ap = ArgParser(prog="odradek pipeline generate", description="Produce live page-view events.")
    _common(ap)
    ap.add_argument("--rate", type=float, default=200.0, help="events per second")
    ap.add_argument("--duration", type=float, default=None, help="seconds (default: until Ctrl-C)")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--replication-factor", type=int, default=3)
    args = ap.parse_args(argv)
    bootstrap = resolve_bootstrap(args.bootstrap_server)
    ensure_topics(bootstrap, args.partitions, args.replication_factor)
    stop = Stopper(args.duration)
    gen = pv.Generator(bootstrap, args.rate)
    gen.start()
    say(f"producing ~{args.rate:g} page views/s to {pv.SOURCE_TOPIC!r} ({bootstrap}); Ctrl-C stops")
    try:
        while not stop.wait(5.0) and gen.is_alive():
            say(f"  {gen.sent} events sent")
    finally:
        gen.stop()
        gen.join()
    if gen.error:
        raise ToolError(f"generator failed: {gen.error}")
    say(f"{gen.sent} events sent")
    return 0


# -- run --------------------------------------------------------------------------------------

def _job_args(ap: ArgParser) -> None:
    ap.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*])")
    ap.add_argument("--checkpoint", default=None, help="checkpoint folder (run: ./data/pipeline/checkpoint)")
    ap.add_argument("--trigger", default="2 seconds", help='processing-time interval, or "available-now"')
    ap.add_argument("--starting-offsets", default="earliest")
    ap.add_argument("--watermark", default="1 minute")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=None)
    ap.add_argument("--fail-on-data-loss", default="true", choices=["true", "false"])


def _job_config(args: Any, bootstrap: str, checkpoint: str) -> pv.JobConfig:
    return pv.JobConfig(bootstrap=bootstrap, checkpoint=checkpoint, starting_offsets=args.starting_offsets,
                        trigger=args.trigger, watermark=args.watermark,
                        max_offsets_per_trigger=args.max_offsets_per_trigger,
                        fail_on_data_loss=args.fail_on_data_loss == "true")


def _progress_line(q: Any) -> str | None:
    p = q.lastProgress
    if not p:
        return None
    return (f"batch {p['batchId']}: {p['numInputRows']} input rows, "
            f"{p.get('processedRowsPerSecond', 0.0):.0f} rows/s")


def _stop_query(q: Any, spark: Any, idle_timeout: float = 30.0) -> None:
    """Stop the query between micro-batches when possible (no half-written batch), then Spark."""
    try:
        if q is not None and q.isActive:
            deadline = time.monotonic() + idle_timeout
            while q.isActive and q.status.get("isTriggerActive") and time.monotonic() < deadline:
                q.awaitTermination(0.2)
            q.stop()
    finally:
        spark.stop()


def cmd_run(argv: list[str]) -> int:
    ap = ArgParser(prog="odradek pipeline run", description="The page-view counting streaming job.")
    _common(ap)
    _job_args(ap)
    ap.add_argument("--duration", type=float, default=None)
    args = ap.parse_args(argv)
    bootstrap = resolve_bootstrap(args.bootstrap_server)
    checkpoint = args.checkpoint or os.path.join("data", "pipeline", "checkpoint")
    from .session import build_session
    spark = build_session("odradek-page-views", master=args.master)
    q = None
    stop = Stopper(args.duration)
    try:
        q = pv.start_query(spark, _job_config(args, bootstrap, checkpoint))
        say(f"query {q.name} started (checkpoint {checkpoint})")
        last = None
        while q.isActive and not stop.wait(1.0):
            line = _progress_line(q)
            if line and line != last:
                say(line)
                last = line
        if q.exception() is not None:
            raise ToolError(f"the query failed: {str(q.exception()).splitlines()[0]}")
    finally:
        _stop_query(q, spark)
    return 0


# -- top --------------------------------------------------------------------------------------

def cmd_top(argv: list[str]) -> int:
    ap = ArgParser(prog="odradek pipeline top", description="Top pages of the latest window, as they change.")
    _common(ap)
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--duration", type=float, default=None)
    args = ap.parse_args(argv)
    bootstrap = resolve_bootstrap(args.bootstrap_server)
    stop = Stopper(args.duration)
    try:
        pv.follow_top(bootstrap, args.n, stop.stopped, say)
    except KeyboardInterrupt:
        pass
    return 0


# -- demo -------------------------------------------------------------------------------------

def cmd_demo(argv: list[str]) -> int:
    ap = ArgParser(prog="odradek pipeline demo", description="generate + run + top against the local cluster.")
    _common(ap)
    _job_args(ap)
    ap.add_argument("--rate", type=float, default=200.0, help="page views per second")
    ap.add_argument("--duration", type=float, default=None, help="seconds (default: until Ctrl-C)")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--replication-factor", type=int, default=3)
    ap.add_argument("-n", type=int, default=5, help="pages to show")
    args = ap.parse_args(argv)
    bootstrap = resolve_bootstrap(args.bootstrap_server)
    ensure_topics(bootstrap, args.partitions, args.replication_factor)
    # The checkpoint lives with the cluster's data, so a second demo run continues the counts of
    # the first instead of overwriting them with counts that start from zero.
    own_checkpoint = args.checkpoint is None and not os.path.exists(os.path.join("data", "cluster.json"))
    checkpoint = args.checkpoint or (tempfile.mkdtemp(prefix="odradek-demo-checkpoint-") if own_checkpoint
                                     else os.path.join("data", "pipeline", "demo-checkpoint"))
    stop = Stopper(args.duration)
    say(f"odradek pipeline demo: {bootstrap}; {pv.SOURCE_TOPIC} -> Spark -> {pv.SINK_TOPIC}"
        + (f"; {args.duration:g} s" if args.duration else "; Ctrl-C stops"))
    say("starting Spark ...")
    from .session import build_session
    spark = build_session("odradek-page-views-demo", master=args.master or "local[2]")
    gen = pv.Generator(bootstrap, args.rate)
    q = None
    top_thread = None
    try:
        q = pv.start_query(spark, _job_config(args, bootstrap, checkpoint))
        gen.start()
        top_thread = threading.Thread(
            target=pv.follow_top, name="top-pages", daemon=True,
            args=(bootstrap, args.n, stop.event.is_set, lambda line: say(f"top  | {line}")))
        top_thread.start()
        say(f"generating ~{args.rate:g} page views/s; counting views per page per minute")
        last = None
        while not stop.wait(2.0):
            if not q.isActive:
                break
            line = _progress_line(q)
            if line and line != last:
                say(f"spark| {line}; {gen.sent} events generated")
                last = line
            if gen.error is not None:
                raise ToolError(f"generator failed: {gen.error}")
        if q.exception() is not None:
            raise ToolError(f"the query failed: {str(q.exception()).splitlines()[0]}")
    finally:
        say("stopping ...")
        stop.event.set()
        gen.stop()
        if gen.is_alive():
            gen.join()
        _stop_query(q, spark)
        if top_thread is not None:
            top_thread.join(10.0)
        if own_checkpoint:
            shutil.rmtree(checkpoint, ignore_errors=True)
    say(f"done: {gen.sent} page views generated")
    return 0


def cmd_bench(argv: list[str]) -> int:
    from .bench import main as bench_main
    return bench_main(argv)


COMMANDS = {"generate": cmd_generate, "run": cmd_run, "top": cmd_top, "demo": cmd_demo, "bench": cmd_bench}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    fn = COMMANDS.get(argv[0])
    if fn is None:
        print(f"Error: unknown pipeline command {argv[0]!r}\n\n{USAGE}", file=sys.stderr)
        return 1

    def body() -> int:
        try:
            return fn(argv[1:])
        except KafkaError as exc:
            raise ToolError(str(exc)) from None
        except KeyboardInterrupt:
            return 130

    return run_tool(body)


if __name__ == "__main__":
    sys.exit(main())
