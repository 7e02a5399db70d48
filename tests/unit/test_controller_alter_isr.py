"""The controller's AlterIsr (Kafka 2.8's processAlterIsr) against the in-memory ZooKeeper fake."""
from __future__ import annotations

import pytest

from odradek.broker.controller.alter_isr import alter_isr
from odradek.broker.controller.request_batch import UPDATE_METADATA
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.znodes import LeaderIsrAndControllerEpoch as S

from test_controller_core import make, run

T0, T1 = ("t", 0), ("t", 1)


@pytest.fixture
def controller():
    zk, ch, core = make(topics={"t": {0: [1, 2, 3], 1: [2, 3, 1]}},
                        states={T0: S(1, 4, [1, 2, 3], 1, 7), T1: S(2, 0, [2, 3, 1], 1, 0)})
    run(core.on_controller_failover(2, 0))
    ch.take()
    zk.writes.clear()
    return zk, ch, core


EPOCH_1 = 101   # broker 1's registration epoch in the fake


def test_a_good_update_is_written_cached_and_sent_everywhere(controller):
    zk, ch, core = controller
    out = run(alter_isr(core, 1, EPOCH_1, {T0: (4, [1, 3], 7)}))
    assert out[T0] == S(1, 4, [1, 3], 2, 8)
    assert zk.states[T0] == S(1, 4, [1, 3], 2, 8) and core.ctx.leadership[T0].zk_version == 8
    ums = ch.take(UPDATE_METADATA)
    assert {r.broker_id for r in ums} == {1, 2, 3}
    assert ums[0].body["topic_states"][0]["partition_states"][0]["isr"] == [1, 3]
    # asking for the state it already is answers it, writing nothing
    zk.writes.clear()
    assert run(alter_isr(core, 1, EPOCH_1, {T0: (4, [1, 3], 8)}))[T0] == S(1, 4, [1, 3], 2, 8)
    assert not zk.writes


@pytest.mark.parametrize("asked,code", [
    ({T0: (3, [1, 3], 7)}, ErrorCode.FENCED_LEADER_EPOCH),
    ({T0: (4, [1, 3], 6)}, ErrorCode.INVALID_UPDATE_VERSION),
    ({("u", 0): (0, [1], 0)}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ({T1: (0, [1, 2], 0)}, ErrorCode.NOT_LEADER_OR_FOLLOWER),      # broker 1 does not lead t-1
    ({T0: (4, [2, 3], 7)}, ErrorCode.INVALID_REQUEST),             # an ISR without its leader
    ({T0: (4, [1, 9], 7)}, ErrorCode.INVALID_REQUEST),             # 9 is no replica
])
def test_a_stale_or_wrong_update_changes_nothing(controller, asked, code):
    zk, ch, core = controller
    before = dict(zk.states)
    out = run(alter_isr(core, 1, EPOCH_1, asked))
    assert list(out.values()) == [code]
    assert zk.states == before and not zk.writes


@pytest.mark.parametrize("broker_id,epoch", [(1, EPOCH_1 - 1), (1, EPOCH_1 + 1), (9, 0)])
def test_a_stale_broker_epoch_refuses_the_whole_request(controller, broker_id, epoch):
    zk, ch, core = controller
    with pytest.raises(KafkaError) as e:
        run(alter_isr(core, broker_id, epoch, {T0: (4, [1, 3], 7)}))
    assert e.value.code == ErrorCode.STALE_BROKER_EPOCH
    assert not zk.writes and not ch.take()
