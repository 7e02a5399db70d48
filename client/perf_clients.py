"""The third-party clients of ``odradek perf producer|consumer --client``: confluent-kafka
(librdkafka) and aiokafka, measured by the same ``Stats`` and counts as odradek's own clients, so
runs of each against the same broker compare them (issue 17 asks for aiokafka beside odradek).

Invariant: a client is imported only when chosen (one missing is one ToolError line), and each
runner measures what odradek's does: a record's latency from its send to its acknowledgement; for
consumers, records and key + value bytes from the subscription until ``--messages`` (the first
assignment's instant kept apart, as rebalance time).
"""
from __future__ import annotations

import asyncio
import importlib
import sys
import time
from types import ModuleType
from typing import Any, Callable

from .perf import Stats, Tally, Throttler, Transactions
from .tools import ToolError


def _client(module: str, name: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ToolError(f"{name} is not installed") from None


def produce_confluent(args: Any, props: dict[str, Any], stats: Stats, next_payload: Callable[[], bytes]) -> None:
    confluent_kafka = _client("confluent_kafka", "confluent-kafka")
    conf = {k: v for k, v in props.items()}
    producer = confluent_kafka.Producer(conf)
    topic = args.topic
    txn = Transactions(producer, args.txn_duration_ms) if args.txn_duration_ms else None

    start = time.monotonic()
    throttler = Throttler(args.throughput, start)
    for i in range(args.num_records):
        payload = next_payload()
        t = time.monotonic()
        n = len(payload)

        def cb(err: Any, msg: Any, t: float = t, n: int = n) -> None:
            now = time.monotonic()
            if err is not None:
                print(f"Error when sending message to topic {topic}: {err}", file=sys.stderr)
            else:
                stats.record(int((now - t) * 1000), n, now)
        if txn is not None:
            txn.before_send(t)
        while True:
            try:
                producer.produce(topic, payload, on_delivery=cb)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        if txn is not None:
            txn.after_send(t)
        if args.throughput > 0:
            throttler.throttle(i + 1, t)
    if txn is not None:
        txn.commit()
    producer.flush()




def consume_confluent(args: Any, props: dict[str, Any]) -> tuple[int, int, bool, float | None]:
    confluent_kafka = _client("confluent_kafka", "confluent-kafka")
    conf = {k: v for k, v in props.items()}
    conf.setdefault("enable.auto.commit", False)
    conf["auto.offset.reset"] = "latest" if args.from_latest else "earliest"
    conf.setdefault("max.partition.fetch.bytes", args.fetch_size)
    consumer = confluent_kafka.Consumer(conf)
    try:
        try:
            md = consumer.list_topics(args.topic, timeout=10)
        except confluent_kafka.KafkaException as exc:
            raise ToolError(f"metadata for {args.topic!r}: {exc}") from None
        tmeta = md.topics.get(args.topic)
        if tmeta is None or tmeta.error is not None or not tmeta.partitions:
            raise ToolError(f"topic {args.topic!r} does not exist")
        tally = Tally(args.messages, args.timeout)
        consumer.subscribe([args.topic], on_assign=lambda _consumer, _parts: tally.assigned.append(time.monotonic()))
        while tally.going():
            msgs = consumer.consume(num_messages=min(10000, tally.wanted()), timeout=0.1)
            count = nbytes = 0
            for m in msgs:
                if m.error() is not None:
                    continue
                count += 1
                k, v = m.key(), m.value()
                nbytes += (len(k) if k else 0) + (len(v) if v else 0)
            tally.counted(count, nbytes, bool(msgs))
        return tally.result()
    finally:
        consumer.close()


# -- aiokafka -------------------------------------------------------------------------------

_AIOKAFKA_NAMES = {"batch.size": "max_batch_size"}   # else Kafka's name with '_' for '.'


def _aiokafka_settings(props: dict[str, Any]) -> dict[str, Any]:
    """Kafka producer properties as AIOKafkaProducer's keyword arguments (values typed)."""
    out: dict[str, Any] = {}
    for key, value in props.items():
        if isinstance(value, str):
            if value.lower() in ("true", "false"):
                value = value.lower() == "true"
            elif value.lstrip("-").isdigit():
                value = int(value)
        if key == "acks" and value in ("all", -1):
            value = "all"
        out[_AIOKAFKA_NAMES.get(key, key.replace(".", "_"))] = value
    return out


def produce_aiokafka(args: Any, props: dict[str, Any], stats: Stats, next_payload: Callable[[], bytes]) -> None:
    aiokafka = _client("aiokafka", "aiokafka")
    if args.txn_duration_ms:
        raise ToolError("--client aiokafka does not run transactions here: use odradek or confluent-kafka")
    settings = _aiokafka_settings(props)
    topic = args.topic

    def done(sent: float, n: int, future: asyncio.Future) -> None:
        now = time.monotonic()
        error = "cancelled" if future.cancelled() else future.exception()
        if error is not None:
            print(f"Error when sending message to topic {topic}: {error}", file=sys.stderr)
        else:
            stats.record(int((now - sent) * 1000), n, now)

    async def run() -> None:
        try:
            producer = aiokafka.AIOKafkaProducer(**settings)
        except TypeError as exc:   # a property aiokafka has no argument for
            raise ToolError(f"--client aiokafka: {exc}") from None
        await producer.start()
        try:
            throttler = Throttler(args.throughput, time.monotonic())
            for i in range(args.num_records):
                payload = next_payload()
                sent = time.monotonic()
                future = await producer.send(topic, payload)
                future.add_done_callback(lambda f, sent=sent, n=len(payload): done(sent, n, f))
                if args.throughput > 0:
                    await asyncio.sleep(throttler.ahead(i + 1, sent))
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(run())


def consume_aiokafka(args: Any, props: dict[str, Any]) -> tuple[int, int, bool, float | None]:
    aiokafka = _client("aiokafka", "aiokafka")
    tally = Tally(args.messages, args.timeout)

    class Listener(_client("aiokafka.abc", "aiokafka").ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        def on_partitions_assigned(self, assigned: Any) -> None:
            tally.assigned.append(time.monotonic())

    async def run() -> tuple[int, int, bool, float | None]:
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=props["bootstrap.servers"], group_id=props["group.id"], enable_auto_commit=False,
            auto_offset_reset="latest" if args.from_latest else "earliest",
            max_partition_fetch_bytes=args.fetch_size)
        await consumer.start()
        try:
            if args.topic not in await consumer.topics():
                raise ToolError(f"topic {args.topic!r} does not exist")
            consumer.subscribe([args.topic], listener=Listener())
            while tally.going():
                tally.add(await consumer.getmany(timeout_ms=100, max_records=tally.wanted()))
            return tally.result()
        finally:
            await consumer.stop()

    return asyncio.run(run())
