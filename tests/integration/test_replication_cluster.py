"""Replication on a real 3-broker cluster (real ZooKeeper, real processes, kill -9).

RF 3 with min.insync.replicas=2: acks=all completes and the three logs are
byte-identical; killing the leader mid-stream loses no acknowledged record and the
returning old leader truncates its tail and rejoins the ISR; with one broker left
acks=all gets NOT_ENOUGH_REPLICAS and acks=1 still works. Every wait is on a
condition (ZooKeeper state, Metadata, log files), never a fixed sleep.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from odradek.protocol.apis import produce as produce_api
from odradek.protocol.header import decode_response, encode_request
from odradek.protocol.records import BatchBuilder
from odradek.zk.admin import AdminZkClient
from odradek.zk.cluster import metadata_broker_ids
from odradek.testing import wait_until

TOPIC = "replicated"
TP_STATE = f"/brokers/topics/{TOPIC}/partitions/0/state"


def zk_state(cluster) -> dict:
    data, _ = cluster.zk.get(TP_STATE)
    return json.loads(data)


def port_of(cluster, broker_id: int) -> int:
    return int(cluster.broker_address(broker_id).rsplit(":", 1)[1])


def raw_produce(port: int, acks: int, value: bytes, timeout_ms: int = 2000) -> tuple[int, int]:
    """(error_code, base_offset) of a one-record Produce v8 sent over a plain socket."""
    b = BatchBuilder()
    b.append(int(time.time() * 1000), None, value)
    body = {"acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": b.build()}]}]}
    frame = encode_request(produce_api, 8, 1, "replication-test", body)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_ms / 1000 + 10) as sock:
        sock.sendall(len(frame).to_bytes(4, "big") + frame)
        size = int.from_bytes(_recv(sock, 4), "big")
        _, resp = decode_response(produce_api, 8, _recv(sock, size))
    r = resp.responses[0].partition_responses[0]
    return r.error_code, r.base_offset


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def log_bytes(cluster, broker_id: int) -> bytes:
    d = Path(cluster.brokers[broker_id].dir) / "logs" / f"{TOPIC}-0"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def logs_identical(cluster, ids) -> bool:
    data = [log_bytes(cluster, i) for i in ids]
    return bool(data[0]) and all(d == data[0] for d in data)


def isr_in_metadata(cluster, broker_id: int) -> list[int]:
    """The ISR of TOPIC-0 in ``broker_id``'s Metadata answer."""
    from odradek.protocol.apis import metadata
    body = {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False}
    frame = encode_request(metadata, 1, 1, "replication-test", body)
    with socket.create_connection(("127.0.0.1", port_of(cluster, broker_id)), timeout=10) as sock:
        sock.sendall(len(frame).to_bytes(4, "big") + frame)
        _, resp = decode_response(metadata, 1, _recv(sock, int.from_bytes(_recv(sock, 4), "big")))
    return sorted(resp.topics[0].partitions[0].isr_nodes)


@pytest.fixture
def cluster(cluster_factory, request):
    """3 brokers, TOPIC with RF 3; ``inter.broker.protocol.version`` from an indirect parameter
    (default 2.8-IV1: leaders send AlterIsr; below 2.7-IV2 they write ISR changes themselves)."""
    ibp = getattr(request, "param", None)
    c = cluster_factory(brokers=3, zookeepers=1, overrides={"inter.broker.protocol.version": ibp} if ibp else None)
    for i in (1, 2, 3):
        wait_until(lambda i=i: metadata_broker_ids(port_of(c, i)) == {1, 2, 3}, what=f"broker {i} metadata")
    AdminZkClient(c.zk).create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
    wait_until(lambda: c.zk.exists(TP_STATE) and sorted(zk_state(c)["isr"]) == [1, 2, 3], what="topic state")
    leader = zk_state(c)["leader"]
    # the leader has applied LeaderAndIsr once it accepts a produce
    wait_until(lambda: raw_produce(port_of(c, leader), -1, b"probe")[0] == 0, what="leader ready")
    return c


def confluent_producer(cluster, **extra):
    ck = pytest.importorskip("confluent_kafka")
    conf = {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "retry.backoff.ms": 100, "message.timeout.ms": 60000,
            "topic.metadata.refresh.interval.ms": 1000}
    conf.update(extra)
    return ck.Producer(conf)


def consume_all(cluster, end_offset: int) -> dict[int, bytes]:
    ck = pytest.importorskip("confluent_kafka")
    c = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "verify",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition(TOPIC, 0, 0)])
    out: dict[int, bytes] = {}
    deadline = time.monotonic() + 60
    try:
        while len(out) < end_offset and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            assert m.offset() not in out
            out[m.offset()] = m.value()
    finally:
        c.close()
    return out


