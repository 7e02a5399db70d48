"""A full log dir under one broker of three (issue 15, point 4), on real filesystems.

One module-scoped cluster of 3 brokers (3-node ZooKeeper ensemble) serves both variants:
broker 3's only log dir is a small tmpfs, broker 2 has two log dirs (one on disk, one on a
second tmpfs). Each tmpfs is mounted by the fixture (the tests run as root) and always
unmounted and removed in teardown; if mounting is refused the tests fail saying so.

While an idempotent acks=all producer (odradek's, and confluent-kafka's) writes to an RF 3
topic with min.insync.replicas=2, a test fills one tmpfs with a file until ENOSPC and shows
what a user would check:
- one dir of two: broker 2 marks it offline, the controller moves leadership of the
  partitions in it to other ISR members (2 leaves their ISR), broker 2 keeps leading the
  partitions in its other dir, the log dir event notification is consumed;
- the only dir: broker 3 shuts down cleanly (exit code 1, its registration gone at once);
  after the space is freed and it restarts, it rejoins every ISR (so does broker 2, loading
  the partitions of both its dirs);
- in both, the producers get acknowledgements on every partition again within seconds, and
  every acknowledged record is readable afterwards at its acknowledged offset.
"""
from __future__ import annotations

import re
import signal
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from odradek.testing import ObservedCluster, create_topic, wait_through_faults
from odradek.testing.tmpfs import FaultUnavailable, TmpfsMount

TMPFS_SIZE = "16m"
PAUSE_S = 0.004          # each producer sends at most ~250 records/s
RECOVERY_S = 30.0        # "within seconds": generous for a loaded CI machine; measured values are printed


# ------------------------------------------------------------------ the cluster and its filesystems

class LogDirCluster(ObservedCluster):
    """Brokers with their own ``log.dirs``."""

    def __init__(self, *args, log_dirs: dict[int, list[Path]], **kwargs):
        super().__init__(*args, **kwargs)
        self.log_dirs = log_dirs

    def server_properties(self, broker):
        props = super().server_properties(broker)
        if broker.id in self.log_dirs:
            props["log.dirs"] = ",".join(str(d) for d in self.log_dirs[broker.id])
        return props


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    base = tmp_path_factory.mktemp("log-dir-failure")
    mounts: list[TmpfsMount] = []
    cluster = None
    try:
        try:
            b2 = TmpfsMount(base / "broker-2-tmpfs", TMPFS_SIZE)
            mounts.append(b2)
            b3 = TmpfsMount(base / "broker-3-tmpfs", TMPFS_SIZE)
            mounts.append(b3)
        except FaultUnavailable as exc:  # the tests run as root (or with CAP_SYS_ADMIN)
            pytest.fail(str(exc), pytrace=False)
        cluster = LogDirCluster(base / "cluster", zookeepers=3, brokers=3,
                                overrides={"zookeeper.session.timeout.ms": 6000,
                                           "replica.high.watermark.checkpoint.interval.ms": 1000,
                                           # teardown: a broker stopping last cannot hand over partitions
                                           # whose other replicas are gone; do not wait 3 x 5 s for that
                                           "controlled.shutdown.retry.backoff.ms": 200},
                                log_dirs={2: [base / "cluster" / "broker-2" / "logs", b2.path], 3: [b3.path]})
        cluster.start()
        yield cluster, b2, b3
    finally:
        try:
            if cluster is not None:
                cluster.stop()
        finally:
            for m in mounts:
                m.unmount()


# ------------------------------------------------------------------ helpers

def create_in_sync_topic(cluster, topic: str, assignment: dict[int, list[int]]) -> None:
    """min.insync.replicas 2, replicas placed by ``assignment``; returns with every ISR full."""
    create_topic(cluster.bootstrap_servers, topic, configs={"min.insync.replicas": "2"}, assignment=assignment)
    for p in assignment:
        cluster.wait_for_isr(topic, p, [1, 2, 3])


