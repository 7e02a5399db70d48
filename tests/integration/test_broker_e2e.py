"""Real ZooKeeper + real broker processes, spoken to over raw sockets with our codec."""
from __future__ import annotations

import json
import signal
import socket
import struct
import threading
import time
import uuid

import pytest

from odradek.protocol.apis import (api_versions, create_topics, fetch, leader_and_isr, list_offsets, metadata, produce,
                                  stop_replica, update_metadata)
from odradek.protocol.connection import ClientConnection, FrameReader
from odradek.protocol.header import decode_response
from odradek.protocol.records import BatchBuilder, iter_records
from odradek.testing import wait_until

pytestmark = pytest.mark.integration


class RawClient:
    """A blocking Kafka client socket, one request at a time, on the one sans-IO framer;
    ``send_raw`` writes bytes as they are (for malformed frames)."""

    def __init__(self, address: str, timeout: float = 30.0, source_ip: str | None = None):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout,
                                             source_address=None if source_ip is None else (source_ip, 0))
        self.conn: ClientConnection[None] = ClientConnection("it", first_correlation_id=1)

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        """The next frame the broker sends (the answer to ``send_raw``)."""
        reader = FrameReader(1 << 30)
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by the broker")
            if frames := reader.feed(chunk):
                return frames[0]

    def request(self, api, version: int, body: dict):
        _, parts = self.conn.send_request(api, version, body, None)
        self.sock.sendall(b"".join(parts))
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by the broker")
            done = self.conn.receive_data(chunk)
            assert self.conn.violation is None, self.conn.violation
            if done:
                return done[0][1]

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def closed_by_peer_within(self, seconds: float) -> bool:
        """Whether the broker closed this connection (waiting at most ``seconds``)."""
        self.sock.settimeout(seconds if seconds > 0 else 0.0)
        try:
            return self.sock.recv(1) == b""
        except (BlockingIOError, socket.timeout):
            return False
        except ConnectionResetError:
            return True
        finally:
            self.sock.settimeout(30.0)


def records(n: int, start: int = 0) -> bytes:
    b = BatchBuilder()
    now = int(time.time() * 1000)
    for i in range(start, start + n):
        b.append(now, b"k%d" % i, b"value-%d" % i)
    return b.build()


def produce_one(c: RawClient, topic: str, recs: bytes, acks: int = -1, partition: int = 0):
    resp = c.request(produce, 8, {"acks": acks, "timeout_ms": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": recs}]}]})
    return resp.responses[0].partition_responses[0]


def fetch_all(c: RawClient, topic: str, offset: int = 0, partition: int = 0):
    resp = c.request(fetch, 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50 << 20,
                                 "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                                     {"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                                      "current_leader_epoch": -1, "log_start_offset": -1,
                                                                      "partition_max_bytes": 50 << 20}]}]})
    return resp.responses[0].partition_responses[0]


def create_topic(c: RawClient, name: str, partitions: int = 1, rf: int = 1):
    resp = c.request(create_topics, 4, {"topics": [{"name": name, "num_partitions": partitions,
                                                    "replication_factor": rf, "assignments": [], "configs": []}],
                                        "timeout_ms": 30000, "validate_only": False})
    return resp.topics[0]


def leader_ready(c: RawClient, topic: str):
    def ready():
        t = c.request(metadata, 8, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}).topics[0]
        return t.error_code == 0 and t.partitions and all(p.leader_id >= 0 for p in t.partitions)
    wait_until(ready, what=f"a leader for {topic}")


def wait_brokers(address: str, n: int) -> None:
    """Until the broker's metadata cache (filled by the controller) lists ``n`` live brokers."""
    c = RawClient(address)
    try:
        wait_until(lambda: len(c.request(metadata, 8, {"topics": []}).brokers) >= n,
                   what=f"{n} live brokers in the metadata")
    finally:
        c.close()


