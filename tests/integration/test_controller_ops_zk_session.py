"""Controller robustness against ZooKeeper faults, in-process with fake brokers (the harness of
test_controller_failover): a session expiry makes the controller resign at once and re-elect
only after its broker re-registered; a ZooKeeper restart (connection loss, same session) is
ridden out by retrying, and the controller keeps working afterwards."""
from __future__ import annotations

import logging
import os
import signal
import socket

import pytest
from odradek_test_support import synced
from test_controller_failover import FakeBroker, create_topic, rt, state, wait_for  # noqa: F401 (fixture)

from odradek.broker.controller import KafkaController
from odradek.zk import znodes as zn
from odradek.zk.admin import open_zk
from odradek.zk.ensemble import ZooKeeperEnsemble
from odradek.zk.session import KafkaZkClient


class LongSessionBroker(FakeBroker):
    """A FakeBroker whose session survives a ZooKeeper restart."""

    def __init__(self, rt, connect, broker_id, session_timeout_ms=30000):  # noqa: F811
        super().__init__(rt, connect, broker_id)
        self.zk.close()
        self.zk = KafkaZkClient(connect, session_timeout_ms=session_timeout_ms)
        self.zk.start()
        self.epoch = self.zk.register_broker(self.info)
        self.controller = KafkaController({"auto.leader.rebalance.enable": False}, self.zk, broker_id,
                                          rt.reactor)


def controller_znode(zk):
    data, stat = zk.get(zn.ControllerZNode.path)
    return zn.ControllerZNode.decode(data), stat


def test_session_expiry_resigns_and_reelects_only_after_reregistration(rt, zk_connect, zk):  # noqa: F811
    b = FakeBroker(rt, zk_connect, 1)
    try:
        b.start()
        wait_for(lambda: b.controller.is_active, what="controller")
        assert b.controller.epoch == 1
        create_topic(zk, "t", {0: [1]})
        wait_for(lambda: zk.exists(zn.TopicPartitionStateZNode.path("t", 0)), what="state znode")

        old_session = b.zk.session_id
        b.expire_session()
        wait_for(lambda: not b.controller.is_active, what="resignation")
        wait_for(lambda: b.zk.kazoo.connected and b.zk.session_id != old_session, what="new session")
        # The new session is up but the broker has not re-registered: no election yet.
        assert not synced(zk).exists(zn.BrokerIdZNode.path(1))
        assert not zk.exists(zn.ControllerZNode.path) and not b.controller.is_active

        b.reregister()
        wait_for(lambda: b.controller.is_active, what="re-election after re-registration")
        cid, stat = controller_znode(synced(zk))
        assert cid == 1 and stat.ephemeralOwner == b.zk.session_id
        assert b.controller.epoch == 2 and zk.get(zn.ControllerEpochZNode.path)[0] == b"2"
        assert b.controller.broker_epoch == b.epoch
        # Watches work on the new session: a new topic gets its leader.
        create_topic(zk, "u", {0: [1]})
        wait_for(lambda: zk.exists(zn.TopicPartitionStateZNode.path("u", 0)), what="u's state znode")
        assert state(zk, "u", 0)[0]["controller_epoch"] == 2
    finally:
        b.close()


def test_connection_loss_mid_call_is_retried_not_dropped(rt, tmp_path, caplog):  # noqa: F811
    """A request in flight when the connection drops fails with ConnectionLoss: the controller
    retries it once reconnected (same session) instead of dropping the event."""
    ensemble = ZooKeeperEnsemble(tmp_path / "zk", size=1)
    ensemble.start(timeout=60)
    node = ensemble.nodes[1]
    admin = None
    b = None
    stopped = False
    try:
        connect = ensemble.connect_string
        admin = open_zk(connect, timeout=30)
        b = LongSessionBroker(rt, connect, 1)
        b.start()
        wait_for(lambda: b.controller.is_active, what="controller")
        wait_for(lambda: not b.controller._running, what="failover and its follow-up events to finish")
        session = b.zk.session_id
        caplog.set_level(logging.INFO)
        kazoo = b.zk.kazoo

        os.kill(node.pid, signal.SIGSTOP)        # ZooKeeper stops answering; requests stay in flight
        stopped = True
        b.controller.topic_change()              # the event's read is now pending
        wait_for(lambda: any("GetChildren" in type(r[0]).__name__ for r in list(kazoo._pending)),
                 what="the event's request in flight")
        kazoo._connection._socket.shutdown(socket.SHUT_RDWR)   # the connection drops under it
        wait_for(lambda: "get_all_topics failed (ConnectionLoss); retrying once reconnected" in caplog.text,
                 what="the event's read to be retried")
        os.kill(node.pid, signal.SIGCONT)
        stopped = False
        wait_for(lambda: kazoo.connected, timeout=30, what="reconnection")
        assert b.zk.session_id == session and b.controller.is_active
        wait_for(lambda: not b.controller._running, what="the event to finish")
        assert "event TopicChange failed" not in caplog.text

        create_topic(admin, "after", {0: [1]})
        wait_for(lambda: admin.exists(zn.TopicPartitionStateZNode.path("after", 0)), timeout=30,
                 what="the controller to handle a topic after the reconnection")
        assert b.controller.epoch == 1
    finally:
        if stopped:
            os.kill(node.pid, signal.SIGCONT)
        if b is not None:
            b.close()
        if admin is not None:
            admin.stop()
            admin.close()
        ensemble.stop()


pytestmark = pytest.mark.timeout(180)
