"""Replication under real faults: 3-node ZooKeeper ensemble, 3 broker processes.

Two producers (odradek's Producer and confluent-kafka, both acks=all and
idempotent) write continuously to a 6-partition RF 3 topic with
min.insync.replicas=2 while, in sequence: the leader of partition 0 is
kill -9'd, the controller is kill -9'd, a ZooKeeper node is stopped (and later
restarted), and a partition leader is SIGSTOPped until its ZooKeeper session
expires and then SIGCONTed. After each fault we wait (on conditions only) until
every partition has a live leader and both producers have had new records
acknowledged on every partition. At the end every acknowledged record must be
readable exactly once at its acknowledged offset (odradek Consumer and
confluent-kafka), nothing unproduced may be in the log, and the three replicas'
log files must be byte-identical.

The first test runs twice: brokers replicating over PLAINTEXT, and over a SASL_SSL
inter-broker listener. A second test gives the leader an unreplicated acks=1 tail (followers SIGSTOPped),
kill -9's it, and checks that when it comes back it truncates that tail and ends
with a log identical to the new leader's.
"""
from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from odradek.protocol.apis import produce as produce_api
from odradek.protocol.header import decode_response, encode_request
from odradek.protocol.record_batch import iter_headers
from odradek.protocol.records import BatchBuilder
from odradek.testing import create_topic, wait_through_faults
from odradek.testing.secure_cluster import SecuredListeners

SESSION_TIMEOUT_MS = 6000
NOT_LEADER_OR_FOLLOWER = 6


# ------------------------------------------------------------------ helpers

def port_of(cluster, broker_id: int) -> int:
    return int(cluster.broker_address(broker_id).rsplit(":", 1)[1])


def partition_dir(cluster, broker_id: int, topic: str, p: int) -> Path:
    return Path(cluster.brokers[broker_id].dir) / "logs" / f"{topic}-{p}"


def log_bytes(cluster, broker_id: int, topic: str, p: int) -> bytes:
    d = partition_dir(cluster, broker_id, topic, p)
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def log_end_offset(data: bytes) -> int:
    """Next offset after the last complete batch in ``data`` (0 if empty)."""
    end = 0
    for _, h in iter_headers(data):
        end = h.next_offset
    return end


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def produce_frame(topic: str, p: int, acks: int, values: list[bytes], timeout_ms: int) -> bytes:
    b = BatchBuilder()
    now = int(time.time() * 1000)
    for v in values:
        b.append(now, None, v)
    body = {"acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": b.build()}]}]}
    frame = encode_request(produce_api, 8, 1, "faults-test", body)
    return len(frame).to_bytes(4, "big") + frame


def read_produce_response(sock: socket.socket) -> tuple[int, int]:
    size = int.from_bytes(_recv(sock, 4), "big")
    _, resp = decode_response(produce_api, 8, _recv(sock, size))
    r = resp.responses[0].partition_responses[0]
    return r.error_code, r.base_offset


