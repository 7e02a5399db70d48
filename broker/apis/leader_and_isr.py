"""LeaderAndIsr (key 4, v0-5): the controller makes this broker leader or follower.

Invariant: served only from the controller ZooKeeper has now, to this broker's
current registration (``controller_common``: STALE_CONTROLLER_EPOCH or
STALE_BROKER_EPOCH otherwise, nothing changed); the replica manager refuses a
controller epoch older than the newest it applied;
otherwise each partition is applied only for a newer leader epoch (followers are
handed to the replica fetchers, which reach the leaders at the request's
live_leaders endpoints). A topic's
config overrides are read once from /config/topics/<t> (in a thread) and cached,
so logs are created with the topic's LogConfig, never with guessed broker defaults:
a read that keeps failing (``broker/topic_configs.py``: retried off the reactor
thread for at most a session timeout) or an invalid stored config fails that topic's
partitions with UNKNOWN_SERVER_ERROR (as Kafka's request does) and changes nothing
for them; the next LeaderAndIsr reads ZooKeeper again.
With an authorizer, the sender needs ClusterAction on the Cluster
(CLUSTER_AUTHORIZATION_FAILED otherwise, nothing changed).
"""
from __future__ import annotations

from twisted.internet import defer

from odradek.protocol.apis import leader_and_isr as API
from odradek.protocol.errors import ErrorCode

from ..metadata_cache import PartitionMetadata
from ..topic_configs import fetch_topic_configs
from .authz import CLUSTER, CLUSTER_ACTION, authorize
from .context import BrokerContext, RequestContext
from .controller_common import from_the_controller
from .update_metadata import known_id

MIN_VERSION = 0
MAX_VERSION = 5


def partition_states(req, version: int) -> list[tuple[PartitionMetadata, object]]:
    """(state, topic_id) for every partition in the request."""
    out: list[tuple[PartitionMetadata, object]] = []
    if version <= 1:
        groups = [(None, None, req.ungrouped_partition_states)]
    else:
        groups = [(t.topic_name, t.get("topic_id"), t.partition_states) for t in req.topic_states]
    for topic, topic_id, states in groups:
        for s in states:
            out.append((PartitionMetadata(topic if topic is not None else s.topic_name, s.partition_index,
                                       s.controller_epoch, s.leader, s.leader_epoch, list(s.isr),
                                       s.zk_version, list(s.replicas), topic_id=known_id(topic_id),
                                       is_new=s.is_new), topic_id))
    return out


def handle(ctx: BrokerContext, rc: RequestContext, req):
    if not authorize(ctx, rc, CLUSTER_ACTION, CLUSTER):
        return error_response(req, rc.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return from_the_controller(ctx, "LeaderAndIsr", req, rc.api_version >= 2,
                               lambda: defer.Deferred.fromCoroutine(_handle(ctx, rc, req)),
                               lambda code: error_response(req, rc.api_version, code))


async def _handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    version = rc.api_version
    states = partition_states(req, version)
    configs, unavailable = await fetch_topic_configs(ctx.zk, ctx.config, ctx.scheduler, ctx.run_in_thread,
                                                     ctx.topic_configs, {s.topic for s, _ in states})
    for leader in req.live_leaders:  # where the replica fetchers find the leaders
        ctx.replica_manager.leader_endpoints[leader.broker_id] = (leader.host_name, leader.port)
    top, errors = ctx.replica_manager.become_leader_or_follower(
        req.controller_epoch, [s for s, _ in states if s.topic not in unavailable], configs)
    if top == ErrorCode.NONE:
        for s, _ in states:
            if s.topic in unavailable:
                errors[(s.topic, s.partition)] = ErrorCode.UNKNOWN_SERVER_ERROR
    return _response(version, top, states, errors)


def _response(version: int, top: ErrorCode, states, errors: dict) -> dict:
    def code(s: PartitionMetadata) -> int:
        return int(errors.get((s.topic, s.partition), top))

    if version <= 4:
        return {"error_code": int(top), "partition_errors": [
            {"topic_name": s.topic, "partition_index": s.partition, "error_code": code(s)} for s, _ in states]}
    topics: dict = {}
    for s, topic_id in states:
        topics.setdefault((s.topic, topic_id), []).append({"partition_index": s.partition,
                                                           "error_code": code(s)})
    return {"error_code": int(top), "topics": [{"topic_id": tid, "partition_errors": errs}
                                               for (_, tid), errs in topics.items()]}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response(version, code, partition_states(req, version), {})
