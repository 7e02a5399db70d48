"""The exactly-once sink end to end: a streaming copy-and-transform query killed -9 mid-stream, twice
(once while a write task's transaction is open, once at a random point), restarted from its
checkpoint; a read_committed consumer of the output sees every input row exactly once.

Run as a script (``python test_exactly_once.py BOOTSTRAP CHECKPOINT``) this module is the query process
the test kills.
"""
from __future__ import annotations

import collections
import os
import random
import subprocess
import sys
import time

from odradek.client import Consumer, Producer, TopicPartition

IN, OUT = "eos-in", "eos-out"
ROWS = 3600
PER_TRIGGER = 300  # 12 micro-batches of 3 write tasks (one per input partition), ~100 rows each

# one broker: the transaction log must not ask for more replicas than there are brokers
TXN_OVERRIDES = {
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "transaction.state.log.num.partitions": 5,
    "offsets.topic.num.partitions": 5,
    "offsets.topic.replication.factor": 1,
}


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed", timeout: float = 60.0) -> list:
    """Every record a consumer with ``isolation`` sees in ``topic`` up to its end offsets (the LSO when committed)."""
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", isolation_level=isolation,
                  enable_auto_commit=False) as c:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or [])]
        c.assign(tps)
        ends = c.end_offsets(tps)
        out = []
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(f"could not read {topic} ({isolation}) to {ends} in {timeout} s")
            for recs in c.poll(timeout_ms=500).values():
                out.extend(r for r in recs if r.offset < ends[TopicPartition(r.topic, r.partition)])
        return out


def read_with_librdkafka(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> list:
    """(key, value) of every record a confluent-kafka consumer with isolation.level=read_committed sees."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer as CKConsumer, KafkaError as CKError
    from confluent_kafka import TopicPartition as CKPartition
    c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": "eos-check", "enable.auto.commit": False,
                    "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        c.assign([CKPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out, at_end = [], set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"confluent-kafka did not reach the end of {topic} in {timeout} s")
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() != CKError._PARTITION_EOF:
                    raise AssertionError(f"confluent-kafka: {m.error()}")
                at_end.add(m.partition())
                continue
            out.append((m.key(), m.value()))
        return out
    finally:
        c.close()


def start_query(spark, bootstrap: str, checkpoint: str, trigger: str):
    """input topic -> (key, 'seen:' + upper(value)) -> output topic through the exactly-once sink."""
    rows = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", IN).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(PER_TRIGGER)).load())
    out = rows.selectExpr("key", "concat('seen:', upper(cast(value as string))) AS value")
    writer = (out.writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("topic", OUT).option("exactlyOnce", "true")
              # small produce requests, one at a time: a task's records reach the log over many
              # requests, so a kill after the first lands while its transaction is open
              .option("kafka.batch.size", "256").option("kafka.max.in.flight.requests.per.connection", "1")
              .option("checkpointLocation", checkpoint))
    if trigger == "available-now":
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime=trigger).start()


def _committed_batches(checkpoint) -> int:
    commits = checkpoint / "commits"
    return len([f for f in os.listdir(commits) if f.isdigit()]) if commits.is_dir() else 0


class _OutputEnds:
    """End offsets of the output: high watermarks (read_uncommitted) and last stable offsets (read_committed)."""

    def __init__(self, bootstrap: str) -> None:
        self.committed = Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
        self.uncommitted = Consumer(bootstrap_servers=bootstrap, isolation_level="read_uncommitted")
        self.tps = [TopicPartition(OUT, p) for p in sorted(self.committed.partitions_for_topic(OUT) or [])]

    def high_watermarks(self) -> dict:
        return self.uncommitted.end_offsets(self.tps)

    def stable(self) -> dict | None:
        """The high watermarks when no transaction is open (every HW equals its LSO), else None."""
        hw, lso = self.high_watermarks(), self.committed.end_offsets(self.tps)
        return hw if hw == lso else None

    def close(self) -> None:
        self.committed.close()
        self.uncommitted.close()


def _wait_for_a_transaction_to_write(bootstrap: str, proc) -> None:
    """Return as soon as a write task's first records are in the log (its transaction open, not committed)."""
    from odradek.testing import wait_until as wait_for
    ends = _OutputEnds(bootstrap)
    try:
        base = wait_for(lambda: ends.stable() or proc.poll() is not None, 60, "no open transaction")
        wait_for(lambda: ends.high_watermarks() != base or proc.poll() is not None, 60,
                 "records of a new transaction", interval=0.005)
    finally:
        ends.close()


def _run_and_kill(bootstrap: str, checkpoint, log_path, rnd: random.Random, in_transaction: bool) -> str:
    """Run the query in its own process; kill -9 it (driver, JVM, Python workers) after 1-3 more
    committed micro-batches, at a random point or as soon as a write task's transaction is open."""
    from odradek.testing import wait_until as wait_for
    from spark_helpers import kill_process_tree, scratch_env
    before = _committed_batches(checkpoint)
    cmd = [sys.executable, __file__, bootstrap, str(checkpoint)]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env=scratch_env(log_path.parent))
        try:
            target = before + rnd.randint(1, 3)
            wait_for(lambda: _committed_batches(checkpoint) >= target or proc.poll() is not None,
                     240, f"{target} committed micro-batches")
            assert proc.poll() is None, f"the query process ended by itself; see {log_path}"
            if in_transaction:
                _wait_for_a_transaction_to_write(bootstrap, proc)
            else:
                time.sleep(rnd.uniform(0.0, 1.5))  # the fault lands at a random point of the running batch
            assert proc.poll() is None, f"the query process ended by itself; see {log_path}"
        finally:
            kill_process_tree(proc.pid)
            proc.wait()
    return _kill_report(bootstrap, checkpoint)