class Producers:
    """odradek's and confluent-kafka's idempotent acks=all producers writing round-robin to every
    partition from one thread each; every acknowledged (partition, offset, value) is kept."""

    def __init__(self, cluster, topic: str, partitions: int):
        self.topic, self.partitions = topic, partitions
        self.lock = threading.Lock()
        self.acked: list[tuple[int, int, bytes]] = []
        self.errors: list[str] = []
        self.stop_event = threading.Event()
        self.threads = [threading.Thread(target=self._odradek, args=(cluster.bootstrap_servers,), daemon=True),
                        threading.Thread(target=self._confluent, args=(cluster.bootstrap_servers,), daemon=True)]
        for t in self.threads:
            t.start()

    def _ack(self, p: int, offset: int, value: bytes) -> None:
        with self.lock:
            self.acked.append((p, offset, value))

    def _fail(self, value: bytes, err: object) -> None:
        with self.lock:
            self.errors.append(f"{value!r}: {err}")

    def _odradek(self, bootstrap: str) -> None:
        from odradek.client import Producer
        producer = Producer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                            request_timeout_ms=10000, delivery_timeout_ms=600000, retry_backoff_ms=100,
                            metadata_max_age_ms=5000, max_in_flight_requests_per_connection=5)
        seq = 0
        while not self.stop_event.is_set():
            value, p = b"odr-%08d" % seq, seq % self.partitions

            def cb(md, exc, value=value):
                if exc is not None:
                    self._fail(value, exc)
                else:
                    self._ack(md.partition, md.offset, value)
            producer.send(self.topic, value, partition=p, callback=cb)
            seq += 1
            time.sleep(PAUSE_S)
        producer.flush(120)
        producer.close(30)

    def _confluent(self, bootstrap: str) -> None:
        import confluent_kafka
        producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "retry.backoff.ms": 100, "message.timeout.ms": 600000, "request.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 2000})
        seq = 0
        while not self.stop_event.is_set():
            value, p = b"ck-%08d" % seq, seq % self.partitions

            def cb(err, msg):
                if err is not None:
                    self._fail(msg.value(), err)
                else:
                    self._ack(msg.partition(), msg.offset(), msg.value())
            try:
                producer.produce(self.topic, value, partition=p, on_delivery=cb)
                seq += 1
            except BufferError:
                pass
            producer.poll(PAUSE_S)
        assert producer.flush(120) == 0

    def acks_per_partition(self) -> dict[tuple[str, int], int]:
        with self.lock:
            out: dict[tuple[str, int], int] = defaultdict(int)
            for p, _, v in self.acked:
                out[(v.split(b"-")[0].decode(), p)] += 1
            return out

    def wait_progress(self, what: str, timeout: float) -> float:
        """Seconds until both producers got new acks on every partition."""
        start = time.monotonic()
        before = self.acks_per_partition()

        def progressed() -> bool:
            now = self.acks_per_partition()
            return all(now[(name, p)] > before.get((name, p), 0)
                       for name in ("odr", "ck") for p in range(self.partitions))
        wait_through_faults(progressed, timeout, f"{what}: new acks on every partition from both producers "
                                                 f"(errors: {self.errors[:3]})")
        return time.monotonic() - start

    def stop(self) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join(180)
            assert not t.is_alive(), "a producer did not stop"
        assert not self.errors, f"producers failed records: {self.errors[:5]}"


def verify_readable(cluster, topic: str, partitions: int, acked: list[tuple[int, int, bytes]]) -> None:
    """Every acknowledged record reads back at its acknowledged offset (odradek Consumer, no group)."""
    from odradek.client import Consumer, TopicPartition
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                  enable_auto_commit=False) as c:
        ends = {tp.partition: off for tp, off in c.end_offsets(tps).items()}
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got: dict[tuple[int, int], bytes] = {}
        deadline = time.monotonic() + 120
        while any(max((o for (q, o) in got if q == p), default=-1) + 1 < ends[p] for p in range(partitions)):
            assert time.monotonic() < deadline, f"the consumer did not reach the end offsets {ends}"
            for tp, recs in c.poll(timeout_ms=500).items():
                got.update(((tp.partition, r.offset), r.value) for r in recs)
    lost = [(p, o, v) for p, o, v in acked if got.get((p, o)) != v]
    assert not lost, f"{len(lost)} acknowledged records not readable at their offsets, e.g. {lost[:5]}"


# ------------------------------------------------------------------ the two variants

def test_when_its_only_log_dir_fills_a_broker_shuts_down_and_producers_move_on(env):
    cluster, _, b3_fs = env
    topic, partitions = "ldf-one", 3
    create_in_sync_topic(cluster, topic, {0: [3, 1, 2], 1: [1, 3, 2], 2: [2, 3, 1]})
    producers = Producers(cluster, topic, partitions)
    try:
        producers.wait_progress("before the failure", 60)
        start = time.monotonic()
        b3_fs.fill()
        proc = cluster.brokers[3].proc
        wait_through_faults(lambda: proc.poll() is not None, 60,
                            "broker 3 to exit after its only log dir filled up")
        exited = time.monotonic() - start
        assert proc.returncode == 1
        cluster.zk.sync("/")   # broker 3 closed its session before exiting: see that, not a lagging server's view
        assert 3 not in cluster.live_brokers()
        log_text = cluster.brokers[3].log_path.read_text(errors="replace")
        assert "every log dir has failed" in log_text and "broker 3 shut down" in log_text
        wait_through_faults(lambda: all(cluster.leader(topic, p) in (1, 2) for p in range(partitions)), 60,
                            "a live leader for every partition")
        recovered = time.monotonic() - start
        progressed = producers.wait_progress("after broker 3 left", RECOVERY_S)
        print(f"\nonly dir full: broker 3 exited after {exited:.1f} s, leaders moved after {recovered:.1f} s, "
              f"producers acked on every partition {progressed:.1f} s after that")
    finally:
        producers.stop()
    verify_readable(cluster, topic, partitions, producers.acked)
    # a dir stays offline until restart: with space again, the restarted broker rejoins every ISR
    b3_fs.free()
    cluster.start_broker(3)
    wait_through_faults(lambda: all(cluster.isr(topic, p) == [1, 2, 3] for p in range(partitions)), 120,
                        "broker 3 back in every ISR after its restart")