def raw_produce(port: int, topic: str, p: int, acks: int, values: list[bytes],
                timeout_ms: int = 3000) -> tuple[int, int]:
    """(error_code, base_offset) of one Produce v8 sent over a plain socket."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_ms / 1000 + 15) as sock:
        sock.sendall(produce_frame(topic, p, acks, values, timeout_ms))
        return read_produce_response(sock)


# ------------------------------------------------------------------ background producers

class BackgroundProducer:
    """Sends ``<name>-<seq>`` round-robin over the partitions, at most ``window`` in flight,
    and records every acknowledged (partition, offset, value) and every error."""

    def __init__(self, name: str, topic: str, partitions: int, window: int = 200):
        self.name, self.topic, self.partitions, self.window = name, topic, partitions, window
        self.lock = threading.Condition()
        self.acked: list[tuple[int, int, bytes]] = []
        self.sent: set[bytes] = set()
        self.errors: list[str] = []
        self.inflight = 0
        self.last_ack_seq = [-1] * partitions  # per partition, index into acked at last ack
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"producer-{name}", daemon=True)

    def start(self) -> "BackgroundProducer":
        self.thread.start()
        return self

    def _ack(self, p: int, offset: int, value: bytes) -> None:
        with self.lock:
            self.acked.append((p, offset, value))
            self.inflight -= 1
            self.lock.notify_all()

    def _fail(self, value: bytes, err: object) -> None:
        with self.lock:
            self.errors.append(f"{value!r}: {err}")
            self.inflight -= 1
            self.lock.notify_all()

    def _acquire(self) -> bool:
        with self.lock:
            while self.inflight >= self.window and not self.stop_event.is_set():
                self.lock.wait(0.2)
                self._poll()
            if self.stop_event.is_set():
                return False
            self.inflight += 1
            return True

    def _poll(self) -> None:  # confluent needs poll() to deliver callbacks
        pass

    def _run(self) -> None:
        seq = 0
        try:
            while self._acquire():
                value = b"%s-%08d" % (self.name.encode(), seq)
                p = seq % self.partitions
                with self.lock:
                    self.sent.add(value)
                try:
                    self._send(p, value)
                except Exception as exc:  # noqa: BLE001 - record, keep going
                    self._fail(value, repr(exc))
                seq += 1
        finally:
            self._finish()

    def acked_per_partition(self) -> Counter:
        with self.lock:
            return Counter(p for p, _, _ in self.acked)

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(180)
        assert not self.thread.is_alive(), f"{self.name} producer did not stop"


class OdradekProducer(BackgroundProducer):
    def __init__(self, bootstrap: str, topic: str, partitions: int):
        super().__init__("odr", topic, partitions)
        from odradek.client import Producer
        self.producer = Producer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                                 linger_ms=5, request_timeout_ms=10000, delivery_timeout_ms=600000,
                                 retry_backoff_ms=100, metadata_max_age_ms=5000)

    def _send(self, p: int, value: bytes) -> None:
        def cb(md, exc, value=value):
            if exc is not None:
                self._fail(value, repr(exc))
            else:
                self._ack(md.partition, md.offset, value)
        self.producer.send(self.topic, value, partition=p, callback=cb)

    def _finish(self) -> None:
        self.producer.flush(300)
        self.producer.close(30)


class ConfluentProducer(BackgroundProducer):
    def __init__(self, bootstrap: str, topic: str, partitions: int):
        super().__init__("ck", topic, partitions)
        import confluent_kafka
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "retry.backoff.ms": 100, "message.timeout.ms": 600000, "request.timeout.ms": 10000,
            "socket.timeout.ms": 10000, "topic.metadata.refresh.interval.ms": 2000})

    def _send(self, p: int, value: bytes) -> None:
        def cb(err, msg):
            if err is not None:
                self._fail(msg.value(), err)
            else:
                self._ack(msg.partition(), msg.offset(), msg.value())
        while True:
            try:
                self.producer.produce(self.topic, value, partition=p, on_delivery=cb)
                break
            except BufferError:
                self.producer.poll(0.05)
        self.producer.poll(0)

    def _poll(self) -> None:
        # called with the lock held; poll() runs callbacks that take the (reentrant?) lock: release it
        self.lock.release()
        try:
            self.producer.poll(0.01)
        finally:
            self.lock.acquire()

    def _finish(self) -> None:
        remaining = self.producer.flush(300)
        assert remaining == 0, f"confluent producer still has {remaining} undelivered records"


# ------------------------------------------------------------------ the cluster under test

TOPIC = "faults"
PARTITIONS = 6


@pytest.fixture
def cluster(cluster_factory, request, tmp_path):
    """Brokers replicate over PLAINTEXT, or (``indirect`` param "sasl_ssl") over a SASL_SSL
    inter-broker listener: TLS and a PLAIN login under every fetch, controller request and
    transaction marker. Clients use the PLAINTEXT listener either way."""
    overrides: dict[str, object] = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS}
    extra = None
    if getattr(request, "param", "plaintext") == "sasl_ssl":
        secured = SecuredListeners.make(tmp_path, [1, 2, 3], protocols=("SASL_SSL",))
        overrides.update(secured.overrides)
        extra = secured.extra_listeners
    return cluster_factory(brokers=3, zookeepers=3, overrides=overrides, extra_listeners=extra)


def create_writable_topic(cluster, topic: str, partitions: int) -> None:
    """RF 3, min.insync.replicas 2, every replica in the ISR, every leader accepting acks=all."""
    create_topic(cluster.bootstrap_servers, topic, partitions, 3, {"min.insync.replicas": "2"})
    wait_through_faults(lambda: full_isr(cluster, topic, partitions), what="topic partitions online")
    # every leader has applied its LeaderAndIsr once it accepts an acks=all produce
    for p in range(partitions):
        wait_through_faults(lambda p=p: raw_produce(port_of(cluster, cluster.leader(topic, p)),
                                                    topic, p, -1, [b"probe"])[0] == 0, what=f"partition {p} writable")


def all_leaders_live(cluster, topic: str, partitions: int, exclude: int | None = None) -> bool:
    live = cluster.live_brokers()
    for p in range(partitions):
        leader = cluster.leader(topic, p)
        if leader not in live or leader == exclude:
            return False
    return True


def full_isr(cluster, topic: str, partitions: int) -> bool:
    return all(cluster.isr(topic, p) == [1, 2, 3] for p in range(partitions))


def wait_recovered(cluster, producers, what: str, exclude: int | None = None, timeout: float = 120.0) -> float:
    """Every partition has a live leader (not ``exclude``) and every producer got new acks on
    every partition after this call. Returns the seconds it took."""
    start = time.monotonic()
    wait_through_faults(lambda: all_leaders_live(cluster, TOPIC, PARTITIONS, exclude), timeout=timeout,
                        what=f"{what}: a live leader for every partition")
    before = [pr.acked_per_partition() for pr in producers]

    def progressed() -> bool:
        for pr, b in zip(producers, before):
            now = pr.acked_per_partition()
            if any(now[p] <= b[p] for p in range(PARTITIONS)):
                return False
        return True
    wait_through_faults(progressed, timeout=timeout,
                        what=f"{what}: new acks on every partition from every producer "
                             f"(errors: {[pr.errors[:3] for pr in producers]})")
    return time.monotonic() - start


def restart_and_rejoin(cluster, broker_id: int) -> None:
    cluster.start_broker(broker_id)
    wait_through_faults(lambda: full_isr(cluster, TOPIC, PARTITIONS), timeout=120,
                        what=f"broker {broker_id} back in every ISR")


# ------------------------------------------------------------------ verification

def consume_odradek(cluster, topic: str, ends: dict[int, int]) -> dict[int, list[tuple[int, bytes]]]:
    from odradek.client import Consumer, TopicPartition
    out: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    c = Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                 enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        deadline = time.monotonic() + 120

        def done() -> bool:
            return all((out[p][-1][0] + 1 if out[p] else 0) >= ends[p] for p in range(PARTITIONS))
        while not done():
            assert time.monotonic() < deadline, "odradek consumer did not reach the end offsets"
            for tp, recs in c.poll(timeout_ms=500).items():
                out[tp.partition].extend((r.offset, r.value) for r in recs)
    finally:
        c.close()
    return out


def consume_confluent(cluster, topic: str, ends: dict[int, int]) -> dict[int, list[tuple[int, bytes]]]:
    import confluent_kafka as ck
    out: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    c = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "faults-verify",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 120

        def done() -> bool:
            return all((out[p][-1][0] + 1 if out[p] else 0) >= ends[p] for p in range(PARTITIONS))
        while not done():
            assert time.monotonic() < deadline, "confluent consumer did not reach the end offsets"
            for m in c.consume(num_messages=10000, timeout=0.5):
                if m.error() is None:
                    out[m.partition()].append((m.offset(), m.value()))
    finally:
        c.close()
    return out


def high_watermarks(cluster, topic: str, partitions: int) -> dict[int, int]:
    from odradek.client import Consumer, TopicPartition
    with Consumer(bootstrap_servers=cluster.bootstrap_servers) as c:
        ends = c.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    return {tp.partition: off for tp, off in ends.items()}


def wait_in_sync(cluster, topic: str, partitions: int) -> dict[int, int]:
    """Full ISR everywhere, byte-identical replica logs, HW == LEO; returns the HWs."""
    wait_through_faults(lambda: full_isr(cluster, topic, partitions), timeout=120, what="full ISR everywhere")

    def synced():
        hws = high_watermarks(cluster, topic, partitions)
        for p in range(partitions):
            logs = [log_bytes(cluster, b, topic, p) for b in (1, 2, 3)]
            if not (logs[0] == logs[1] == logs[2]) or log_end_offset(logs[0]) != hws[p]:
                return None
        return hws
    return wait_through_faults(synced, timeout=120, what="identical replica logs with HW == LEO")


def verify(cluster, producers, hws: dict[int, int], forbidden: set[bytes]) -> None:
    produced: set[bytes] = set().union(*(pr.sent for pr in producers)) | {b"probe"}
    for read in (consume_odradek, consume_confluent):
        records = read(cluster, TOPIC, hws)
        for p in range(PARTITIONS):
            offsets = [o for o, _ in records[p]]
            assert offsets == list(range(hws[p])), f"{read.__name__}: partition {p} offsets not 0..HW-1 in order"
        by_pos = {(p, o): v for p in range(PARTITIONS) for o, v in records[p]}
        counts = Counter(by_pos.values())
        for pr in producers:
            for p, offset, value in pr.acked:
                if offset == -1:  # committed, offset unknown (Kafka's answer for a duplicate sequence)
                    assert value in {v for _, v in records[p]}, f"{read.__name__}: acked {value!r} not in {p}"
                else:
                    assert by_pos.get((p, offset)) == value, \
                        f"{read.__name__}: acked {value!r} at {p}@{offset} reads {by_pos.get((p, offset))!r}"
                assert counts[value] == 1, f"{read.__name__}: {value!r} appears {counts[value]} times"
        unknown = [v for v in by_pos.values() if v not in produced]
        assert not unknown, f"{read.__name__}: values never produced: {unknown[:5]}"
        stale = forbidden & set(by_pos.values())
        assert not stale, f"{read.__name__}: fenced stale writes are readable: {stale}"
    # per producer and partition, later sends got later offsets
    for pr in producers:
        last: dict[int, tuple[int, int]] = {}
        for p, offset, value in sorted(pr.acked, key=lambda a: a[2]):
            if offset == -1:
                continue
            seq = int(value.rsplit(b"-", 1)[1])
            if p in last:
                assert offset > last[p][1], f"{pr.name}: seq {seq} at {p}@{offset} after seq {last[p][0]}"
            last[p] = (seq, offset)


# ------------------------------------------------------------------ tests

@pytest.mark.parametrize("cluster", ["plaintext", "sasl_ssl"], indirect=True)
def test_acked_records_survive_broker_controller_and_zookeeper_faults(cluster):
    pytest.importorskip("confluent_kafka")
    create_writable_topic(cluster, TOPIC, PARTITIONS)
    producers = [OdradekProducer(cluster.bootstrap_servers, TOPIC, PARTITIONS).start(),
                 ConfluentProducer(cluster.bootstrap_servers, TOPIC, PARTITIONS).start()]
    forbidden: set[bytes] = set()
    try:
        wait_recovered(cluster, producers, "startup")

        # 1. kill -9 the leader of partition 0
        victim = cluster.leader(TOPIC, 0)
        cluster.kill_broker(victim)
        wait_recovered(cluster, producers, f"kill -9 of partition 0's leader {victim}", exclude=victim)
        restart_and_rejoin(cluster, victim)

        # 2. kill -9 the controller
        ctl = wait_through_faults(cluster.controller, what="a controller")
        cluster.kill_broker(ctl)
        wait_through_faults(lambda: cluster.controller() not in (None, ctl), what="a new controller")
        wait_recovered(cluster, producers, f"kill -9 of controller {ctl}", exclude=ctl)
        restart_and_rejoin(cluster, ctl)

        # 3. stop one ZooKeeper node (the quorum leader: forces a ZooKeeper election), then start it
        zk_leader = next((i for i in cluster.ensemble.nodes if cluster.ensemble.mode(i) == "leader"), 1)
        cluster.ensemble.stop_node(zk_leader)
        wait_through_faults(lambda: sum(cluster.ensemble.mode(i) in ("leader", "follower")
                                        for i in cluster.ensemble.nodes if i != zk_leader) == 2,
                            what="the ZooKeeper quorum re-formed")
        wait_recovered(cluster, producers, f"stop of ZooKeeper node {zk_leader}")
        cluster.ensemble.start_node(zk_leader)
        wait_recovered(cluster, producers, f"restart of ZooKeeper node {zk_leader}")
        wait_through_faults(lambda: full_isr(cluster, TOPIC, PARTITIONS) and cluster.live_brokers() == {1, 2, 3},
                            what="all brokers registered and in every ISR after the ZooKeeper fault")

        # 4. SIGSTOP a partition leader (not the controller if possible) until its session expires
        cluster.zk.sync("/")   # ctl, leaders and stat below: what the brokers wrote, not a lagging server's view
        ctl = cluster.controller()
        leaders = {p: cluster.leader(TOPIC, p) for p in range(PARTITIONS)}
        candidates = sorted(set(leaders.values()) - {ctl}) or sorted(set(leaders.values()))
        frozen = candidates[0]
        led = [p for p, b in leaders.items() if b == frozen]
        pid = cluster.brokers[frozen].proc.pid
        stat = cluster.zk.exists(f"/brokers/ids/{frozen}")
        os.kill(pid, signal.SIGSTOP)
        stale_value = b"stale-write-from-frozen-leader"
        forbidden.add(stale_value)
        stale_sock = None
        try:
            wait_through_faults(lambda: frozen not in cluster.live_brokers(), timeout=60,
                                what=f"broker {frozen}'s session to expire")
            wait_through_faults(lambda: all(cluster.leader(TOPIC, p) not in (None, frozen) for p in led),
                                what=f"leadership of {led} moved off frozen broker {frozen}")
            wait_recovered(cluster, producers, f"SIGSTOP of leader {frozen}", exclude=frozen)
            # a write queued to the frozen broker for a partition it no longer leads: the
            # broker reads it when it wakes up, still believing it is the leader
            stale_sock = socket.create_connection(("127.0.0.1", port_of(cluster, frozen)), timeout=60)
            stale_sock.sendall(produce_frame(TOPIC, led[0], -1, [stale_value], 5000))
        finally:
            os.kill(pid, signal.SIGCONT)
        code, _ = read_produce_response(stale_sock)
        stale_sock.close()
        assert code != 0, "an acks=all write to a deposed (session-expired) leader was acknowledged"
        wait_through_faults(lambda: (s := cluster.zk.exists(f"/brokers/ids/{frozen}")) is not None
                            and s.czxid != stat.czxid, what=f"broker {frozen} re-registered")
        # it no longer acts as leader for the partitions that moved
        wait_through_faults(lambda: raw_produce(port_of(cluster, frozen), TOPIC, led[0], -1, [stale_value + b"-2"])[0]
                            == NOT_LEADER_OR_FOLLOWER, what=f"broker {frozen} refuses writes for partition {led[0]}")
        forbidden.add(stale_value + b"-2")
        wait_through_faults(lambda: full_isr(cluster, TOPIC, PARTITIONS), timeout=120,
                            what=f"broker {frozen} back in every ISR")
        wait_recovered(cluster, producers, "SIGCONT")
    finally:
        for pr in producers:
            pr.stop()

    for pr in producers:
        assert pr.acked, f"{pr.name} acknowledged nothing"
        assert pr.errors == [], f"{pr.name} errors: {pr.errors[:5]}"
    hws = wait_in_sync(cluster, TOPIC, PARTITIONS)
    verify(cluster, producers, hws, forbidden)


def test_restarted_old_leader_truncates_unreplicated_tail(cluster):
    topic = "tail"
    create_topic(cluster.bootstrap_servers, topic, 1, 3, {"min.insync.replicas": "2"})
    wait_through_faults(lambda: cluster.isr(topic, 0) == [1, 2, 3], what="topic online")
    leader = cluster.leader(topic, 0)
    followers = [b for b in (1, 2, 3) if b != leader]
    committed = [b"committed-%03d" % i for i in range(20)]
    wait_through_faults(lambda: raw_produce(port_of(cluster, leader), topic, 0, -1, committed[:1])[0] == 0,
                        what="leader accepts acks=all")
    for v in committed[1:]:
        assert raw_produce(port_of(cluster, leader), topic, 0, -1, [v]) [0] == 0
    # followers hold everything committed
    wait_through_faults(lambda: len({log_bytes(cluster, b, topic, 0) for b in (1, 2, 3)}) == 1,
                        what="replicas in sync")

    pids = {b: cluster.brokers[b].proc.pid for b in followers}
    tail = [b"unreplicated-%03d" % i for i in range(10)]
    for pid in pids.values():
        os.kill(pid, signal.SIGSTOP)
    try:
        for v in tail:
            code, _ = raw_produce(port_of(cluster, leader), topic, 0, 1, [v])
            assert code == 0
        assert all(v in log_bytes(cluster, leader, topic, 0) for v in tail)
        cluster.kill_broker(leader)
    finally:
        for pid in pids.values():
            os.kill(pid, signal.SIGCONT)

    new_leader = wait_through_faults(lambda: (b := cluster.leader(topic, 0)) in followers and b,
                                     what="a new leader among the followers")
    after = [b"after-%03d" % i for i in range(10)]
    wait_through_faults(lambda: raw_produce(port_of(cluster, new_leader), topic, 0, -1, after[:1])[0] == 0,
                        what="the new leader accepts acks=all")
    for v in after[1:]:
        assert raw_produce(port_of(cluster, new_leader), topic, 0, -1, [v])[0] == 0

    cluster.start_broker(leader)
    wait_through_faults(lambda: cluster.isr(topic, 0) == [1, 2, 3], what="old leader rejoined the ISR")
    wait_through_faults(lambda: log_bytes(cluster, leader, topic, 0) == log_bytes(cluster, new_leader, topic, 0)
                        == log_bytes(cluster, [b for b in followers if b != new_leader][0], topic, 0),
                        what="old leader's log equal to the new leader's")
    data = log_bytes(cluster, leader, topic, 0)
    # A fetch the followers had parked at the leader when they were stopped may still deliver
    # the first tail record(s) into their socket buffers; those were replicated after all.
    # Everything else of the tail exists only on the old leader and must be gone.
    leaked = [v for v in tail if v in data]
    assert leaked == tail[:len(leaked)] and len(leaked) <= 2, f"tail records kept: {leaked}"
    assert all(v in data for v in committed + after)
    assert log_end_offset(data) == len(committed) + len(leaked) + len(after)
