"""Idempotent producers across leader failover: no acknowledged record lost or duplicated.

A 3-node ZooKeeper ensemble and 3 broker processes; a 3-partition topic with RF 3 and
min.insync.replicas=2. Two third-party idempotent producers (confluent-kafka with
``enable.idempotence=True``, kafka-python 3.x with ``enable_idempotence=True``), both
acks=all, write numbered sequences round-robin over the partitions while the test kill -9s
the leader of partition 0, waits until both producers are acknowledged again on every
partition, restarts the killed broker and waits until it is back in every ISR -- twice (the
second time the victim is whoever leads partition 0 then). Retries of batches the dead
leader had already replicated land on the new leader, which must recognise them.

Afterwards the whole log is read back with a consumer: the delivery reports are the truth
for "acknowledged"; every acknowledged number must be in the log exactly once, at the
offset its report gave, and no number at all may be in the log twice; within a partition
each producer's numbers appear in the order they were sent.
"""
from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict

from eos_support import create_topic, full_isr, read_until_end, wait_until, write_end_markers

TOPIC = "eos-idempotent"
PARTITIONS = 3
ROUNDS = 2


class SequenceProducer:
    """Sends ``<name>-<n>`` (n = 0, 1, ...) to partition n % PARTITIONS from a thread, at most
    ``window`` unacknowledged, and records every delivery report."""

    def __init__(self, name: str, window: int = 100):
        self.name, self.window = name, window
        self.lock = threading.Lock()
        self.acked: dict[bytes, tuple[int, int]] = {}  # value -> (partition, offset)
        self.errors: list[str] = []
        self.double_reports: list[bytes] = []
        self.sent = 0
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"producer-{name}", daemon=True)
        self.failure: BaseException | None = None

    def start(self) -> "SequenceProducer":
        self.thread.start()
        return self

    def report(self, value: bytes, partition: int, offset: int, error: object) -> None:
        with self.lock:
            if error is not None:
                self.errors.append(f"{value!r}: {error}")
            elif value in self.acked:
                self.double_reports.append(value)
            else:
                self.acked[value] = (partition, offset)

    def unresolved(self) -> int:
        with self.lock:
            return self.sent - len(self.acked) - len(self.errors)

    def acked_per_partition(self) -> Counter:
        with self.lock:
            return Counter(p for p, _ in self.acked.values())

    def _run(self) -> None:
        try:
            n = 0
            while not self.stop_event.is_set():
                if self.unresolved() >= self.window:
                    self._wait_reports(0.05)
                    continue
                value = b"%s-%08d" % (self.name.encode(), n)
                with self.lock:
                    self.sent += 1
                self._send(n % PARTITIONS, value)
                n += 1
            self._flush()
        except BaseException as exc:  # noqa: BLE001 - surfaced by stop()
            self.failure = exc

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(400)
        assert not self.thread.is_alive(), f"{self.name}: producer did not finish flushing"
        if self.failure is not None:
            raise AssertionError(f"{self.name}: producer thread failed: {self.failure!r}") from self.failure
        assert not self.double_reports, f"{self.name}: two delivery reports for {self.double_reports[:10]}"
        assert self.unresolved() == 0, f"{self.name}: {self.unresolved()} sends without a delivery report"


class ConfluentSequence(SequenceProducer):
    def __init__(self, bootstrap: str):
        super().__init__("ck")
        import confluent_kafka as ck
        self.p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                              "linger.ms": 5, "retry.backoff.ms": 100, "message.timeout.ms": 300000,
                              "request.timeout.ms": 10000, "socket.timeout.ms": 10000,
                              "topic.metadata.refresh.interval.ms": 2000})

    def _send(self, partition: int, value: bytes) -> None:
        def cb(err, msg):
            self.report(msg.value(), msg.partition(), msg.offset(), err)
        while True:
            try:
                self.p.produce(TOPIC, value, partition=partition, on_delivery=cb)
                break
            except BufferError:
                self.p.poll(0.05)
        self.p.poll(0)

    def _wait_reports(self, timeout: float) -> None:
        self.p.poll(timeout)

    def _flush(self) -> None:
        self.p.flush(300)


