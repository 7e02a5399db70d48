"""AlterIsr (key 56, v0): a partition leader asks the controller to change its ISR, as Kafka
2.8's KafkaApis.handleAlterIsrRequest answers it.

Invariant: the sender needs ClusterAction on the Cluster (CLUSTER_AUTHORIZATION_FAILED, top-level,
nothing changed); only the active controller answers (others: NOT_CONTROLLER, top-level, also
when leadership moves while the request waits); the controller's event queue decides and writes
(``broker/controller/alter_isr.py``: STALE_BROKER_EPOCH top-level, per partition the new
leader_and_isr with its zk version, or FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION,
UNKNOWN_TOPIC_OR_PARTITION...). Leaders send it from inter.broker.protocol.version 2.7-IV2 on
(``broker/replication/alter_isr_sender.py``), as Kafka's do.
"""
from __future__ import annotations

from twisted.internet import defer

from odradek.protocol.apis import alter_isr as API
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.session import ControllerMovedError

from .authz import CLUSTER, CLUSTER_ACTION, authorize
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: BrokerContext, rc: RequestContext, req):
    if not authorize(ctx, rc, CLUSTER_ACTION, CLUSTER):
        return error_response(req, 0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = ctx.controller
    if controller is None or not controller.is_active:
        return error_response(req, 0, ErrorCode.NOT_CONTROLLER)
    asked = {(t.name, p.partition_index): (p.leader_epoch, list(p.new_isr), p.current_isr_version)
             for t in req.topics for p in t.partitions}

    async def run() -> dict:
        try:
            outcomes = await defer.ensureDeferred(controller.alter_isr(req.broker_id, req.broker_epoch, asked))
        except KafkaError as e:
            return error_response(req, 0, e.code)
        except ControllerMovedError:
            return error_response(req, 0, ErrorCode.NOT_CONTROLLER)
        topics: dict[str, list[dict]] = {}
        for (topic, index), o in outcomes.items():
            part = ({"partition_index": index, "error_code": int(o), "leader_id": 0, "leader_epoch": 0, "isr": [],
                     "current_isr_version": 0} if isinstance(o, ErrorCode) else
                    {"partition_index": index, "error_code": 0, "leader_id": o.leader, "leader_epoch": o.leader_epoch,
                     "isr": list(o.isr), "current_isr_version": o.zk_version})
            topics.setdefault(topic, []).append(part)
        return {"throttle_time_ms": 0, "error_code": 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    return defer.Deferred.fromCoroutine(run())


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "topics": []}
