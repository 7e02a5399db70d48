"""Controllers in-process against a real 3-node ZooKeeper ensemble, with fake brokers.

Each "broker" is a KafkaZkClient (its own session) registered in /brokers/ids
with an endpoint served by a tiny Twisted server that records the controller
requests it decodes and answers them; each runs a KafkaController. Everything
Twisted runs on one private reactor in a thread; tests wait on conditions.
"""
from __future__ import annotations

import json
import queue
import threading
import time

import pytest
from kazoo.client import KazooClient
from odradek_test_support import synced
from twisted.internet import defer, protocol
from twisted.internet.selectreactor import SelectReactor
from twisted.protocols.basic import Int32StringReceiver

from odradek.broker.controller import KafkaController
from odradek.protocol import header
from odradek.protocol.apis import leader_and_isr, stop_replica, update_metadata
from odradek.zk import znodes as zn
from odradek.zk.session import ControllerMovedError, KafkaZkClient
from odradek.testing import wait_until as wait_for

APIS = {m.API_KEY: m for m in (leader_and_isr, update_metadata, stop_replica)}


class ReactorThread:
    def __init__(self):
        self.reactor = SelectReactor()
        self.reactor.suggestThreadPoolSize(8)
        self.thread = threading.Thread(target=self.reactor.run, kwargs={"installSignalHandlers": False},
                                       daemon=True)
        self.thread.start()

    def call(self, fn, *args, timeout: float = 20.0):
        out: queue.Queue = queue.Queue()

        def run():
            d = defer.maybeDeferred(fn, *args)
            d.addBoth(out.put)
        self.reactor.callFromThread(run)
        res = out.get(timeout=timeout)
        if hasattr(res, "raiseException"):
            res.raiseException()
        return res

    def coro(self, make_coro, timeout: float = 20.0):
        return self.call(lambda: defer.Deferred.fromCoroutine(make_coro()), timeout=timeout)

    def stop(self):
        self.reactor.callFromThread(self.reactor.stop)
        self.thread.join(10)


class Recorder(Int32StringReceiver):
    def stringReceived(self, frame):
        hdr, body = header.decode_request(frame)
        api = APIS[hdr.api_key]
        self.factory.received.append((api.NAME, body))
        if api is stop_replica:
            resp = {"error_code": 0, "partition_errors": [
                {"topic_name": t.topic_name, "partition_index": p.partition_index, "error_code": 0}
                for t in body.topic_states for p in t.partition_states]}
        else:
            resp = {"error_code": 0}
        self.sendString(header.encode_response(api, hdr.api_version, hdr.correlation_id, resp))


class FakeBroker:
    def __init__(self, rt: ReactorThread, connect: str, broker_id: int):
        self.rt, self.id, self.connect = rt, broker_id, connect
        self.factory = protocol.ServerFactory()
        self.factory.protocol = Recorder
        self.factory.received = []
        self.port = rt.call(lambda: rt.reactor.listenTCP(0, self.factory, interface="127.0.0.1"))
        self.info = zn.BrokerInfo(broker_id, [zn.Endpoint("PLAINTEXT", "127.0.0.1",
                                                          self.port.getHost().port)])
        self.zk = KafkaZkClient(connect, session_timeout_ms=6000)
        self.zk.start()
        self.zk.create_persistent_paths()
        self.epoch = self.zk.register_broker(self.info)
        self.controller = KafkaController({}, self.zk, broker_id, rt.reactor)

    def reregister(self):
        """What the broker does on a new session (done by hand here to order the test)."""
        self.info = zn.BrokerInfo(self.id, self.info.endpoints)
        self.epoch = self.zk.register_broker(self.info)

    def received(self, api_name):
        return [b for n, b in list(self.factory.received) if n == api_name]

    def start(self):
        self.rt.coro(lambda: self.controller.startup(self.epoch))

    def expire_session(self):
        """Really expire this broker's ZooKeeper session (kazoo's test-harness trick)."""
        sid, pwd = self.zk.kazoo.client_id
        hosts = self.connect.split("/", 1)[0]   # no chroot: start() then makes no request
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            other = KazooClient(hosts=hosts, client_id=(sid, pwd), timeout=6)
            try:
                other.start(timeout=15)
                other.stop()        # closes the (shared) session on the server
            except Exception:       # the original client took the session back: try again
                pass
            finally:
                other.close()
            try:
                wait_for(lambda: (self.zk.kazoo.client_id or (sid,))[0] != sid, timeout=5,
                         what="session expiry")
                return
            except AssertionError:
                continue
        raise AssertionError("could not expire the session")

    def close(self):
        try:
            self.rt.coro(self.controller.shutdown)
        finally:
            self.zk.close()
            self.rt.call(self.port.stopListening)


@pytest.fixture
def rt():
    r = ReactorThread()
    yield r
    r.stop()


@pytest.fixture
def cluster(rt, zk_connect):
    brokers: list[FakeBroker] = []

    def make(ids):
        for i in ids:
            brokers.append(FakeBroker(rt, zk_connect, i))
        for b in brokers[-len(ids):]:
            b.start()
        return brokers
    yield make
    for b in brokers:
        try:
            b.close()
        except Exception as exc:  # keep closing the others
            print(f"closing fake broker {b.id}: {exc!r}")


def active(brokers):
    return [b for b in brokers if b.controller.is_active]


