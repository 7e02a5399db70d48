"""The controller's side of AlterIsr (Kafka 2.8's KafkaController.processAlterIsr), run on the
controller's event queue.

Invariant: a request from a broker that is not registered, or with another broker epoch than its
registration's, is refused whole (STALE_BROKER_EPOCH) and changes nothing. Per partition: unknown
→ UNKNOWN_TOPIC_OR_PARTITION; a leader epoch below the controller's → FENCED_LEADER_EPOCH; the
state already asked for → answered as it is; otherwise the state znode is written (epoch-checked)
with the sender as leader, the asked leader epoch and ISR at the asked zk version
(INVALID_UPDATE_VERSION if it moved), the controller's cache follows, every live broker gets
UpdateMetadata for the partitions asked and a reassignment the new ISR completes is finished.
Beyond Kafka 2.8, which writes whatever a broker asks: a sender that is not the partition's
leader is NOT_LEADER_OR_FOLLOWER, and an ISR that is empty, lacks the leader or names a broker
that is no replica is INVALID_REQUEST; neither writes anything.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Union

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.znodes import LeaderIsrAndControllerEpoch

from .context import TopicPartition

if TYPE_CHECKING:
    from .core import ControllerCore

log = logging.getLogger(__name__)

Asked = tuple[int, list[int], int]   # (leader epoch, new ISR, current zk version)
Outcome = Union[ErrorCode, LeaderIsrAndControllerEpoch]


async def alter_isr(core: ControllerCore, broker_id: int, broker_epoch: int,
                    asked: dict[TopicPartition, Asked]) -> dict[TopicPartition, Outcome]:
    ctx = core.ctx
    if broker_id not in ctx.live_or_shutting_down_broker_ids() or ctx.broker_epoch(broker_id) != broker_epoch:
        log.info("controller: ignoring AlterIsr from broker %d with stale broker epoch %d", broker_id, broker_epoch)
        raise KafkaError(ErrorCode.STALE_BROKER_EPOCH)
    out: dict[TopicPartition, Outcome] = {}
    writes: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
    for tp, (leader_epoch, isr, zk_version) in asked.items():
        current = ctx.leadership.get(tp)
        if current is None or tp[0] not in ctx.all_topics:
            out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif leader_epoch < current.leader_epoch:
            out[tp] = ErrorCode.FENCED_LEADER_EPOCH
        elif current.leader != broker_id:
            out[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        elif (leader_epoch, list(isr)) == (current.leader_epoch, list(current.isr)):
            out[tp] = current
        elif not isr or broker_id not in isr or not set(isr) <= set(ctx.replicas(tp)):
            out[tp] = ErrorCode.INVALID_REQUEST
        else:
            writes[tp] = LeaderIsrAndControllerEpoch(broker_id, leader_epoch, list(isr), ctx.epoch, zk_version)
    if writes:
        result = await core.zk.update_partition_states(writes)
        for tp, state in result.succeeded.items():
            log.debug("controller: ISR of %s-%d is %s now (AlterIsr from broker %d)", *tp, state.isr, broker_id)
            ctx.leadership[tp] = state
            out[tp] = state
        log.info("controller: AlterIsr from broker %d: %d ISRs written, %d stale", broker_id,
                 len(result.succeeded), len(result.bad_version))
        for tp in result.bad_version:
            out[tp] = ErrorCode.INVALID_UPDATE_VERSION
        for tp, exc in result.failed.items():
            log.warning("controller: AlterIsr of %s-%d failed: %s", *tp, exc)
            out[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
    known = [tp for tp in asked if tp in ctx.leadership]
    if known:
        core._send_update_metadata(ctx.live_or_shutting_down_broker_ids(), known)
    for tp, outcome in out.items():
        if not isinstance(outcome, ErrorCode) and tp in ctx.partitions_being_reassigned:
            await core.reassignments.on_isr_change(tp)
    return out