@pytest.fixture
def single(cluster_factory):
    cluster = cluster_factory(brokers=1)
    wait_brokers(cluster.broker_address(1), 1)
    return cluster


def test_end_to_end_single_broker(single):
    c = RawClient(single.broker_address(1))
    av = c.request(api_versions, 3, {"client_software_name": "it", "client_software_version": "1.0"})
    assert av.error_code == 0 and {k.api_key for k in av.api_keys} >= {0, 1, 2, 3, 18, 19, 20, 22}
    assert create_topic(c, "e2e", partitions=2).error_code == 0
    md = c.request(metadata, 8, {"topics": None})
    assert md.controller_id == 1 and len(md.cluster_id) == 22
    assert [(b.node_id, b.host) for b in md.brokers] == [(1, "127.0.0.1")]
    [t] = [t for t in md.topics if t.name == "e2e"]
    assert sorted(p.leader_id for p in t.partitions) == [1, 1]
    assert create_topic(c, "e2e").error_code == 36  # TOPIC_ALREADY_EXISTS
    r1 = produce_one(c, "e2e", records(3))
    r2 = produce_one(c, "e2e", records(2, 3))
    assert (r1.error_code, r1.base_offset, r2.base_offset) == (0, 0, 3)
    p = fetch_all(c, "e2e")
    assert p.high_watermark == 5
    assert [r.value for r in iter_records(p.record_set)] == [b"value-%d" % i for i in range(5)]
    lo = c.request(list_offsets, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "e2e", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": t}
                                       for t in (-1,)]}]}).topics[0].partitions[0]
    assert (lo.error_code, lo.offset) == (0, 5)
    # auto-creation through Metadata
    t = c.request(metadata, 8, {"topics": [{"name": "auto"}], "allow_auto_topic_creation": True}).topics[0]
    assert t.error_code in (0, 5)
    leader_ready(c, "auto")
    c.close()


def test_bad_crc_is_rejected_and_the_broker_keeps_serving(single):
    c = RawClient(single.broker_address(1))
    assert create_topic(c, "crc").error_code == 0
    assert produce_one(c, "crc", records(2)).error_code == 0
    bad = bytearray(records(2, 2))
    bad[-3] ^= 0x55
    assert produce_one(c, "crc", bytes(bad)).error_code == 2  # CORRUPT_MESSAGE
    p = fetch_all(c, "crc")
    assert p.high_watermark == 2 and len(list(iter_records(p.record_set))) == 2
    assert produce_one(c, "crc", records(1, 2)).base_offset == 2
    c.close()


def test_garbage_and_oversized_frames_close_only_that_connection(cluster_factory):
    cluster = cluster_factory(brokers=1, overrides={"socket.request.max.bytes": 100000})
    addr = cluster.broker_address(1)
    good = RawClient(addr)
    assert good.request(api_versions, 0, {}).error_code == 0
    for payload in (struct.pack(">i", 200000) + b"x" * 100,
                    struct.pack(">i", 6) + b"\x00\x63\x00\x00\x00\x01",
                    struct.pack(">i", 10) + struct.pack(">hhih", 3, 77, 1, -1)):
        bad = RawClient(addr)
        bad.send_raw(payload)
        assert bad.closed_by_peer()
        bad.close()
    assert good.request(api_versions, 0, {}).error_code == 0
    # ApiVersions at an unsupported version: a v0 answer with error 35, connection kept
    bad = RawClient(addr)
    data = struct.pack(">hhih", 18, 99, 1, -1)
    bad.send_raw(struct.pack(">i", len(data)) + data)
    _, resp = decode_response(api_versions, 0, bad.read_frame())
    assert resp.error_code == 35
    assert bad.request(api_versions, 3, {"client_software_name": "x", "client_software_version": "1"}).error_code == 0
    good.close()
    bad.close()


