"""A leader's ISR changes as AlterIsr (IBP 2.7-IV2+): the leader's ISR tasks on task.Clock with
``AlterIsrSender`` as their writer and a stand-in controller that answers as Kafka's does."""
from __future__ import annotations

import pytest
from odradek.broker.network.controller_channel import ControllerChannel
from odradek.broker.replication.alter_isr_sender import AlterIsrSender
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.znodes import LeaderIsrAndControllerEpoch

from broker_fixtures import Broker


class Cache:
    def __init__(self, controller_id):
        self.controller_id = controller_id

    def endpoint(self, broker_id, listener):
        return None


class Controller:
    """The controller's answer per partition: the state it writes (the asked one at zk version
    + 1), or the error code ``refuse`` names for it."""

    def __init__(self):
        self.is_active = True
        self.asked: list[tuple[int, int, dict]] = []
        self.refuse: dict = {}
        self.answer_isr: list[int] | None = None

    async def alter_isr(self, broker_id, broker_epoch, asked):
        self.asked.append((broker_id, broker_epoch, dict(asked)))
        out = {}
        for tp, (leader_epoch, isr, version) in asked.items():
            out[tp] = self.refuse.get(tp) or LeaderIsrAndControllerEpoch(
                broker_id, leader_epoch, self.answer_isr or list(isr), 1, version + 1)
        return out


@pytest.fixture
def leader(tmp_path):
    b = Broker(tmp_path, 1, replica_lag_time_max_ms=1000, replica_fetch_wait_max_ms=200)
    controller = Controller()
    cache = Cache(controller_id=1)
    channel = ControllerChannel(1, lambda: cache, lambda: controller, "PLAINTEXT", b.clock)
    b.rm.isr_writer = AlterIsrSender(1, lambda: 77, channel)
    b.rm.isr_notifier = None
    b.rm.shutdown()          # restart the tasks on the fixture's clock
    b.rm.startup()
    b.clock.advance(1)
    yield b, controller, cache
    b.close()


def test_shrink_goes_to_the_controller_and_nothing_is_left_to_propagate(leader):
    b, controller, _ = leader
    b.lead("t", partitions=2, replicas=[1, 2], isr=[1, 2])
    b.clock.advance(1.6)                         # both followers out of sync: one AlterIsr
    assert controller.asked == [(1, 77, {("t", 0): (0, [1], 0), ("t", 1): (0, [1], 0)})]
    for p in b.rm.partitions.values():
        assert (p.isr, p.zk_version, p.pending_isr) == ([1], 1, None)
    assert b.rm.isr_changes == [0, 2]
    assert b.rm.isr_propagation.due(10 ** 12) is None   # the controller told every broker itself


def test_each_partition_gets_its_own_outcome(leader):
    b, controller, _ = leader
    controller.refuse = {("t", 1): ErrorCode.INVALID_UPDATE_VERSION, ("t", 2): ErrorCode.FENCED_LEADER_EPOCH}
    b.lead("t", partitions=3, replicas=[1, 2], isr=[1, 2])
    b.clock.advance(1.6)
    isrs = {tp[1]: (p.isr, p.zk_version, p.pending_isr) for tp, p in b.rm.partitions.items()}
    assert isrs == {0: ([1], 1, None), 1: ([1, 2], 0, None), 2: ([1, 2], 0, None)}


def test_another_state_answered_is_not_taken_as_written(leader):
    b, controller, _ = leader
    controller.answer_isr = [1, 2]               # not the ISR asked for
    b.lead("t", replicas=[1, 2], isr=[1, 2])
    b.clock.advance(1.6)
    p = b.rm.get_partition(("t", 0))
    assert (p.isr, p.zk_version, p.pending_isr) == ([1, 2], 0, None)


def test_without_a_known_controller_the_change_waits_for_the_next_round(leader):
    b, controller, cache = leader
    cache.controller_id = None
    b.lead("t", replicas=[1, 2], isr=[1, 2])
    b.clock.advance(1.6)
    p = b.rm.get_partition(("t", 0))
    assert (p.isr, p.pending_isr, controller.asked) == ([1, 2], None, [])
    cache.controller_id = 1                      # the next isr-expiration run proposes it again
    b.clock.advance(0.5)
    assert (p.isr, p.zk_version, len(controller.asked)) == ([1], 1, 1)


def test_a_remote_controller_without_the_listener_fails_every_partition():
    sender = AlterIsrSender(1, lambda: 5, ControllerChannel(1, lambda: Cache(controller_id=2), lambda: None,
                                                            "PLAINTEXT", None))
    state = LeaderIsrAndControllerEpoch(1, 0, [1], 1, 0)
    box: list = []
    sender({("t", 0): state}).addBoth(box.append)
    assert isinstance(box[0].value, KafkaError) and box[0].value.code == ErrorCode.NOT_CONTROLLER
