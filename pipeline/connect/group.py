"""Worker group membership: JoinGroup/SyncGroup with protocol type ``connect`` and Kafka's
ConnectProtocol v0 (protocol name ``default``, the eager assignor).

Invariant: membership is the consumer's own core (``client/group_membership.py``:
``AbstractCoordinator``, as Kafka's ``WorkerCoordinator`` extends its
``AbstractCoordinator``), driven from the herder's thread through ``poll``; the herder
revokes everything before each JoinGroup (``on_revoked``), assigns as leader and starts
what ``on_assigned`` names. Byte formats are Kafka's ``ConnectProtocol`` v0, so the
layout is documented by Kafka itself:

- metadata (WorkerState): ``int16 version=0, string url, int64 config_offset``
- assignment: ``int16 version=0, int16 error (0 none, 1 CONFIG_MISMATCH),
  string leader, string leader_url, int64 config_offset,
  array[string connector, array[int32 task]]`` — task ``-1`` is the connector itself.
"""
from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field
from typing import Any, Protocol

from odradek.client.cluster import ClusterMetadata, NodePool
from odradek.client.config import ClientConfig
from odradek.client.group_membership import AbstractCoordinator, Generation

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "connect"
PROTOCOL_NAME = "default"
CONNECTOR_TASK = -1
NO_ERROR, CONFIG_MISMATCH = 0, 1

_H, _I, _Q = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


def _s(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _H.pack(len(raw)) + raw


class _R:
    def __init__(self, data: bytes) -> None:
        self.d, self.p = bytes(data), 0

    def take(self, st: struct.Struct) -> int:
        if self.p + st.size > len(self.d):
            raise ValueError("truncated ConnectProtocol data")
        (v,) = st.unpack_from(self.d, self.p)
        self.p += st.size
        return v

    def string(self) -> str:
        n = self.take(_H)
        if n < 0 or self.p + n > len(self.d):
            raise ValueError("bad string in ConnectProtocol data")
        out = self.d[self.p:self.p + n].decode("utf-8")
        self.p += n
        return out


@dataclass
class WorkerState:
    url: str
    config_offset: int
    version: int = 0

    def encode(self) -> bytes:
        return _H.pack(self.version) + _s(self.url) + _Q.pack(self.config_offset)

    @classmethod
    def decode(cls, data: bytes) -> "WorkerState":
        r = _R(data)
        version = r.take(_H)
        return cls(r.string(), r.take(_Q), version)


@dataclass
class ConnectAssignment:
    error: int
    leader: str
    leader_url: str
    config_offset: int
    connectors: list[str] = field(default_factory=list)
    tasks: list[tuple[str, int]] = field(default_factory=list)
    version: int = 0

    def encode(self) -> bytes:
        by_conn: dict[str, list[int]] = {}
        for c in self.connectors:
            by_conn.setdefault(c, []).append(CONNECTOR_TASK)
        for c, t in self.tasks:
            by_conn.setdefault(c, []).append(t)
        out = [_H.pack(self.version), _H.pack(self.error), _s(self.leader), _s(self.leader_url),
               _Q.pack(self.config_offset), _I.pack(len(by_conn))]
        for c, ts in by_conn.items():
            out += [_s(c), _I.pack(len(ts))] + [_I.pack(t) for t in ts]
        return b"".join(out)

    @classmethod
    def decode(cls, data: bytes) -> "ConnectAssignment":
        r = _R(data)
        version = r.take(_H)
        a = cls(r.take(_H), r.string(), r.string(), r.take(_Q), version=version)
        for _ in range(max(r.take(_I), 0)):
            conn = r.string()
            for _ in range(max(r.take(_I), 0)):
                t = r.take(_I)
                if t == CONNECTOR_TASK:
                    a.connectors.append(conn)
                else:
                    a.tasks.append((conn, t))
        return a


def eager_assign(members: list[str], connectors: list[str], tasks: list[tuple[str, int]]
                 ) -> dict[str, tuple[list[str], list[tuple[str, int]]]]:
    """Kafka's eager round robin: connectors, then tasks, over the members sorted by id."""
    order = sorted(members)
    out: dict[str, tuple[list[str], list[tuple[str, int]]]] = {m: ([], []) for m in order}
    i = 0
    for c in sorted(connectors):
        out[order[i % len(order)]][0].append(c)
        i += 1
    for t in sorted(tasks):
        out[order[i % len(order)]][1].append(t)
        i += 1
    return out


class WorkerGroupListener(Protocol):
    """What the worker coordinator needs from its herder (called on the herder's thread, inside
    ``WorkerCoordinator.poll``)."""

    def worker_state(self) -> WorkerState: ...

    def on_revoked(self) -> None: ...

    def leader_assign(self, leader_id: str, members: list[tuple[str, bytes]]) -> dict[str, bytes]: ...

    def on_assigned(self, generation: int, member_id: str, assignment: ConnectAssignment) -> None: ...


class WorkerCoordinator(AbstractCoordinator):
    """This worker's membership in ``group.id``: the shared group-membership core with the
    ``connect`` protocol type; rebalances run inside ``poll`` on the herder's thread."""

    protocol_type = PROTOCOL_TYPE

    def __init__(self, wc: Any, listener: WorkerGroupListener) -> None:
        self.listener = listener
        config = ClientConfig("consumer", {
            **{k: v for k, v in wc.consumer_props().items() if k in ("bootstrap.servers",)},
            "group.id": wc.group_id, "session.timeout.ms": wc.session_timeout_ms,
            "heartbeat.interval.ms": wc.heartbeat_interval_ms, "max.poll.interval.ms": wc.rebalance_timeout_ms,
            "client.id": f"connect-{wc.worker_id}"})
        cluster = ClusterMetadata(config)
        super().__init__(config, cluster, NodePool(cluster))

    def join_protocols(self) -> list[tuple[str, bytes]]:
        return [(PROTOCOL_NAME, self.listener.worker_state().encode())]

    def on_join_prepare(self, generation_valid: bool) -> None:
        self.listener.on_revoked()

    def perform_assignment(self, leader_id: str, protocol: str,
                           members: list[tuple[str, str | None, bytes]]) -> dict[str, bytes]:
        return self.listener.leader_assign(leader_id, [(m, metadata) for m, _, metadata in members])

    def on_join_complete(self, generation: Generation, assignment: bytes) -> None:
        log.info("group %s: joined generation %d as %s", self.group_id, generation.generation_id,
                 generation.member_id)
        self.listener.on_assigned(generation.generation_id, generation.member_id,
                                  ConnectAssignment.decode(assignment))

    def close(self) -> None:
        super().close()
        self.pool.close()
        self.cluster.close()
