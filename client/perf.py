"""``odradek perf producer|consumer``: Kafka's perf tools, with their exact output lines.

Invariant: the printed lines match kafka-producer-perf-test (ProducerPerformance) and
kafka-consumer-perf-test (ConsumerPerformance) of Kafka 2.8 format for format, so numbers
can be compared side by side (``perf e2e``, EndToEndLatency, is ``perf_e2e.py``). The
odradek producer is measured with per-batch completion callbacks (latency of a
record = its batch's completion time minus its own send time), never with a
callback per record.
"""
from __future__ import annotations

import collections
import os
import random
import sys
import time
from datetime import datetime
from typing import Any, Callable, Sequence

from .tools import ArgParser, ToolError, kv_pairs, properties_file, resolve_bootstrap, run_tool


class Stats:
    """ProducerPerformance.Stats: windowed reports every 5 s, sampled latencies for percentiles."""

    def __init__(self, num_records: int, interval_s: float = 5.0, out=None) -> None:
        self.start = time.monotonic()
        self.window_start = self.start
        self.sampling = max(1, num_records // min(max(num_records, 1), 500000))
        self.latencies: list[int] = []
        self.count = self.bytes = 0
        self.max_latency = 0
        self.total_latency = 0
        self.w_count = self.w_bytes = self.w_max = self.w_total = 0
        self.interval = interval_s
        self.index = 0
        self.out = out or sys.stdout

    def record(self, latency_ms: int, nbytes: int, now: float) -> None:
        self.count += 1
        self.bytes += nbytes
        self.total_latency += latency_ms
        if latency_ms > self.max_latency:
            self.max_latency = latency_ms
        self.w_count += 1
        self.w_bytes += nbytes
        self.w_total += latency_ms
        if latency_ms > self.w_max:
            self.w_max = latency_ms
        if self.index % self.sampling == 0:
            self.latencies.append(latency_ms)
        self.index += 1
        if now - self.window_start >= self.interval:
            self._end_window(now)

    def record_batch(self, sent: list[float], nbytes: int, now: float) -> None:
        """``record`` of records of ``nbytes`` each sent at ``sent`` that completed together at
        ``now`` (one batch), in one call; a window that ends within them reports them all."""
        latencies = [int((now - t) * 1000) for t in sent]
        n, total, top = len(latencies), sum(latencies), max(latencies, default=0)
        self.count += n
        self.bytes += n * nbytes
        self.total_latency += total
        self.max_latency = max(self.max_latency, top)
        self.w_count += n
        self.w_bytes += n * nbytes
        self.w_total += total
        self.w_max = max(self.w_max, top)
        step = self.sampling
        self.latencies += latencies[-self.index % step::step]   # the records whose index % step == 0
        self.index += n
        if now - self.window_start >= self.interval:
            self._end_window(now)

    def _end_window(self, now: float) -> None:
        self.print_window(now)
        self.window_start, self.w_count, self.w_bytes, self.w_max, self.w_total = now, 0, 0, 0, 0

    def print_window(self, now: float) -> None:
        elapsed = max(now - self.window_start, 1e-9)
        rate = self.w_count / elapsed
        mb = self.w_bytes / elapsed / (1024.0 * 1024.0)
        avg = self.w_total / max(self.w_count, 1)
        print(f"{self.w_count} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), "
              f"{avg:.1f} ms avg latency, {float(self.w_max):.1f} ms max latency.", file=self.out, flush=True)

    def print_total(self) -> None:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        rate = self.count / elapsed
        mb = self.bytes / elapsed / (1024.0 * 1024.0)
        p = percentiles(self.latencies, (0.5, 0.95, 0.99, 0.999))
        print(f"{self.count} records sent, {rate:f} records/sec ({mb:.2f} MB/sec), "
              f"{self.total_latency / max(self.count, 1):.2f} ms avg latency, {float(self.max_latency):.2f} ms max latency, "
              f"{p[0]} ms 50th, {p[1]} ms 95th, {p[2]} ms 99th, {p[3]} ms 99.9th.", file=self.out, flush=True)


def percentiles(values: Sequence[float], ps: tuple[float, ...]) -> list[float]:
    """The values at fractions ``ps`` of the sorted ``values`` (Kafka's tools' nearest rank; ints
    stay ints)."""
    s = sorted(values)
    if not s:
        return [0 for _ in ps]
    return [s[min(int(p * len(s)), len(s) - 1)] for p in ps]


MIN_SLEEP_S = 0.002   # ThroughputThrottler's MIN_SLEEP_NS


class Throttler:
    """ThroughputThrottler: hold ``target`` records/s (-1 = unthrottled), sleeping once the sender
    is ``MIN_SLEEP_S`` or more ahead, as Kafka's does, never for each record: at 10,000 records/s
    a sleep of 100 µs per record cost the sending process a third of a core in wakeups."""

    def __init__(self, target: float, start: float) -> None:
        self.target = target
        self.start = start

    def ahead(self, sent: int, now: float) -> float:
        """Seconds to wait before the next record (0 when less than ``MIN_SLEEP_S`` ahead, or
        unthrottled)."""
        if self.target <= 0:
            return 0.0
        ahead = sent / self.target - (now - self.start)
        return ahead if ahead >= MIN_SLEEP_S else 0.0

    def throttle(self, sent: int, now: float) -> None:
        ahead = self.ahead(sent, now)
        if ahead > 0:
            time.sleep(ahead)


def _payload_generator(size: int) -> Callable[[], bytes]:
    # ProducerPerformance fills the payload with random uppercase letters (one payload reused)
    rnd = random.Random()
    payload = bytes(rnd.randrange(26) + 65 for _ in range(size))
    return lambda: payload


# -- producer -----------------------------------------------------------------------------

def _producer_parser() -> ArgParser:
    ap = ArgParser(prog="odradek perf producer")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--num-records", type=int, required=True)
    ap.add_argument("--record-size", type=int)
    ap.add_argument("--payload-file")
    ap.add_argument("--payload-delimiter", default="\\n")
    ap.add_argument("--throughput", type=float, required=True)
    ap.add_argument("--producer-props", nargs="+", default=[])
    ap.add_argument("--producer.config", dest="producer_config")
    ap.add_argument("--bootstrap-server", dest="bootstrap_server")
    ap.add_argument("--client", choices=["odradek", "confluent-kafka", "aiokafka"], default="odradek")
    ap.add_argument("--print-metrics", action="store_true")
    # transactions (kafka-producer-perf-test's flags): either one turns them on
    ap.add_argument("--transactional-id", dest="transactional_id")
    ap.add_argument("--transaction-duration-ms", dest="transaction_duration_ms", type=int,
                    help="commit the open transaction every this many ms (default 3000 with transactions)")
    return ap


DEFAULT_TRANSACTIONAL_ID = "performance-producer-default-transactional-id"
DEFAULT_TRANSACTION_DURATION_MS = 3000


class Transactions:
    """ProducerPerformance's transaction loop: begin before a record, commit every ``duration_ms``."""

    def __init__(self, producer: Any, duration_ms: int) -> None:
        self.producer = producer
        self.duration = duration_ms / 1000.0
        self.started = 0.0
        self.open = 0  # records in the current transaction
        self.commits = 0
        producer.init_transactions()

    def before_send(self, now: float) -> None:
        if self.open == 0:
            self.producer.begin_transaction()
            self.started = now

    def after_send(self, now: float) -> None:
        self.open += 1
        if now - self.started >= self.duration:
            self.commit()

    def commit(self) -> None:
        if self.open:
            self.producer.commit_transaction()
            self.commits += 1
            self.open = 0


def _transaction_settings(args: Any, props: dict[str, Any]) -> int:
    """Put transactional.id into ``props``; the commit interval in ms (0 = no transactions).

    Idempotence alone: ``--producer-props enable.idempotence=true`` (as with Kafka's tool)."""
    if args.transaction_duration_ms is not None and args.transaction_duration_ms <= 0:
        raise ToolError("--transaction-duration-ms must be > 0")
    if args.transactional_id is None and args.transaction_duration_ms is None:
        return 0
    props["transactional.id"] = args.transactional_id or props.get("transactional.id") or DEFAULT_TRANSACTIONAL_ID
    return args.transaction_duration_ms or DEFAULT_TRANSACTION_DURATION_MS


def producer_perf(argv: list[str], out=None) -> int:
    args = _producer_parser().parse_args(argv)
    out = out or sys.stdout
    if args.record_size is None and not args.payload_file:
        raise ToolError("either --record-size or --payload-file must be specified")
    props: dict[str, Any] = properties_file(args.producer_config)
    props.update(kv_pairs(args.producer_props, "--producer-props"))
    props["bootstrap.servers"] = resolve_bootstrap(args.bootstrap_server or props.get("bootstrap.servers"))
    args.txn_duration_ms = _transaction_settings(args, props)
    if args.payload_file:
        delim = args.payload_delimiter.encode().decode("unicode_escape")
        with open(args.payload_file, "rb") as fh:
            payloads = [p for p in fh.read().split(delim.encode()) if p]
        if not payloads:
            raise ToolError(f"no payloads in {args.payload_file}")
        next_payload = lambda: payloads[random.randrange(len(payloads))]  # noqa: E731
    else:
        next_payload = _payload_generator(args.record_size)
    stats = Stats(args.num_records, out=out)
    if args.client == "odradek":
        _produce_odradek(args, props, stats, next_payload)
    else:
        from . import perf_clients
        {"confluent-kafka": perf_clients.produce_confluent,
         "aiokafka": perf_clients.produce_aiokafka}[args.client](args, props, stats, next_payload)
    stats.print_total()
    return 0


def _produce_odradek(args: Any, props: dict[str, Any], stats: Stats, next_payload: Callable[[], bytes]) -> None:
    from .producer import Producer

    producer = Producer(props)
    topic = args.topic
    txn = Transactions(producer, args.txn_duration_ms) if args.txn_duration_ms else None
    pending: dict[int, tuple[list[float], int]] = {}  # touched by this thread only
    completions: collections.deque = collections.deque()  # (result, time) appended by the sender thread

    def on_batch(result: Any) -> None:
        completions.append((result, time.monotonic()))

    def drain_completions() -> None:
        while completions:
            result, now = completions.popleft()
            send_times, nbytes = pending.pop(id(result))
            if result.error is not None:
                print(f"Error when sending message to topic {topic} with key: null, value: {nbytes} bytes "
                      f"with error: {result.error}", file=sys.stderr)
                continue
            stats.record_batch(send_times, nbytes, now)

    try:
        start = time.monotonic()
        throttler = Throttler(args.throughput, start)
        send = producer.send
        last_result = None
        last_list: list[float] = []
        for i in range(args.num_records):
            payload = next_payload()
            t = time.monotonic()
            if txn is not None:
                txn.before_send(t)
            res = send(topic, payload).batch
            if res is not last_result:
                entry = pending.get(id(res))
                if entry is None:
                    entry = pending[id(res)] = ([], len(payload))
                    last_list = entry[0]
                    last_list.append(t)
                    res.add_done_callback(on_batch)
                else:
                    last_list = entry[0]
                    last_list.append(t)
                last_result = res
            else:
                last_list.append(t)
            if txn is not None:
                txn.after_send(t)
            if completions:
                drain_completions()
            if args.throughput > 0:
                throttler.throttle(i + 1, t)
        if txn is not None:
            txn.commit()
        producer.flush()
        drain_completions()
    finally:
        producer.close()
    drain_completions()


# -- consumer -----------------------------------------------------------------------------

HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
          "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def _fmt_time(ts: float, fmt: str | None = None) -> str:
    d = datetime.fromtimestamp(ts)
    if fmt:
        return d.strftime(fmt)
    return d.strftime("%Y-%m-%d %H:%M:%S:") + f"{d.microsecond // 1000:03d}"


def _consumer_parser() -> ArgParser:
    ap = ArgParser(prog="odradek perf consumer")
    ap.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--messages", type=int, required=True)
    ap.add_argument("--from-latest", action="store_true")
    ap.add_argument("--timeout", type=int, default=10000)
    ap.add_argument("--fetch-size", type=int, default=1048576)
    ap.add_argument("--group", default=None)
    ap.add_argument("--consumer.config", dest="consumer_config")
    ap.add_argument("--client", choices=["odradek", "confluent-kafka", "aiokafka"], default="odradek")
    ap.add_argument("--hide-header", action="store_true")
    ap.add_argument("--date-format", default=None)
    ap.add_argument("--show-detailed-stats", action="store_true")
    ap.add_argument("--reporting-interval", type=int, default=5000)
    return ap


def consumer_perf(argv: list[str], out=None) -> int:
    args = _consumer_parser().parse_args(argv)
    out = out or sys.stdout
    props: dict[str, Any] = properties_file(args.consumer_config)
    props["bootstrap.servers"] = resolve_bootstrap(args.bootstrap_server or props.get("bootstrap.servers"))
    if not props.get("group.id"):
        props["group.id"] = args.group or f"perf-consumer-{random.randrange(100000)}"
    from . import perf_clients
    consume = {"odradek": _consume_odradek, "confluent-kafka": perf_clients.consume_confluent,
               "aiokafka": perf_clients.consume_aiokafka}[args.client]
    start_wall = time.time()
    start = time.monotonic()
    count, nbytes, timed_out, assigned_at = consume(args, props)
    end = time.monotonic()
    end_wall = start_wall + (end - start)
    if timed_out:
        print(f"WARNING: Exiting before consuming the expected number of messages: timeout ({args.timeout} ms) "
              f"exceeded. You can use the --timeout option to increase the timeout.", file=sys.stderr)
    elapsed = max(end - start, 1e-9)
    mb = nbytes / (1024.0 * 1024.0)
    # As kafka-consumer-perf-test: the group's first assignment is rebalance time, the rest fetch time.
    rebalance_ms = int(((assigned_at or start) - start) * 1000)
    fetch_ms = max(int(elapsed * 1000) - rebalance_ms, 1)
    if not args.hide_header:
        print(HEADER, file=out)
    print(f"{_fmt_time(start_wall, args.date_format)}, {_fmt_time(end_wall, args.date_format)}, "
          f"{mb:.4f}, {mb / elapsed:.4f}, {count}, {count / elapsed:.4f}, {rebalance_ms}, {fetch_ms}, "
          f"{mb / (fetch_ms / 1000.0):.4f}, {count / (fetch_ms / 1000.0):.4f}", file=out, flush=True)
    return 0


class Tally:
    """A consumer run's count: records and their key + value bytes until ``target`` records, or
    until ``timeout_ms`` passed without one; the instant of each assignment (the first one ends
    the rebalance time)."""

    def __init__(self, target: int, timeout_ms: int) -> None:
        self.target = target
        self.timeout_s = timeout_ms / 1000.0
        self.count = self.nbytes = 0
        self.timed_out = False
        self.assigned: list[float] = []
        self._last = time.monotonic()

    def going(self) -> bool:
        return self.count < self.target and not self.timed_out

    def wanted(self) -> int:
        return self.target - self.count

    def add(self, batch: dict[Any, list[Any]]) -> None:
        """A poll's result: lists of records with ``serialized_key_size`` and
        ``serialized_value_size`` (-1 for a null key or value)."""
        count = nbytes = 0
        for recs in batch.values():
            count += len(recs)
            for r in recs:
                nbytes += (r.serialized_key_size if r.serialized_key_size > 0 else 0) + \
                          (r.serialized_value_size if r.serialized_value_size > 0 else 0)
        self.counted(count, nbytes, bool(batch))

    def counted(self, count: int, nbytes: int, arrived: bool) -> None:
        """A poll gave ``count`` records of ``nbytes``; with nothing ``arrived`` for the timeout,
        the run has timed out."""
        now = time.monotonic()
        if not arrived:
            self.timed_out = now - self._last > self.timeout_s
            return
        self._last = now
        self.count += count
        self.nbytes += nbytes

    def result(self) -> tuple[int, int, bool, float | None]:
        return self.count, self.nbytes, self.timed_out, self.assigned[0] if self.assigned else None


def _consume_odradek(args: Any, props: dict[str, Any]) -> tuple[int, int, bool, float | None]:
    """Subscribe through the group and count records; also when the first assignment came."""
    from .consumer import Consumer, ConsumerRebalanceListener

    tally = Tally(args.messages, args.timeout)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            pass

        def on_partitions_assigned(self, partitions):
            tally.assigned.append(time.monotonic())

    props = dict(props)
    props.setdefault("max.partition.fetch.bytes", args.fetch_size)
    props.setdefault("max.poll.records", 100000)
    props.setdefault("enable.auto.commit", False)
    props["auto.offset.reset"] = "latest" if args.from_latest else "earliest"
    consumer = Consumer(props)
    try:
        if not consumer.partitions_for_topic(args.topic):
            raise ToolError(f"topic {args.topic!r} does not exist")
        consumer.subscribe([args.topic], listener=Listener())
        while tally.going():
            tally.add(consumer.poll(timeout_ms=100, max_records=tally.wanted()))
        return tally.result()
    finally:
        consumer.close(autocommit=False)


def commit_perf(argv: list[str], out=None) -> int:
    """Latency of synchronous offset commits by one group member (acks=-1 on __consumer_offsets)."""
    import statistics

    from .consumer import Consumer

    ap = ArgParser(prog="odradek perf commit")
    ap.add_argument("--bootstrap-server", dest="bootstrap_server")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", default=None)
    ap.add_argument("--commits", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args(argv)
    out = out or sys.stdout
    consumer = Consumer(bootstrap_servers=resolve_bootstrap(args.bootstrap_server), enable_auto_commit=False,
                        group_id=args.group or f"perf-commit-{random.randrange(100000)}")
    try:
        if not consumer.partitions_for_topic(args.topic):
            raise ToolError(f"topic {args.topic!r} does not exist")
        consumer.subscribe([args.topic])
        deadline = time.monotonic() + 60
        while not consumer.assignment():
            if time.monotonic() > deadline:
                raise ToolError("no partitions assigned within 60 s")
            consumer.poll(timeout_ms=100)
        tp = sorted(consumer.assignment())[0]
        times = []
        for i in range(args.warmup + args.commits):
            t0 = time.perf_counter()
            consumer.commit({tp: i})
            times.append((time.perf_counter() - t0) * 1000)
        times = times[args.warmup:]
        q = statistics.quantiles(times, n=1000)
        print(f"{len(times)} synchronous commits: avg {statistics.fmean(times):.2f} ms, p50 "
              f"{statistics.median(times):.2f} ms, p99 {q[989]:.2f} ms, p99.9 {q[998]:.2f} ms, "
              f"max {max(times):.2f} ms", file=out)
    finally:
        consumer.close(autocommit=False)
    return 0


def _module_tool(module: str) -> Callable[[list[str]], int]:
    """A tool in a module of its own, imported when run. The broker's own benchmarks (framing,
    log-append) live with the broker, named here as zk/cli names every subcommand."""
    def run(argv: list[str]) -> int:
        import importlib
        return int(importlib.import_module(module).main(argv))
    return run


COMMANDS = {"producer": producer_perf, "consumer": consumer_perf, "e2e": _module_tool("odradek.client.perf_e2e"), "commit": commit_perf,
            "failover": _module_tool("odradek.client.perf_failover"), "framing": _module_tool("odradek.broker.network.framing_bench"),
            "log-append": _module_tool("odradek.broker.log.append_bench"),
            "requests": _module_tool("odradek.client.perf_requests"), "scale": _module_tool("odradek.zk.perf_scale")}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: odradek perf producer|consumer|e2e|commit|failover|framing|log-append|requests|scale [options]")
        return 0 if argv else 1
    if argv[0] not in COMMANDS:
        print(f"Error: unknown perf tool {argv[0]!r} (producer, consumer, e2e, commit, failover, framing, log-append, requests, scale)", file=sys.stderr)
        return 1
    fn = COMMANDS[argv[0]]
    try:
        return run_tool(lambda: fn(argv[1:]))
    except KeyboardInterrupt:
        return 130


if os.environ.get("ODRADEK_PERF_DEBUG"):  # pragma: no cover
    import logging
    logging.basicConfig(level=logging.DEBUG)
