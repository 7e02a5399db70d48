"""``odradek pipeline bench``: records/s through the plain Consumer, the Spark source alone, and the demo job.

Invariant: all three read the same topic in the same run (filled once with page-view
events), each from its beginning to the end offsets at the start; Spark numbers are
taken after a warm-up read so JVM and Python-worker start-up are not counted. It
measures, it does not test: nothing here is asserted.
"""
from __future__ import annotations

import shutil
import tempfile
import time

from odradek.client import AdminClient, Consumer, ErrorCode, NewTopic, TopicPartition
from odradek.client.tools import ArgParser, ToolError, resolve_bootstrap

from .jobs import page_views as pv


def _parser() -> ArgParser:
    ap = ArgParser(prog="odradek pipeline bench", description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server", dest="bootstrap_server")
    ap.add_argument("--topic", default="pipeline-bench")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--replication-factor", type=int, default=1)
    ap.add_argument("--master", default="local[2]")
    return ap


def _fill(bootstrap: str, topic: str, n: int, partitions: int, rf: int) -> tuple[int, float]:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        err = admin.create_topics([NewTopic(topic, partitions, rf)], raise_errors=False)[topic]
        if err is not None and err.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise err
    with Consumer(bootstrap_servers=bootstrap) as c:
        parts = sorted(c.partitions_for_topic(topic) or [])
        have = sum(c.end_offsets([TopicPartition(topic, p) for p in parts]).values())
    if have >= n:
        return have, 0.0
    t0 = time.monotonic()
    now = int(time.time() * 1000)
    pv.produce(bootstrap, pv.random_events(n - have, now - 10 * 60_000, 10 * 60_000), topic)
    return n, time.monotonic() - t0


def _consumer_rate(bootstrap: str, topic: str) -> tuple[int, float]:
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or [])]
        c.assign(tps)
        ends = c.end_offsets(tps)
        total = sum(ends.values())
        n = 0
        t0 = time.monotonic()
        while n < total:
            for recs in c.poll(timeout_ms=1000, max_records=5000).values():
                n += len(recs)
        return n, time.monotonic() - t0


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.records < 1:
        raise ToolError("--records must be >= 1")
    bootstrap = resolve_bootstrap(args.bootstrap_server)
    print(f"odradek pipeline bench: {bootstrap}, topic {args.topic!r}, master {args.master}", flush=True)
    n, secs = _fill(bootstrap, args.topic, args.records, args.partitions, args.replication_factor)
    if secs:
        print(f"  produced {n} events in {secs:.1f} s ({n / secs:,.0f} records/s)", flush=True)
    results: list[tuple[str, int, float]] = []
    results.append(("plain Consumer", *_consumer_rate(bootstrap, args.topic)))
    print(f"  {results[-1][0]}: done", flush=True)

    from .session import build_session
    spark = build_session("odradek-bench", master=args.master)
    tmp = tempfile.mkdtemp(prefix="odradek-bench-")
    try:
        def source():
            return (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", args.topic).load())
        source().write.format("noop").mode("overwrite").save()  # warm-up: JVM, Python workers
        t0 = time.monotonic()
        source().write.format("noop").mode("overwrite").save()
        results.append(("Spark source -> noop sink", n, time.monotonic() - t0))
        print(f"  {results[-1][0]}: done", flush=True)

        sink = f"{args.topic}-counts"
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic(sink, 2, args.replication_factor,
                                          topic_configs={"cleanup.policy": "compact"})], raise_errors=False)
        cfg = pv.JobConfig(bootstrap, f"{tmp}/ckpt", source_topic=args.topic, sink_topic=sink,
                           trigger="available-now", watermark="1 hour")
        t0 = time.monotonic()
        q = pv.start_query(spark, cfg)
        q.awaitTermination()
        rows = sum(p["numInputRows"] for p in q.recentProgress)
        results.append(("demo job (parse, window count, write)", rows, time.monotonic() - t0))
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{'path':<40} {'records':>10} {'seconds':>8} {'records/s':>11}")
    for name, count, secs in results:
        print(f"{name:<40} {count:>10} {secs:>8.2f} {count / secs if secs else 0:>11,.0f}")
    return 0