def test_restart_keeps_data(single):
    c = RawClient(single.broker_address(1))
    assert create_topic(c, "durable").error_code == 0
    for i in range(5):
        assert produce_one(c, "durable", records(10, i * 10)).error_code == 0
    c.close()
    single.kill_broker(1, signal.SIGTERM)
    single.start_broker(1)
    c = RawClient(single.broker_address(1))
    leader_ready(c, "durable")
    p = wait_until(lambda: (lambda r: r if r.error_code == 0 else None)(fetch_all(c, "durable")),
                   what="the partition to be served again")
    assert [r.value for r in iter_records(p.record_set)] == [b"value-%d" % i for i in range(50)]
    assert produce_one(c, "durable", records(1, 50)).base_offset == 50
    c.close()


def test_kill_9_keeps_every_acknowledged_record(single):
    c = RawClient(single.broker_address(1))
    assert create_topic(c, "crash").error_code == 0
    c.close()
    acked: dict[int, bytes] = {}
    stop = threading.Event()

    def stream():
        client = RawClient(single.broker_address(1), timeout=10)
        i = 0
        try:
            while not stop.is_set():
                r = produce_one(client, "crash", records(5, i), acks=-1)
                if r.error_code == 0:
                    for k in range(5):
                        acked[r.base_offset + k] = b"value-%d" % (i + k)
                i += 5
        except (OSError, ConnectionError):
            pass
        finally:
            client.close()
    th = threading.Thread(target=stream)
    th.start()
    wait_until(lambda: len(acked) >= 500, what="some acknowledged records")
    single.kill_broker(1, signal.SIGKILL)
    stop.set()
    th.join(30)
    assert acked
    single.start_broker(1)
    c = RawClient(single.broker_address(1))
    leader_ready(c, "crash")
    p = wait_until(lambda: (lambda r: r if r.error_code == 0 else None)(fetch_all(c, "crash")),
                   what="the partition to be served again")
    got = {r.offset: r.value for r in iter_records(p.record_set)}
    missing = [o for o in acked if got.get(o) != acked[o]]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. offset {missing[:5]}"
    c.close()


@pytest.fixture(scope="module")
def two_brokers(tmp_path_factory):
    """One 2-broker cluster for the tests below (they use topics of their own)."""
    from odradek.zk.cluster import LocalCluster
    cluster = LocalCluster(tmp_path_factory.mktemp("two-brokers"), zookeepers=1, brokers=2)
    cluster.start()
    try:
        for i in (1, 2):
            wait_brokers(cluster.broker_address(i), 2)
        yield cluster
    finally:
        cluster.stop()


def test_two_brokers_create_topics_goes_to_the_controller(two_brokers):
    cluster = two_brokers
    clients = {i: RawClient(cluster.broker_address(i)) for i in (1, 2)}
    controller = wait_until(lambda: clients[1].request(metadata, 8, {"topics": []}).controller_id in (1, 2)
                            and clients[1].request(metadata, 8, {"topics": []}).controller_id)
    other = 2 if controller == 1 else 1
    assert create_topic(clients[other], "two", partitions=4).error_code == 41  # NOT_CONTROLLER
    assert create_topic(clients[controller], "two", partitions=4).error_code == 0
    for c in clients.values():
        leader_ready(c, "two")
    t = clients[other].request(metadata, 8, {"topics": [{"name": "two"}]}).topics[0]
    leaders = {p.partition_index: p.leader_id for p in t.partitions}
    assert set(leaders.values()) == {1, 2}
    for part, leader in leaders.items():
        r = produce_one(clients[leader], "two", records(2), partition=part)
        assert r.error_code == 0
        wrong = produce_one(clients[3 - leader], "two", records(2), partition=part)
        assert wrong.error_code == 6  # NOT_LEADER_OR_FOLLOWER
    for c in clients.values():
        c.close()


