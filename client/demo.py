"""``odradek demo``: create a topic, produce keyed JSON records with acks=all, read them all back.

Invariant: the demo checks what it claims: every produced (key, value) is read
back exactly once from the partition murmur2 assigns to its key, offsets per
partition are contiguous from where the run started; anything missing,
duplicated or misplaced makes it exit 1.
"""
from __future__ import annotations

import json
import sys
import time
from collections import Counter, defaultdict

from odradek.protocol.errors import ErrorCode, KafkaError

from .partitioner import partition_for_key
from .structs import NewTopic, TopicPartition
from .tools import ArgParser, ToolError, resolve_bootstrap, run_tool


def _parser() -> ArgParser:
    ap = ArgParser(prog="odradek demo", description="Produce and consume keyed records through a demo topic.")
    ap.add_argument("--bootstrap-server", dest="bootstrap_server")
    ap.add_argument("--topic", default="demo")
    ap.add_argument("--records", type=int, default=5000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--replication-factor", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the records to come back")
    return ap


def _say(msg: str) -> None:
    print(msg, flush=True)


def _progress(msg: str) -> None:
    """A progress line, rewritten in place on a terminal (silent when piped)."""
    if sys.stdout.isatty():
        print(f"\r  {msg}", end="", flush=True)


def _end_progress() -> None:
    if sys.stdout.isatty():
        print()


def run(argv: list[str]) -> int:
    from .admin import AdminClient
    from .consumer import Consumer
    from .producer import Producer

    args = _parser().parse_args(argv)
    if args.records < 1:
        raise ToolError("--records must be >= 1")
    bootstrap = resolve_bootstrap(args.bootstrap_server)
    _say(f"odradek demo: bootstrap {bootstrap}, topic {args.topic!r}")

    t0 = time.monotonic()
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        cluster = admin.describe_cluster()
        _say(f"cluster {cluster['cluster_id']}: {len(cluster['brokers'])} broker(s), controller {cluster['controller_id']}")
        rf = args.replication_factor
        if rf > len(cluster["brokers"]):
            raise ToolError(f"--replication-factor {rf} is larger than the {len(cluster['brokers'])} live broker(s)")
        try:
            admin.create_topics([NewTopic(args.topic, args.partitions, rf)], timeout_ms=30000)
            _say(f"created topic {args.topic!r}: {args.partitions} partitions, replication factor {rf}")
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            _say(f"topic {args.topic!r} already exists: reusing it")
        # wait until every partition has a leader
        deadline = time.monotonic() + 30
        while True:
            desc = admin.describe_topics([args.topic])[0]
            parts = desc["partitions"]
            if parts and all(p["leader"] >= 0 for p in parts):
                break
            if time.monotonic() > deadline:
                raise ToolError(f"topic {args.topic!r} has partitions without a leader after 30 s")
            time.sleep(0.2)
    num_partitions = len(parts)
    for p in parts:
        _say(f"  partition {p['partition']}: leader {p['leader']}, replicas {p['replicas']}, isr {p['isr']}")

    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    tps = [TopicPartition(args.topic, p["partition"]) for p in parts]
    consumer.assign(tps)
    start_offsets = consumer.end_offsets(tps)
    for tp in tps:
        consumer.seek(tp, start_offsets[tp])

    # produce
    sent: dict[str, bytes] = {}
    t1 = time.monotonic()
    producer = Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, client_id="odradek-demo")
    failures: list[BaseException] = []
    try:
        futures = []
        for i in range(args.records):
            key = f"user-{i % 100}"
            value = json.dumps({"seq": i, "user": key, "ts": int(time.time() * 1000)}, separators=(",", ":"))
            sent[str(i)] = value.encode()
            futures.append((key, producer.send(args.topic, value, key=key)))
            if (i + 1) % 1000 == 0:
                _progress(f"produced {i + 1}/{args.records}")
        producer.flush(timeout=args.timeout)
        placed: dict[str, set[int]] = defaultdict(set)
        for key, fut in futures:
            try:
                md = fut.get(timeout=0)
                placed[key].add(md.partition)
            except KafkaError as exc:
                failures.append(exc)
    finally:
        producer.close()
    produce_s = time.monotonic() - t1
    _end_progress()
    _say(f"produced {args.records - len(failures)}/{args.records} records with acks=all in {produce_s:.2f} s "
         f"({args.records / max(produce_s, 1e-9):,.0f} records/s)")
    if failures:
        _say(f"  {len(failures)} failed, first: {failures[0]}")

    # consume back
    t2 = time.monotonic()
    got: dict[str, tuple[str, int, int]] = {}
    dupes = 0
    per_partition: Counter[int] = Counter()
    offsets_seen: dict[int, list[int]] = defaultdict(list)
    deadline = time.monotonic() + args.timeout
    try:
        while len(got) < len(sent) and time.monotonic() < deadline:
            for tp, recs in consumer.poll(timeout_ms=500).items():
                for r in recs:
                    try:
                        doc = json.loads(r.value)
                        seq = str(doc["seq"])
                    except (ValueError, KeyError, TypeError):
                        continue
                    if seq not in sent or sent[seq] != r.value:
                        continue
                    if seq in got:
                        dupes += 1
                        continue
                    got[seq] = (r.key.decode() if r.key else "", tp.partition, r.offset)
                    per_partition[tp.partition] += 1
                    offsets_seen[tp.partition].append(r.offset)
            _progress(f"consumed {len(got)}/{len(sent)}")
    finally:
        consumer.close()
    _end_progress()
    consume_s = time.monotonic() - t2
    _say(f"consumed {len(got)}/{len(sent)} records in {consume_s:.2f} s")

    ok = not failures and len(got) == len(sent) and dupes == 0
    _say("per-partition counts:")
    for p in range(num_partitions):
        _say(f"  partition {p}: {per_partition.get(p, 0)} records")
    key_partitions: dict[str, set[int]] = defaultdict(set)
    for key, part, _off in got.values():
        key_partitions[key].add(part)
    split = {k: v for k, v in key_partitions.items() if len(v) != 1}
    wrong = {k: v for k, v in key_partitions.items()
             if v != {partition_for_key(k.encode(), num_partitions)}}
    if split or wrong:
        ok = False
        _say(f"KEY PLACEMENT WRONG: {len(split)} key(s) on several partitions, "
             f"{len(wrong)} key(s) not on their murmur2 partition")
    else:
        _say(f"every one of {len(key_partitions)} keys landed on exactly one partition, the one murmur2 picks "
             f"(same as the Java client)")
    for p, offs in offsets_seen.items():
        offs.sort()
        if offs and offs[-1] - offs[0] + 1 != len(offs):
            _say(f"  partition {p}: offsets are not contiguous ({offs[0]}..{offs[-1]} for {len(offs)} records)")
    if dupes:
        _say(f"{dupes} duplicate record(s) read")
    if len(got) < len(sent):
        _say(f"MISSING: {len(sent) - len(got)} record(s) never came back")
    _say(f"total {time.monotonic() - t0:.2f} s: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    try:
        return run_tool(lambda: run(argv))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