def test_acks_all_and_identical_logs(cluster):
    p = confluent_producer(cluster)
    acked: dict[int, bytes] = {}
    errors: list = []

    def cb(err, msg):
        if err:
            errors.append(err)
        else:
            acked[msg.offset()] = msg.value()
    for i in range(300):
        p.produce(TOPIC, b"value-%05d" % i, partition=0, on_delivery=cb)
        p.poll(0)
    assert p.flush(60) == 0
    assert errors == [] and len(acked) == 300
    wait_until(lambda: logs_identical(cluster, (1, 2, 3)), what="identical logs on all replicas")
    assert sorted(zk_state(cluster)["isr"]) == [1, 2, 3]


@pytest.mark.parametrize("cluster", ["2.6-IV0"], indirect=True, ids=["classic-isr-path"])
def test_leader_kill_loses_no_acked_record_and_old_leader_rejoins(cluster):
    """On the classic ISR path (the leaders write the state znode and /isr_change_notification),
    which every other test here leaves to AlterIsr."""
    old_leader = zk_state(cluster)["leader"]
    old_epoch = zk_state(cluster)["leader_epoch"]
    p = confluent_producer(cluster)
    acked: dict[int, bytes] = {}
    errors: list = []
    stop = threading.Event()
    lock = threading.Lock()

    def cb(err, msg):
        with lock:
            if err:
                errors.append(err)
            else:
                assert msg.offset() not in acked
                acked[msg.offset()] = msg.value()

    def run():
        i = 0
        while not stop.is_set():
            try:
                p.produce(TOPIC, b"rec-%06d" % i, partition=0, on_delivery=cb)
                i += 1
            except BufferError:
                pass
            p.poll(0.002)
        p.flush(90)
    t = threading.Thread(target=run)
    t.start()
    try:
        wait_until(lambda: len(acked) >= 300, what="records acknowledged before the kill")
        cluster.kill_broker(old_leader)
        wait_until(lambda: zk_state(cluster)["leader"] not in (-1, old_leader), what="a new leader")
        before = len(acked)
        wait_until(lambda: len(acked) >= before + 300, timeout=90, what="producing resumed on the new leader")
    finally:
        stop.set()
        t.join(120)
    assert not t.is_alive()
    assert errors == [], errors[:3]
    state = zk_state(cluster)
    assert state["leader_epoch"] > old_epoch and old_leader not in state["isr"]

    cluster.start_broker(old_leader)
    wait_until(lambda: sorted(zk_state(cluster)["isr"]) == [1, 2, 3], timeout=90, what="old leader back in ISR")
    wait_until(lambda: all(isr_in_metadata(cluster, b) == [1, 2, 3] for b in (1, 2, 3)), timeout=60,
               what="the ISR change notified to every broker's metadata")
    wait_until(lambda: logs_identical(cluster, (1, 2, 3)), what="identical logs after truncation")

    end = max(acked) + 1
    records = consume_all(cluster, end)
    for offset, value in acked.items():
        assert records.get(offset) == value, f"acknowledged offset {offset} lost or changed"
    values = list(records.values())
    assert len(values) == len(set(values)), "a record appears twice"
    assert sorted(records) == list(range(min(records), min(records) + len(records)))


def test_one_broker_left_not_enough_replicas(cluster):
    leader = zk_state(cluster)["leader"]
    for b in (1, 2, 3):
        if b != leader:
            cluster.kill_broker(b)
    wait_until(lambda: zk_state(cluster)["isr"] == [leader], timeout=90, what="ISR shrunk to the leader")
    wait_until(lambda: isr_in_metadata(cluster, leader) == [leader], what="the shrink in the leader's metadata")
    port = port_of(cluster, leader)
    wait_until(lambda: raw_produce(port, -1, b"all", timeout_ms=1000)[0] == 19, timeout=60,
               what="NOT_ENOUGH_REPLICAS for acks=all")
    code, offset = raw_produce(port, 1, b"one")
    assert code == 0 and offset >= 0
    assert raw_produce(port, -1, b"all")[0] == 19

    back = min(b for b in (1, 2, 3) if b != leader)
    cluster.start_broker(back)
    wait_until(lambda: isr_in_metadata(cluster, back) == sorted([leader, back]), timeout=90,
               what="the returning broker in the ISR, in its own metadata")
    # the leader's expansion went as AlterIsr to the controller: the leader itself, the only broker
    # left when the others died
    assert f"controller: AlterIsr from broker {leader}: 1 ISRs written" in \
        cluster.brokers[leader].log_path.read_text()
    assert raw_produce(port, -1, b"all again")[0] == 0