class KafkaPythonSequence(SequenceProducer):
    def __init__(self, bootstrap: str):
        super().__init__("kp")
        from kafka import KafkaProducer
        self.p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5,
                               retry_backoff_ms=100, delivery_timeout_ms=300000, request_timeout_ms=10000,
                               metadata_max_age_ms=5000, max_in_flight_requests_per_connection=5)

    def _send(self, partition: int, value: bytes) -> None:
        fut = self.p.send(TOPIC, value=value, partition=partition)
        fut.add_callback(lambda md, v=value: self.report(v, md.partition, md.offset, None))
        fut.add_errback(lambda exc, v=value: self.report(v, partition, -1, repr(exc)))

    def _wait_reports(self, timeout: float) -> None:
        time.sleep(timeout)  # reports arrive on kafka-python's sender thread

    def _flush(self) -> None:
        self.p.flush(300)
        self.p.close(30)


def wait_acked_everywhere(producers: list[SequenceProducer], what: str, timeout: float = 120.0) -> None:
    """Every producer gets new acknowledgements on every partition after this call."""
    before = [pr.acked_per_partition() for pr in producers]

    def progressed() -> bool:
        return all(all(pr.acked_per_partition()[p] > b[p] for p in range(PARTITIONS))
                   for pr, b in zip(producers, before))
    wait_until(progressed, timeout, f"{what}: new acknowledgements on every partition from every producer "
                                    f"(errors so far: {[pr.errors[:3] for pr in producers]})")


def verify(producers: list[SequenceProducer], seen: dict, reader: str) -> None:
    by_value: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for p, recs in seen.items():
        for offset, _, value in recs:
            by_value[value].append((p, offset))
    duplicated = {v: pos for v, pos in by_value.items() if len(pos) > 1}
    assert not duplicated, (f"{reader}: {len(duplicated)} numbers are in the log more than once, e.g. "
                            f"{sorted(duplicated.items())[:10]}")
    for pr in producers:
        missing = sorted(v for v in pr.acked if v not in by_value)
        assert not missing, (f"{reader}: {len(missing)} acknowledged numbers of {pr.name} are not in the log, "
                             f"e.g. {missing[:10]}")
        misplaced = [(v, pos, by_value[v][0]) for v, pos in sorted(pr.acked.items())
                     if pos[1] >= 0 and by_value[v][0] != pos]
        assert not misplaced, (f"{reader}: {pr.name} numbers not at their acknowledged (partition, offset) "
                               f"(value, acked, found): {misplaced[:10]}")
        for p, recs in seen.items():
            mine = [int(v.rsplit(b"-", 1)[1]) for _, _, v in recs if v.startswith(pr.name.encode() + b"-")]
            out_of_order = [(a, b) for a, b in zip(mine, mine[1:]) if b <= a]
            assert not out_of_order, f"{reader}: {pr.name} numbers out of order on partition {p}: {out_of_order[:10]}"


def test_idempotent_producers_survive_leader_kill(cluster_factory):
    cluster = cluster_factory(brokers=3, zookeepers=3, overrides={"zookeeper.session.timeout.ms": 6000})
    create_topic(cluster, TOPIC, PARTITIONS)
    producers: list[SequenceProducer] = [ConfluentSequence(cluster.bootstrap_servers).start(),
                                         KafkaPythonSequence(cluster.bootstrap_servers).start()]
    try:
        wait_acked_everywhere(producers, "startup")
        for round_ in range(1, ROUNDS + 1):
            cluster.zk.sync("/")   # the leader the controller wrote last, not a lagging server's view
            victim = cluster.leader(TOPIC, 0)
            cluster.kill_broker(victim)
            wait_until(lambda: cluster.leader(TOPIC, 0) not in (None, victim), 90,
                       f"round {round_}: a new leader of partition 0 after kill -9 of broker {victim}")
            wait_acked_everywhere(producers, f"round {round_}: after kill -9 of broker {victim}")
            cluster.start_broker(victim)
            wait_until(lambda: full_isr(cluster, TOPIC, PARTITIONS), 120,
                       f"round {round_}: broker {victim} back in every ISR")
            wait_acked_everywhere(producers, f"round {round_}: after broker {victim} rejoined")
    finally:
        for pr in producers:
            pr.stop_event.set()
        for pr in producers:
            pr.stop()

    for pr in producers:
        print(f"\n{pr.name}: {len(pr.acked)} acknowledged, {len(pr.errors)} failed: {pr.errors[:3]}")
        assert pr.acked, f"{pr.name}: nothing acknowledged"
    write_end_markers(cluster.bootstrap_servers, TOPIC, PARTITIONS)
    for reader in ("confluent-kafka", "kafka-python"):
        seen = read_until_end(reader, cluster.bootstrap_servers, TOPIC, PARTITIONS, "read_uncommitted")
        verify(producers, seen, reader)
