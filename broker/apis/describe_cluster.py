"""DescribeCluster (key 60, v0): brokers, controller and cluster id, for admin clients (KIP-700).

Invariant: answered from the MetadataCache alone, like Metadata: the live brokers with their
endpoint on the listener this connection arrived on, and not before the first UpdateMetadata
(``context.first_metadata``). With
``include_cluster_authorized_operations`` the answer carries the bit set of the Cluster
operations the principal may perform (all of them without an authorizer; 0 without Describe on
the Cluster, as KafkaApis.handleDescribeCluster answers); otherwise INT32_MIN.
"""
from __future__ import annotations

from twisted.internet import defer

from odradek.protocol.apis import describe_cluster as API
from odradek.protocol.errors import ErrorCode

from .authz import NO_OPERATIONS, cluster_operations
from .context import BrokerContext, RequestContext, first_metadata

MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: BrokerContext, rc: RequestContext, req) -> dict | defer.Deferred:
    if not ctx.metadata_cache.version:   # before this broker's first UpdateMetadata
        return first_metadata(ctx).addCallback(lambda _: _answer(ctx, rc, req))
    return _answer(ctx, rc, req)


def _answer(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    cache = ctx.metadata_cache
    operations = cluster_operations(ctx, rc) if req.include_cluster_authorized_operations else NO_OPERATIONS
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "cluster_id": cache.cluster_id or "",
            "controller_id": cache.controller_id if cache.controller_id is not None else -1,
            "brokers": [{"broker_id": b.id, "host": host, "port": port, "rack": b.rack}
                        for b, (host, port) in cache.brokers_on(rc.listener)],
            "cluster_authorized_operations": operations}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": None, "cluster_id": "",
            "controller_id": -1, "brokers": [], "cluster_authorized_operations": NO_OPERATIONS}