def _kill_report(bootstrap: str, checkpoint) -> str:
    """What the kill left behind: the batch in flight and which of its write tasks had committed."""
    import json
    from odradek.client import AdminClient
    from odradek.pipeline.exactly_once import committed_batches, default_prefix, transactional_id
    planned = len([f for f in os.listdir(checkpoint / "offsets") if f.isdigit()])
    done = _committed_batches(checkpoint)
    query_id = json.loads((checkpoint / "metadata").read_text())["id"]
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        tasks = {p: committed_batches(admin.list_consumer_group_offsets(
            transactional_id(default_prefix(query_id), p)), query_id) for p in range(3)}
    ahead = sorted(p for p, n in tasks.items() if n > done)
    return (f"killed with {planned} micro-batches planned, {done} committed; write tasks whose transaction "
            f"of batch {done} had committed (the replay must skip them): {ahead}")


def test_killed_query_writes_every_row_exactly_once(spark, cluster_factory, tmp_path):
    from odradek.testing import create_topic
    bootstrap = cluster_factory(brokers=1, overrides=TXN_OVERRIDES).bootstrap_servers
    create_topic(bootstrap, IN, 3)
    create_topic(bootstrap, OUT, 2)
    with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
        for i in range(ROWS):
            p.send(IN, value=f"row-{i}".encode(), key=f"k{i}".encode())
        p.flush()
    expected = collections.Counter((f"k{i}".encode(), f"seen:ROW-{i}".encode()) for i in range(ROWS))
    seed = random.randrange(1 << 30)
    print(f"kill schedule seed {seed}")
    rnd = random.Random(seed)
    checkpoint = tmp_path / "ckpt"
    for in_transaction in (True, False):
        print(_run_and_kill(bootstrap, checkpoint, tmp_path / "query.log", rnd, in_transaction))
    partial = read_topic(bootstrap, OUT)
    assert len(partial) < ROWS  # it really was killed mid-stream
    assert max(collections.Counter((r.key, r.value) for r in partial).values()) == 1  # no duplicate so far
    # restart from the checkpoint here and run to the end of the input
    q = start_query(spark, bootstrap, str(checkpoint), "available-now")
    q.awaitTermination(300)
    assert q.exception() is None
    got = collections.Counter((r.key, r.value) for r in read_topic(bootstrap, OUT))
    assert got == expected  # every input row, transformed, exactly once
    assert collections.Counter(read_with_librdkafka(bootstrap, OUT, 2)) == expected  # and for librdkafka
    uncommitted = len(read_topic(bootstrap, OUT, "read_uncommitted"))
    print(f"records in the log: {uncommitted} (aborted by the kills: {uncommitted - ROWS})")


def main(argv: list[str]) -> None:
    """The query process: runs the query until killed."""
    from odradek.pipeline import build_session
    bootstrap, checkpoint = argv
    spark = build_session("eos-query", master="local[2]", conf={"spark.ui.enabled": "false",
                                                                "spark.sql.shuffle.partitions": "2"})
    start_query(spark, bootstrap, checkpoint, "200 milliseconds").awaitTermination()


if __name__ == "__main__":
    main(sys.argv[1:])