def test_when_one_of_two_log_dirs_fills_the_broker_keeps_serving_the_other(env):
    cluster, b2_fs, b3_fs = env
    if cluster.brokers[3].pid is None:   # the previous test failed half-way: start clean
        b3_fs.free()
        cluster.start_broker(3)
    topic, partitions = "ldf-two", 4
    create_in_sync_topic(cluster, topic, {p: [2, 1, 3] if p % 2 else [2, 3, 1] for p in range(partitions)})
    on_tmpfs = {p for p in range(partitions) if (b2_fs.path / f"{topic}-{p}").is_dir()}
    on_disk = {p for p in range(partitions)
               if (cluster.brokers[2].dir / "logs" / f"{topic}-{p}").is_dir()}
    # placement by fewest partitions spreads the topic over both dirs, every partition in one
    assert on_tmpfs and on_disk and on_tmpfs | on_disk == set(range(partitions)) and not on_tmpfs & on_disk
    producers = Producers(cluster, topic, partitions)
    try:
        producers.wait_progress("before the failure", 60)
        start = time.monotonic()
        b2_fs.fill()

        def moved() -> bool:
            return all(cluster.leader(topic, p) in (1, 3) and 2 not in cluster.isr(topic, p)
                       for p in on_tmpfs)
        wait_through_faults(moved, 60, "leadership of the partitions on the full dir moved off broker 2")
        recovered = time.monotonic() - start
        progressed = producers.wait_progress("after the dir failure", RECOVERY_S)
        print(f"\none dir of two full: leaders moved after {recovered:.1f} s, producers acked on every "
              f"partition {progressed:.1f} s after that")
        assert cluster.brokers[2].proc.poll() is None and 2 in cluster.live_brokers()
        for p in on_disk:   # broker 2 still leads (and follows) what lives in its other dir
            st = cluster.partition_state(topic, p)
            assert st["leader"] == 2 and 2 in st["isr"], (p, st)
        wait_through_faults(lambda: not cluster.zk.get_children("/log_dir_event_notification"), 30,
                            "the controller to consume the log dir event notification")
        log_text = cluster.brokers[2].log_path.read_text(errors="replace")
        assert f"log dir {b2_fs.path} is offline" in log_text
        # what an operator sees (DescribeLogDirs, kafka-log-dirs.sh): the full dir offline, the other serving
        from odradek.client import AdminClient
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            dirs = {d["log_dir"]: d for d in admin.describe_log_dirs([2], [topic])[2]}
        assert dirs[str(b2_fs.path)]["error"] == "KAFKA_STORAGE_ERROR" and not dirs[str(b2_fs.path)]["partitions"]
        on_disk_dir = dirs[str(cluster.brokers[2].dir / "logs")]
        assert on_disk_dir["error"] is None
        assert sorted(p["partition"] for p in on_disk_dir["partitions"]) == sorted(on_disk)
        assert all(p["size"] > 0 for p in on_disk_dir["partitions"])
    finally:
        producers.stop()
    verify_readable(cluster, topic, partitions, producers.acked)
    # offline until restart: with space again, the restarted broker loads both dirs and rejoins every ISR
    b2_fs.free()
    cluster.kill_broker(2, signal.SIGTERM)
    log_size = cluster.brokers[2].log_path.stat().st_size
    cluster.start_broker(2)
    wait_through_faults(lambda: all(cluster.isr(topic, p) == [1, 2, 3] for p in range(partitions)), 120,
                        "broker 2 back in every ISR after its restart")
    with open(cluster.brokers[2].log_path, errors="replace") as f:
        f.seek(log_size)
        restart_log = f.read()
    for d in (cluster.brokers[2].dir / "logs", b2_fs.path):
        assert re.search(rf"loaded [1-9]\d* logs from {re.escape(str(d))} ", restart_log), f"{d} not loaded"