def test_reregisters_after_zookeeper_session_expiry(cluster_factory):
    import os

    cluster = cluster_factory(brokers=1, overrides={"zookeeper.session.timeout.ms": 4000})
    wait_brokers(cluster.broker_address(1), 1)
    c = RawClient(cluster.broker_address(1))
    assert create_topic(c, "expiry").error_code == 0
    c.close()
    zk = cluster.zk
    old = zk.exists("/brokers/ids/1").czxid
    pid = cluster.brokers[1].pid
    os.kill(pid, signal.SIGSTOP)  # a frozen broker: its session expires on the ZooKeeper side
    try:
        wait_until(lambda: zk.exists("/brokers/ids/1") is None, timeout=30, what="the session to expire")
    finally:
        os.kill(pid, signal.SIGCONT)
    stat = wait_until(lambda: zk.exists("/brokers/ids/1"), timeout=60, what="re-registration")
    assert stat.czxid != old
    c = RawClient(cluster.broker_address(1))
    leader_ready(c, "expiry")
    r = wait_until(lambda: (lambda x: x if x.error_code == 0 else None)(produce_one(c, "expiry", records(1))),
                   what="produce after the new session")
    assert r.base_offset == 0
    c.close()


def test_forged_controller_requests_are_refused_and_change_nothing(two_brokers):
    """What anyone who reaches a broker port could do before: delete a partition's data with a
    StopReplica, make the broker ignore its controller with a higher controller epoch, and
    advertise a foreign host with UpdateMetadata. Each forged request, with every epoch a
    plain socket can guess or read from ZooKeeper short of the right pair, is refused with
    Kafka's error code; the partition keeps its data and leader, and the real controller is
    still obeyed afterwards."""
    cluster = two_brokers
    zk = cluster.zk
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    epoch = int(zk.get("/controller_epoch")[0])
    c = RawClient(cluster.broker_address(1))
    assert create_topic(c if controller == 1 else RawClient(cluster.broker_address(controller)),
                        "forged", partitions=2, rf=2).error_code == 0
    leader_ready(c, "forged")
    leaders = {p.partition_index: p.leader_id
               for p in c.request(metadata, 8, {"topics": [{"name": "forged"}]}).topics[0].partitions}
    on_1 = RawClient(cluster.broker_address(1))
    target = next(p for p, leader in leaders.items() if leader == 1)
    assert produce_one(on_1, "forged", records(5), partition=target).error_code == 0
    broker_epoch = zk.exists("/brokers/ids/1").czxid
    attempts = [(controller, epoch, broker_epoch - 1), (controller, epoch, -1), (controller, epoch, broker_epoch + 1),
                (controller, epoch - 1, broker_epoch), (controller, epoch + 1, broker_epoch),
                (controller, epoch + 1000, broker_epoch), (3 - controller, epoch, broker_epoch)]
    foreign = {"id": 1, "endpoints": [{"port": 1, "host": "attacker.example", "listener": "PLAINTEXT",
                                       "security_protocol": 0}], "rack": None}
    for cid, cepoch, bepoch in attempts:
        expected = 77 if bepoch != broker_epoch else 11   # STALE_BROKER_EPOCH, STALE_CONTROLLER_EPOCH
        what = f"controller {cid}, controller epoch {cepoch}, broker epoch {bepoch}"
        stop = on_1.request(stop_replica, 3, {
            "controller_id": cid, "controller_epoch": cepoch, "broker_epoch": bepoch, "topic_states": [
                {"topic_name": "forged", "partition_states": [
                    {"partition_index": target, "leader_epoch": 1000, "delete_partition": True}]}]})
        assert stop.error_code == expected, what
        um = on_1.request(update_metadata, 7, {
            "controller_id": cid, "controller_epoch": cepoch, "broker_epoch": bepoch, "topic_states": [],
            "live_brokers": [foreign]})
        assert um.error_code == expected, what
        lai = on_1.request(leader_and_isr, 5, {
            "controller_id": cid, "controller_epoch": cepoch, "broker_epoch": bepoch, "type": 0,
            "topic_states": [{"topic_name": "forged", "topic_id": uuid.UUID(int=0), "partition_states": [
                {"partition_index": target, "controller_epoch": cepoch, "leader": 2, "leader_epoch": 1000,
                 "isr": [2], "zk_version": 0, "replicas": [2, 1], "adding_replicas": [], "removing_replicas": [],
                 "is_new": False}]}], "live_leaders": []})
        assert lai.error_code == expected, what
    # a version without a broker epoch cannot name this registration
    old = on_1.request(stop_replica, 0, {"controller_id": controller, "controller_epoch": epoch,
                                         "delete_partitions": True,
                                         "ungrouped_partitions": [{"topic_name": "forged", "partition_index": target}]})
    assert old.error_code == 77
    # the partition kept its data and its leader; nobody advertises a foreign host
    got = fetch_all(on_1, "forged", partition=target)
    assert got.error_code == 0 and len(list(iter_records(got.record_set))) == 5
    meta = on_1.request(metadata, 8, {"topics": [{"name": "forged"}]})
    assert {(b.node_id, b.host) for b in meta.brokers} == {(1, "127.0.0.1"), (2, "127.0.0.1")}
    assert {p.partition_index: p.leader_id for p in meta.topics[0].partitions} == leaders
    # and the real controller is still obeyed: a new topic gets leaders on this broker too
    ctrl = RawClient(cluster.broker_address(controller))
    assert create_topic(ctrl, "after-forgery", partitions=2, rf=2).error_code == 0
    leader_ready(on_1, "after-forgery")
    for client in (c, on_1, ctrl):
        client.close()