def create_topic(zk: KazooClient, topic: str, assignment: dict[int, list[int]]) -> None:
    zk.create(zn.ConfigEntityZNode.path("topics", topic), zn.ConfigEntityZNode.encode({}), makepath=True)
    zk.create(zn.TopicZNode.path(topic), zn.TopicZNode.encode(assignment), makepath=True)


def state(zk: KazooClient, topic: str, p: int):
    data, stat = zk.get(zn.TopicPartitionStateZNode.path(topic, p))
    return json.loads(data), stat


def test_election_new_topic_failover_and_fencing(cluster, zk):
    brokers = cluster([1, 2, 3])
    first = wait_for(lambda: active(brokers), what="a controller")
    assert len(first) == 1
    ctl = first[0]
    assert json.loads(synced(zk).get("/controller")[0])["brokerid"] == ctl.id
    assert zk.get("/controller_epoch")[0] == b"1"
    assert ctl.controller.epoch == 1
    for b in brokers:   # failover sends UpdateMetadata to every live broker
        wait_for(lambda: b.received("UpdateMetadata"), what=f"UpdateMetadata at {b.id}")

    create_topic(zk, "orders", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    wait_for(lambda: zk.exists(zn.TopicPartitionStateZNode.path("orders", 2)), what="state znodes")
    for p, isr in ((0, [1, 2, 3]), (1, [2, 3, 1]), (2, [3, 1, 2])):
        obj, stat = state(zk, "orders", p)
        assert obj == {"controller_epoch": 1, "leader": isr[0], "version": 1, "leader_epoch": 0,
                       "isr": isr}
        assert stat.version == 0
    for b in brokers:
        lai = wait_for(lambda: [r for r in b.received("LeaderAndIsr")
                                if any(t.topic_name == "orders" for t in r.topic_states)],
                       what=f"LeaderAndIsr at {b.id}")
        ps = [p for t in lai[0].topic_states for p in t.partition_states]
        assert all(p.is_new for p in ps) and lai[0].controller_epoch == 1
        assert lai[0].broker_epoch == b.epoch and lai[0].controller_id == ctl.id
        assert {ll.broker_id for ll in lai[0].live_leaders} <= {1, 2, 3}
        wait_for(lambda: any(t.topic_name == "orders" for r in b.received("UpdateMetadata")
                             for t in r.topic_states), what="UpdateMetadata with the topic")

    # Kill the controller's ZooKeeper session: another broker takes over with epoch 2,
    # and the partition the old controller's broker led moves to the next ISR replica.
    old_epoch_version = ctl.controller.ctx.epoch_zk_version
    ctl.expire_session()
    others = [b for b in brokers if b is not ctl]
    new = wait_for(lambda: [b for b in others if b.controller.is_active], timeout=30, what="failover")
    assert len(new) == 1 and new[0].controller.epoch == 2
    assert synced(zk).get("/controller_epoch")[0] == b"2"
    wait_for(lambda: not ctl.controller.is_active, what="old controller resigned")
    led = {1: 0, 2: 1, 3: 2}[ctl.id]
    obj = wait_for(lambda: (o := state(zk, "orders", led)[0])["leader"] != ctl.id and o,
                   timeout=30, what="leader moved")
    assert obj["controller_epoch"] == 2 and obj["leader_epoch"] >= 1
    assert obj["isr"] == [b for b in [1, 2, 3, 1, 2, 3][led:led + 3] if b != ctl.id]
    # The old broker re-registers on its new session (new broker epoch): the controller sends
    # it LeaderAndIsr for its replicas, stamped with the new epoch.
    wait_for(lambda: ctl.zk.kazoo.connected, what="new session")
    before = len(ctl.received("LeaderAndIsr"))
    ctl.reregister()
    lai = wait_for(lambda: ctl.received("LeaderAndIsr")[before:], timeout=30, what="LeaderAndIsr after return")
    assert lai[-1].broker_epoch == ctl.epoch and lai[-1].controller_epoch == 2

    # A stale controller's write fails the epoch fence.
    fresh = KafkaZkClient(ctl.connect, session_timeout_ms=6000)
    fresh.start()
    try:
        st = fresh.get_partition_states([("orders", 0)])[("orders", 0)]
        with pytest.raises(ControllerMovedError):
            fresh.update_partition_states_conditionally({("orders", 0): st}, old_epoch_version)
        with pytest.raises(ControllerMovedError):
            fresh.register_controller_and_increment_epoch(99)
        assert fresh.get_controller_epoch()[0] == 2
    finally:
        fresh.close()


def test_topic_deletion(cluster, zk):
    brokers = cluster([1, 2])
    wait_for(lambda: active(brokers), what="a controller")
    create_topic(zk, "gone", {0: [1, 2]})
    wait_for(lambda: zk.exists(zn.TopicPartitionStateZNode.path("gone", 0)), what="state znode")
    zk.create(zn.DeleteTopicsTopicZNode.path("gone"), b"", makepath=True)
    wait_for(lambda: not zk.exists(zn.TopicZNode.path("gone")), what="topic znode deleted")
    wait_for(lambda: not zk.exists(zn.DeleteTopicsTopicZNode.path("gone")), what="flag deleted")
    assert not zk.exists(zn.ConfigEntityZNode.path("topics", "gone"))
    for b in brokers:
        stops = b.received("StopReplica")
        assert any(p.delete_partition for r in stops for t in r.topic_states for p in t.partition_states)
