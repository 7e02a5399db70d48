"""ListOffsets for the clients: offsets by timestamp, earliest (-2) or latest (-1), from each
partition's leader.

Invariant: every target gets an answer from its partition's current leader or the call fails:
retriable errors (a leader that moved, a broker that went away) refresh the metadata and
retry after ``backoff`` until ``timeout``, then ``KafkaTimeoutError`` names what is missing;
any other error is raised at once.
"""
from __future__ import annotations

import time
from typing import Mapping

from odradek.protocol.apis import list_offsets as _list_offsets
from odradek.protocol.errors import ErrorCode, KafkaError

from .cluster import ClusterMetadata, NodePool
from .structs import KafkaTimeoutError, TopicPartition


def list_offsets(cluster: ClusterMetadata, pool: NodePool, targets: Mapping[TopicPartition, int],
                 isolation_level: int, timeout: float, backoff: float) -> dict[TopicPartition, tuple[int, int]]:
    """{tp: (offset, timestamp)} for ListOffsets targets (-1 latest, -2 earliest, or a timestamp)."""
    deadline = time.monotonic() + timeout
    pending = dict(targets)
    result: dict[TopicPartition, tuple[int, int]] = {}
    for tp in pending:
        cluster.add_topic(tp.topic)
    while pending:
        if cluster.needs_refresh() or any(cluster.leader_for(*tp) < 0 for tp in pending):
            try:
                cluster.refresh()
            except KafkaError:
                pass
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in pending:
            by_node.setdefault(cluster.leader_for(*tp), []).append(tp)
        for node, tps in by_node.items():
            if node < 0:
                continue
            topics: dict[str, list] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(
                    {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": pending[tp],
                     "max_num_offsets": 1})
            body = {"replica_id": -1, "isolation_level": isolation_level,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
            try:
                conn = pool.get(node)
                resp = conn.request(_list_offsets, body, version=conn.version_for(_list_offsets))
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                pool.drop(node, exc)
                cluster.request_update()
                continue
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if tp not in pending:
                        continue
                    if p.error_code == ErrorCode.NONE:
                        offset = p.offset
                        if conn.version_for(_list_offsets) == 0:
                            offset = p.old_style_offsets[0] if p.old_style_offsets else -1
                        result[tp] = (offset, p.timestamp)
                        del pending[tp]
                    elif ErrorCode(p.error_code).retriable:
                        cluster.request_update()
                    else:
                        raise KafkaError(p.error_code, f"ListOffsets {tp.topic}-{tp.partition}")
        if pending:
            if time.monotonic() + backoff > deadline:
                raise KafkaTimeoutError(f"ListOffsets did not complete for {sorted(pending)}")
            time.sleep(backoff)
    return result