def _ask_versions(c: RawClient) -> int:
    return c.request(api_versions, 0, {}).error_code


def test_connection_limits_refuse_the_excess_and_close_idle_sockets(cluster_factory):
    """max.connections.per.ip (here through its overrides) refuses the excess from one address
    promptly while its other connections and other addresses keep working; idle sockets, which
    used to be held open forever, are closed after connections.max.idle.ms."""
    cluster = cluster_factory(brokers=1, overrides={"max.connections.per.ip.overrides": "127.0.0.2:3",
                                                    "connections.max.idle.ms": 3000})

    def from_ip(ip: str) -> RawClient:
        return RawClient(cluster.broker_address(1), timeout=10, source_ip=ip)

    allowed = [from_ip("127.0.0.2") for _ in range(3)]
    assert [_ask_versions(c) for c in allowed] == [0, 0, 0]
    try:
        excess = from_ip("127.0.0.2")
        refused = excess.closed_by_peer()
        excess.close()
    except ConnectionResetError:   # refused so fast that connect() itself saw the reset
        refused = True
    assert refused, "the 4th connection from 127.0.0.2 was not refused"
    assert [_ask_versions(c) for c in allowed] == [0, 0, 0]
    other = from_ip("127.0.0.3")
    assert _ask_versions(other) == 0
    allowed.pop().close()

    def served_newcomer() -> RawClient | None:
        try:
            c = from_ip("127.0.0.2")
        except ConnectionResetError:   # refused: the broker has not seen the close yet
            return None
        try:
            return c if _ask_versions(c) == 0 else None
        except OSError:               # refused, after the connect returned
            c.close()
            return None
    replacement = wait_until(served_newcomer, timeout=30, what="a place freed by a closed connection")
    # idle sockets go; one that keeps asking stays
    idle = [from_ip("127.0.0.4") for _ in range(200)]
    active = from_ip("127.0.0.5")
    deadline = time.monotonic() + 60
    while not all(c.closed_by_peer_within(0) for c in idle):
        assert time.monotonic() < deadline, "idle connections still open after 60 s"
        assert _ask_versions(active) == 0
        time.sleep(0.5)
    assert _ask_versions(active) == 0
    for c in allowed + [other, replacement, active] + idle:
        c.close()
