"""AlterReplicaLogDirs (key 34, v0-2): move replicas between this broker's log dirs (KIP-113).

Invariant: as KafkaApis.handleAlterReplicaLogDirsRequest with ReplicaManager.alterReplicaLogDirs
(``replication/log_dir_mover.py``): without Alter on the Cluster every partition is
CLUSTER_AUTHORIZATION_FAILED and nothing changes; else per partition (the last dir named for it
wins, as Kafka's map of partition to dir): a topic name too long for the ``.<uuid>-future`` dir
is INVALID_TOPIC_EXCEPTION, a dir that is not a configured log dir LOG_DIR_NOT_FOUND, an offline
dir or partition KAFKA_STORAGE_ERROR, no replica here REPLICA_NOT_AVAILABLE (the dir is kept for
the replica's creation), the replica's own dir NONE with nothing to do; otherwise a future log
is created there (a different running move is dropped first) and the answer is NONE at once:
the move runs in the background (DescribeLogDirs shows it).
"""
from __future__ import annotations

from odradek.protocol.apis import alter_replica_log_dirs as API
from odradek.protocol.errors import ErrorCode

from .authz import ALTER, CLUSTER, authorize
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 2


def _partitions(req) -> dict[tuple[str, int], str]:
    out: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                out.pop((t.name, p), None)
                out[(t.name, p)] = d.path
    return out


def _response(codes: dict[tuple[str, int], ErrorCode | int]) -> dict:
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": int(code)})
    return {"throttle_time_ms": 0, "results": [{"topic_name": t, "partitions": parts}
                                               for t, parts in by_topic.items()]}


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    wanted = _partitions(req)
    if not authorize(ctx, rc, ALTER, CLUSTER):
        return _response({tp: ErrorCode.CLUSTER_AUTHORIZATION_FAILED for tp in wanted})
    mover = ctx.replica_manager.log_dir_mover
    if mover is None:
        return _response({tp: ErrorCode.KAFKA_STORAGE_ERROR for tp in wanted})
    return _response(mover.alter(wanted))


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response({tp: code for tp in _partitions(req)})
