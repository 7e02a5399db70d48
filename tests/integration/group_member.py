"""One consumer-group member, run as its own process by the group tests (so it can be
killed with SIGKILL), driven through a third-party client's public API.

Invariant: everything the member does is appended to ``--out`` as one JSON line per
event, written and flushed before the next step, so a SIGKILL can only lose the step in
progress: ``start``, ``assign`` (whenever the assignment changed), ``rec`` (a record
processed: partition, offset, value), ``commit`` (offsets committed, after the commit
returned). ``--commit after`` commits what was processed after each batch
(at-least-once); ``before`` commits a batch's end before processing it (at-most-once);
``none`` never commits. SIGTERM closes the consumer cleanly (it leaves the group).

usage: group_member.py CLIENT BOOTSTRAP GROUP TOPIC OUT [--commit MODE] [--session-ms N]
                       [--delay-ms N] [--max-records N]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time

stopping = False


def _on_term(signum, frame) -> None:
    global stopping
    stopping = True


class Out:
    def __init__(self, path: str):
        self.f = open(path, "a", buffering=1)

    def __call__(self, **event) -> None:
        event["t"] = time.time()
        self.f.write(json.dumps(event) + "\n")
        self.f.flush()


# ------------------------------------------------------------------ adapters
# poll() -> [(partition, offset, value)], assignment() -> [partition], commit({p: next}), close()

class KafkaPython:
    def __init__(self, a):
        from kafka import KafkaConsumer
        self.topic = a.topic
        self.c = KafkaConsumer(bootstrap_servers=a.bootstrap, group_id=a.group, client_id=a.name,
                               enable_auto_commit=False, auto_offset_reset="earliest",
                               session_timeout_ms=a.session_ms, heartbeat_interval_ms=max(a.session_ms // 6, 100),
                               max_poll_interval_ms=a.poll_interval_ms, max_poll_records=a.batch,
                               request_timeout_ms=max(a.poll_interval_ms + 5000, 30000),
                               retry_backoff_ms=100)
        self.c.subscribe([a.topic])
        # kafka-python 3.0.12 can stall for good in a rebalance it starts itself. A leader rejoins
        # when the topic's partitions differ from those it assigned from; one whose first join
        # came before any metadata update since subscribe() assigned from none, so the next update
        # starts a rebalance. That join's own assignment makes need_rejoin() false again: when
        # poll()'s timeout cut the join short, the finished join is never taken up and its
        # heartbeat stays disabled until the session times out (seen with
        # group.initial.rebalance.delay.ms=0). topics() is a metadata update before the first join.
        while a.topic not in self.c.topics():
            time.sleep(0.1)

    def poll(self):
        out = []
        for tp, recs in self.c.poll(timeout_ms=200, max_records=self._batch()).items():
            out.extend((tp.partition, r.offset, r.value.decode()) for r in recs)
        return out

    def _batch(self):
        return self.c.config["max_poll_records"]

    def assignment(self):
        return sorted(tp.partition for tp in self.c.assignment())

    def commit(self, offsets):
        from kafka import OffsetAndMetadata, TopicPartition
        self.c.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})

    def close(self):
        self.c.close()


class Confluent:
    def __init__(self, a):
        from confluent_kafka import Consumer
        self.topic = a.topic
        self.batch = a.batch
        self.c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": a.group, "client.id": a.name,
                           "enable.auto.commit": False, "auto.offset.reset": "earliest",
                           "session.timeout.ms": a.session_ms, "heartbeat.interval.ms": max(a.session_ms // 6, 100),
                           "max.poll.interval.ms": a.poll_interval_ms, "topic.metadata.refresh.interval.ms": 2000,
                           "partition.assignment.strategy": "range"})
        self.c.subscribe([a.topic])

    def poll(self):
        out = []
        for m in self.c.consume(num_messages=self.batch, timeout=0.2):
            if m.error():
                continue
            out.append((m.partition(), m.offset(), m.value().decode()))
        return out

    def assignment(self):
        return sorted(tp.partition for tp in self.c.assignment())

    def commit(self, offsets):
        from confluent_kafka import TopicPartition
        self.c.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()], asynchronous=False)

    def close(self):
        self.c.close()


class AioKafka:
    def __init__(self, a):
        from aiokafka import AIOKafkaConsumer
        self.topic = a.topic
        self.batch = a.batch
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)

        async def start():
            consumer = AIOKafkaConsumer(
                a.topic, bootstrap_servers=a.bootstrap, group_id=a.group, client_id=a.name,
                enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=a.session_ms,
                heartbeat_interval_ms=max(a.session_ms // 6, 100), max_poll_interval_ms=a.poll_interval_ms,
                retry_backoff_ms=100, metadata_max_age_ms=5000)
            await consumer.start()
            return consumer
        self.c = self.loop.run_until_complete(start())

    def poll(self):
        batches = self.loop.run_until_complete(self.c.getmany(timeout_ms=200, max_records=self.batch))
        return [(tp.partition, r.offset, r.value.decode()) for tp, recs in batches.items() for r in recs]

    def assignment(self):
        return sorted(tp.partition for tp in self.c.assignment())

    def commit(self, offsets):
        from aiokafka import TopicPartition
        self.loop.run_until_complete(self.c.commit({TopicPartition(self.topic, p): o for p, o in offsets.items()}))

    def close(self):
        self.loop.run_until_complete(self.c.stop())


CLIENTS = {"kafka-python": KafkaPython, "confluent-kafka": Confluent, "aiokafka": AioKafka}


def commit(consumer, ends: dict[int, int], out: Out) -> bool:
    try:
        consumer.commit(ends)
    except Exception as exc:   # e.g. a rebalance took the partitions: the next owner re-reads them
        out(e="commit_failed", offsets=ends, error=repr(exc))
        return False
    out(e="commit", offsets=ends)
    return True


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("client", choices=sorted(CLIENTS))
    p.add_argument("bootstrap")
    p.add_argument("group")
    p.add_argument("topic")
    p.add_argument("out")
    p.add_argument("--name", default="member")
    p.add_argument("--commit", choices=["none", "after", "before"], default="none")
    p.add_argument("--session-ms", type=int, default=6000)
    p.add_argument("--poll-interval-ms", type=int, default=30000)
    p.add_argument("--delay-ms", type=float, default=0.0, help="processing time per record")
    p.add_argument("--batch", type=int, default=100)
    a = p.parse_args(argv)
    import logging
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _on_term)
    out = Out(a.out)
    out(e="start", name=a.name)
    consumer = CLIENTS[a.client](a)
    last_assignment = None
    try:
        while not stopping:
            records = consumer.poll()
            assignment = consumer.assignment()
            if assignment != last_assignment:
                out(e="assign", parts=assignment)
                last_assignment = assignment
            if not records:
                continue
            ends: dict[int, int] = {}
            for part, offset, _ in records:
                ends[part] = max(ends.get(part, -1), offset + 1)
            if a.commit == "before" and not commit(consumer, ends, out):
                continue   # at-most-once: unprocessed rather than maybe processed twice
            for part, offset, value in records:
                if a.delay_ms:
                    time.sleep(a.delay_ms / 1000.0)
                out(e="rec", p=part, o=offset, v=value)
            if a.commit == "after":
                commit(consumer, ends, out)
    finally:
        consumer.close()
        out(e="closed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
