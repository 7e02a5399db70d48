"""``odradek perf e2e``: end-to-end latency, from a record's send until a consumer has it.

Invariant: without ``--throughput`` it is kafka.tools.EndToEndLatency of Kafka 2.8, line for line:
one record at a time, each sent, acknowledged and read back before the next, so the figure is
one record's whole round trip on an idle path. With ``--throughput N`` (odradek's addition: what a
latency goal "at N msg/s" needs) the producer (``linger.ms=0``, batching what waits while a request
is in flight, as any producer does) sends N records a second without waiting (paced as
``perf producer`` paces, by Kafka's rule: a sleep once it is 2 ms ahead), each value
starting with its send instant, while a consumer thread in the same process reads them and takes
each record's latency as the instant ``poll`` returned it minus that send instant (one monotonic
clock); the same two summary lines, then the percentiles to 0.01 ms. Both read only partition 0
of the topic, from its end at the start. Before the first record, what the process built so far
(its modules, the two clients) is collected once and frozen out of the cycle collector
(``gc.freeze``), as a broker freezes its own at startup: otherwise CPython's first full
collection, 20-50 ms over every object the imports made, falls inside a run of a few seconds as
its longest pause, a cost a long-running application pays once, at startup.
"""
from __future__ import annotations

import gc
import random
import struct
import sys
import threading
import time
from typing import Any

from .perf import Throttler, percentiles
from .structs import TopicPartition
from .tools import ArgParser, ToolError, kv_pairs, resolve_bootstrap

SENT_AT = struct.Struct(">d")   # the send instant (time.perf_counter) at the head of a value


def _parser() -> ArgParser:
    ap = ArgParser(prog="odradek perf e2e")
    ap.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--num-messages", type=int, required=True)
    ap.add_argument("--acks", default="1")
    ap.add_argument("--message-size", type=int, default=100)
    ap.add_argument("--producer-props", nargs="+", default=[])
    ap.add_argument("--timeout", type=int, default=10000, help="ms to wait for each message")
    ap.add_argument("--throughput", type=float, default=0,
                    help="send this many messages per second without waiting for each (default: one at a time)")
    return ap


def main(argv: list[str], out: Any = None) -> int:
    from .consumer import Consumer
    from .producer import Producer

    args = _parser().parse_args(argv)
    out = out or sys.stdout
    at_rate = args.throughput > 0
    if args.acks not in ("1", "all", "-1", "0"):
        raise ToolError("Latency testing requires synchronous acknowledgement. Please use 1 or all")
    if at_rate and args.message_size < SENT_AT.size:
        raise ToolError(f"--throughput needs --message-size of at least {SENT_AT.size} (the send instant)")
    bootstrap = resolve_bootstrap(args.bootstrap_server)
    pprops = {"bootstrap.servers": bootstrap, "acks": args.acks, "linger.ms": 0}
    if not at_rate:   # one at a time: EndToEndLatency's unbatched producer
        pprops["batch.size"] = 0
    pprops.update(kv_pairs(args.producer_props, "--producer-props"))
    producer = Producer(pprops)
    # one at a time, EndToEndLatency's consumer polls without waiting; at a rate it long-polls as
    # consumers do (the broker answers when the high watermark moves), so it does not spin
    consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "latest",
                         "fetch.max.wait.ms": 500 if at_rate else 0})
    try:
        parts = producer.partitions_for(args.topic)
        if len(parts) != 1:
            print(f"WARNING: {args.topic} has {len(parts)} partitions; using partition 0 only", file=sys.stderr)
        tp = TopicPartition(args.topic, 0)
        consumer.assign([tp])
        consumer.seek_to_end(tp)
        consumer.position(tp)
        gc.collect()
        gc.freeze()   # startup's objects out of the collector (see the module doc)
        if at_rate:
            latencies = _at_rate(args, producer, consumer, tp)
        else:
            latencies = _one_at_a_time(args, producer, consumer, tp, out)
        n = len(latencies)
        print(f"Avg latency: {sum(latencies) / max(n, 1):.4f} ms", file=out)
        if latencies:
            p50, p99, p999 = percentiles(latencies, (0.5, 0.99, 0.999))
            print(f"Percentiles: 50th = {int(p50)}, 99th = {int(p99)}, 99.9th = {int(p999)}", file=out, flush=True)
            if at_rate:
                print(f"Percentiles (ms): 50th = {p50:.2f}, 99th = {p99:.2f}, 99.9th = {p999:.2f}, "
                      f"max = {max(latencies):.2f}", file=out, flush=True)
    finally:
        gc.unfreeze()
        producer.close()
        consumer.close()
    return 0


def _one_at_a_time(args: Any, producer: Any, consumer: Any, tp: TopicPartition, out: Any) -> list[float]:
    latencies: list[float] = []
    rnd = random.Random()
    for i in range(args.num_messages):
        message = bytes(rnd.randrange(26) + 65 for _ in range(args.message_size))
        begin = time.perf_counter()
        producer.send(args.topic, message, partition=0).get(timeout=30)
        got = None
        deadline = time.monotonic() + args.timeout / 1000.0
        while got is None:
            batch = consumer.poll(timeout_ms=max(1, int((deadline - time.monotonic()) * 1000)))
            recs = batch.get(tp, [])
            if recs:
                got = recs[0]
                if len(recs) > 1:
                    raise ToolError("Only one result was expected during this test. We found " + str(len(recs)))
            elif time.monotonic() >= deadline:
                raise ToolError("poll timed out")
        elapsed = time.perf_counter() - begin
        if got.value != message:
            raise ToolError(f"The message read [{got.value!r}] did not match the message sent")
        if i % 1000 == 0:
            print(f"{i}\t{elapsed * 1000.0}", file=out, flush=True)
        latencies.append(elapsed * 1000.0)
    return latencies


def _at_rate(args: Any, producer: Any, consumer: Any, tp: TopicPartition) -> list[float]:
    """Send ``--num-messages`` at ``--throughput`` while a thread reads them back; the latencies."""
    latencies: list[float] = []
    failure: list[str] = []
    filler = b"x" * (args.message_size - SENT_AT.size)

    def read_back() -> None:
        last = time.monotonic()
        while len(latencies) < args.num_messages and not failure:
            recs = consumer.poll(timeout_ms=100).get(tp, [])
            now = time.perf_counter()
            if recs:
                last = time.monotonic()
                latencies.extend((now - SENT_AT.unpack_from(r.value)[0]) * 1000.0 for r in recs)
            elif time.monotonic() - last > args.timeout / 1000.0:
                failure.append(f"no message read for {args.timeout} ms ({len(latencies)} of {args.num_messages} read)")

    reader = threading.Thread(target=read_back, name="perf-e2e-reader", daemon=True)
    reader.start()
    throttler = Throttler(args.throughput, time.monotonic())
    try:
        for i in range(args.num_messages):
            producer.send(args.topic, SENT_AT.pack(time.perf_counter()) + filler, partition=0)
            throttler.throttle(i + 1, time.monotonic())
        producer.flush()
    finally:
        reader.join()
    if failure:
        raise ToolError(failure[0])
    if len(latencies) != args.num_messages:
        raise ToolError(f"read {len(latencies)} messages, sent {args.num_messages}")
    return latencies
