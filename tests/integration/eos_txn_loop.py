"""A consume-transform-produce loop with a third-party transactional producer, run as its
own process by tests/integration/test_eos_transactions.py (so it can be killed with SIGKILL).

Invariant: input record (partition p, offset o, value v) becomes exactly one output record
on output partition p with key ``"p:o"`` and value ``str(2*int(v))``, produced in the same
transaction that commits the consumer offsets past it (send_offsets_to_transaction). The
producer's transactional id and the consumer group stay the same across restarts, so a
restarted loop fences its killed predecessor (init_transactions aborts its open
transaction) and resumes from the offsets of its last committed transaction.

Every step is appended to ``OUT`` as one JSON line, flushed before the next step, so a
SIGKILL can only lose the step in progress: ``start``, ``ready`` (init_transactions done),
``rec`` (an output record handed to the producer), ``commit`` (after commit_transaction
returned, with the committed offsets), ``abort`` (a transaction aborted, with the reason),
``error`` (fatal: the process exits 3). SIGTERM ends the loop: the open transaction is
aborted and the clients are closed.

usage: eos_txn_loop.py CLIENT BOOTSTRAP IN_TOPIC OUT_TOPIC GROUP TRANSACTIONAL_ID OUT
                       [--name NAME] [--commit-every N] [--session-ms N] [--delay-ms N]
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import traceback

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


def transform(value: bytes) -> bytes:
    return str(2 * int(value)).encode()


# ------------------------------------------------------------------ adapters
# init(); poll(max) -> [(p, o, value)]; produce(p, key, value); commit() -> {p: next offset};
# abort_and_rewind(); in_txn; close()

class Confluent:
    def __init__(self, a, out: Out):
        import confluent_kafka as ck
        self.ck, self.a, self.out = ck, a, out
        self.in_txn = False
        self.p = ck.Producer({"bootstrap.servers": a.bootstrap, "transactional.id": a.txn_id,
                              "transaction.timeout.ms": 20000, "linger.ms": 5, "request.timeout.ms": 10000,
                              "retry.backoff.ms": 100})
        self.p.init_transactions(120)
        self.c = ck.Consumer({"bootstrap.servers": a.bootstrap, "group.id": a.group, "client.id": a.name,
                              "isolation.level": "read_committed", "enable.auto.commit": False,
                              "auto.offset.reset": "earliest", "session.timeout.ms": a.session_ms,
                              "heartbeat.interval.ms": max(a.session_ms // 6, 100)})
        self.c.subscribe([a.in_topic], on_revoke=self._on_revoke)

    def _on_revoke(self, consumer, partitions) -> None:
        if self.in_txn:  # the offsets of the open transaction may be another member's now
            self.p.abort_transaction(60)
            self.in_txn = False
            self.out(e="abort", why="partitions revoked")

    def begin(self) -> None:
        if not self.in_txn:
            self.p.begin_transaction()
            self.in_txn = True

    def poll(self, max_records: int) -> list[tuple[int, int, bytes]]:
        out = []
        for m in self.c.consume(num_messages=max_records, timeout=0.2):
            if m.error() is not None:
                if m.error().code() == self.ck.KafkaError._PARTITION_EOF:
                    continue
                raise self.ck.KafkaException(m.error())
            out.append((m.partition(), m.offset(), m.value()))
        return out

    def produce(self, p: int, key: bytes, value: bytes) -> None:
        while True:
            try:
                self.p.produce(self.a.out_topic, value=value, key=key, partition=p)
                break
            except BufferError:
                self.p.poll(0.05)
        self.p.poll(0)

    def commit(self) -> dict[int, int]:
        positions = [tp for tp in self.c.position(self.c.assignment()) if tp.offset >= 0]
        self.p.send_offsets_to_transaction(positions, self.c.consumer_group_metadata(), 60)
        self.p.commit_transaction(60)
        self.in_txn = False
        return {tp.partition: tp.offset for tp in positions}

    def abort_and_rewind(self) -> None:
        self.p.abort_transaction(60)
        self.in_txn = False
        committed = self.c.committed(self.c.assignment(), timeout=30)
        for tp in committed:
            if tp.offset < 0:
                tp.offset = self.ck.OFFSET_BEGINNING
            self.c.seek(tp)

    def close(self) -> None:
        if self.in_txn:
            self.p.abort_transaction(30)
            self.in_txn = False
        self.c.close()
        self.p.flush(30)


class KafkaPython:
    def __init__(self, a, out: Out):
        from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer
        self.a, self.out = a, out
        self.in_txn = False
        self.p = KafkaProducer(bootstrap_servers=a.bootstrap, transactional_id=a.txn_id, enable_idempotence=True,
                               acks="all", transaction_timeout_ms=20000, linger_ms=5, request_timeout_ms=10000,
                               retry_backoff_ms=100, max_block_ms=120000)
        self.p.init_transactions()
        self.c = KafkaConsumer(bootstrap_servers=a.bootstrap, group_id=a.group, client_id=a.name,
                               isolation_level="read_committed", enable_auto_commit=False,
                               auto_offset_reset="earliest", session_timeout_ms=a.session_ms,
                               heartbeat_interval_ms=max(a.session_ms // 6, 100), retry_backoff_ms=100)
        loop = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                if loop.in_txn:
                    loop.p.abort_transaction()
                    loop.in_txn = False
                    loop.out(e="abort", why="partitions revoked")

            def on_partitions_assigned(self, assigned):
                pass
        self.c.subscribe([a.in_topic], listener=Listener())
        # a metadata update before the first join: kafka-python 3.0.12 can stall for good in a
        # rebalance it starts itself otherwise (group_member.py says how)
        while a.in_topic not in self.c.topics():
            time.sleep(0.1)

    def begin(self) -> None:
        if not self.in_txn:
            self.p.begin_transaction()
            self.in_txn = True

    def poll(self, max_records: int) -> list[tuple[int, int, bytes]]:
        out = []
        for tp, recs in self.c.poll(timeout_ms=200, max_records=max_records).items():
            out.extend((tp.partition, r.offset, r.value) for r in recs)
        return out

    def produce(self, p: int, key: bytes, value: bytes) -> None:
        self.p.send(self.a.out_topic, value=value, key=key, partition=p)

    def commit(self) -> dict[int, int]:
        from kafka import OffsetAndMetadata
        offsets = {tp: OffsetAndMetadata(self.c.position(tp), "", -1) for tp in self.c.assignment()}
        self.p.send_offsets_to_transaction(offsets, self.c.group_metadata())
        self.p.commit_transaction()
        self.in_txn = False
        return {tp.partition: om.offset for tp, om in offsets.items()}

    def abort_and_rewind(self) -> None:
        self.p.abort_transaction()
        self.in_txn = False
        for tp in self.c.assignment():
            committed = self.c.committed(tp)
            if committed is None:
                self.c.seek_to_beginning(tp)
            else:
                self.c.seek(tp, committed)

    def close(self) -> None:
        if self.in_txn:
            self.p.abort_transaction()
            self.in_txn = False
        self.c.close()
        self.p.close(30)


CLIENTS = {"confluent-kafka": Confluent, "kafka-python": KafkaPython}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("client", choices=sorted(CLIENTS))
    ap.add_argument("bootstrap")
    ap.add_argument("in_topic")
    ap.add_argument("out_topic")
    ap.add_argument("group")
    ap.add_argument("txn_id")
    ap.add_argument("out")
    ap.add_argument("--name", default="loop")
    ap.add_argument("--commit-every", type=int, default=7)
    ap.add_argument("--session-ms", type=int, default=3000)
    ap.add_argument("--delay-ms", type=float, default=0.0)
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_term)
    out = Out(a.out)
    out(e="start", client=a.client)
    try:
        loop = CLIENTS[a.client](a, out)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        out(e="error", where="init", error=repr(exc), tb=traceback.format_exc())
        return 3
    out(e="ready")
    pending = 0
    try:
        while not stopping:
            recs = loop.poll(a.commit_every - pending)
            if not loop.in_txn:  # at start, after a commit, or aborted by a revocation inside poll
                pending = 0
                loop.begin()
            for p, o, v in recs:
                loop.produce(p, f"{p}:{o}".encode(), transform(v))
                out(e="rec", p=p, o=o)
                if a.delay_ms:
                    time.sleep(a.delay_ms / 1000)  # simulated work, so kills land inside transactions
            pending += len(recs)
            if pending >= a.commit_every or (pending and not recs):
                try:
                    offsets = loop.commit()
                except Exception as exc:  # noqa: BLE001 - abortable: abort, rewind, go on
                    out(e="abort", why=repr(exc))
                    loop.abort_and_rewind()
                else:
                    out(e="commit", offsets={str(p): o for p, o in offsets.items()}, n=pending)
                pending = 0
        loop.close()
        out(e="closed")
        return 0
    except Exception as exc:  # noqa: BLE001 - fatal
        out(e="error", where="loop", error=repr(exc), tb=traceback.format_exc())
        return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
