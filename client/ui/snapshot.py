"""The cluster as the page shows it: one plain function from what the collector read to JSON.

Invariant: sans-IO and total — ``build`` never raises on partial reads (a source that failed
is ``None`` or empty and its error is listed), never calls anything, and its output is plain
JSON (lists, dicts, str, int, float, bool, None) with every list in a stable order. A partition
is under-replicated when its ISR is smaller than its replica set, offline when it has no leader
or its leader is not a registered broker (Kafka's UnderReplicatedPartitions and
OfflinePartitionsCount).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TP = tuple[str, int]


@dataclass
class PartitionRead:
    replicas: list[int]
    leader: int | None
    isr: list[int]


@dataclass
class GroupRead:
    group_id: str
    state: str
    protocol: str
    coordinator: int | None
    members: list[dict[str, Any]]           # {member_id, client_id, host, assignment: [(topic, p)]}
    committed: dict[TP, int] = field(default_factory=dict)


@dataclass
class RawReads:
    """What one collection cycle read; ``None`` for a source that could not be read."""
    taken_at: float
    zookeeper_connect: str
    ensemble: list[tuple[str, str | None]] = field(default_factory=list)  # (host:port, mode or None)
    brokers: dict[int, str] | None = None          # registered: id -> host:port
    known_brokers: dict[int, str] = field(default_factory=dict)  # every broker seen since start
    racks: dict[int, str | None] = field(default_factory=dict)
    unreachable: dict[int, str] = field(default_factory=dict)   # registered but not answering
    controller: int | None = None
    topics: dict[str, dict[int, PartitionRead]] | None = None
    deleting: set[str] = field(default_factory=set)
    internal: set[str] = field(default_factory=set)
    sizes: dict[int, dict[TP, int]] = field(default_factory=dict)        # broker -> partition -> bytes
    offsets: dict[TP, tuple[int, int]] = field(default_factory=dict)     # (log start, log end)
    groups: list[GroupRead] | None = None
    reassignments: dict[TP, dict[str, list[int]]] | None = None
    throughput: dict[int, dict[str, Any]] = field(default_factory=dict)  # broker -> {endpoint, error, series}
    errors: dict[str, str] = field(default_factory=dict)                 # source -> what went wrong


def _partition(topic: str, p: int, part: PartitionRead, raw: RawReads, live: set[int]) -> dict[str, Any]:
    tp = (topic, p)
    sizes = [s[tp] for b, s in sorted(raw.sizes.items()) if tp in s]
    leader_size = raw.sizes.get(part.leader, {}).get(tp) if part.leader is not None else None
    start, end = raw.offsets.get(tp, (None, None))
    moving = (raw.reassignments or {}).get(tp)
    return {
        "partition": p, "leader": part.leader, "replicas": list(part.replicas), "isr": list(part.isr),
        "under_replicated": len(part.isr) < len(part.replicas),
        "offline": part.leader is None or part.leader not in live,
        "size": leader_size if leader_size is not None else (max(sizes) if sizes else None),
        "start_offset": start, "end_offset": end,
        "reassigning": None if moving is None else {"adding": moving["adding_replicas"],
                                                     "removing": moving["removing_replicas"]},
    }


def _topics(raw: RawReads, live: set[int]) -> list[dict[str, Any]]:
    out = []
    for name, parts in sorted((raw.topics or {}).items(), key=lambda kv: (kv[0] in raw.internal, kv[0])):
        rows = [_partition(name, p, part, raw, live) for p, part in sorted(parts.items())]
        known = [r for r in rows if r["end_offset"] is not None]
        out.append({
            "name": name, "internal": name in raw.internal, "deleting": name in raw.deleting,
            "partitions": rows,
            "replication_factor": max((len(r["replicas"]) for r in rows), default=0),
            "under_replicated": sum(r["under_replicated"] for r in rows),
            "offline": sum(r["offline"] for r in rows),
            "size": sum(r["size"] or 0 for r in rows),
            "messages": sum(r["end_offset"] - r["start_offset"] for r in known) if known else None,
        })
    return out


def _brokers(raw: RawReads, live: set[int]) -> list[dict[str, Any]]:
    ids = set(raw.known_brokers) | live
    for parts in (raw.topics or {}).values():
        for part in parts.values():
            ids.update(part.replicas)
    out = []
    for b in sorted(ids):
        leaders = replicas = 0
        for parts in (raw.topics or {}).values():
            for part in parts.values():
                replicas += b in part.replicas
                leaders += part.leader == b
        status = "up" if b in live and b not in raw.unreachable else "unreachable" if b in live else "gone"
        out.append({
            "id": b, "address": (raw.brokers or {}).get(b) or raw.known_brokers.get(b),
            "rack": raw.racks.get(b), "controller": b == raw.controller, "status": status,
            "error": raw.unreachable.get(b), "replicas": replicas, "leaders": leaders,
            "log_size": sum(raw.sizes[b].values()) if b in raw.sizes else None,
            "throughput": raw.throughput.get(b, {"endpoint": None, "series": {},
                                                 "error": "broker not registered" if status == "gone" else "not read yet"}),
        })
    return out


def _groups(raw: RawReads) -> list[dict[str, Any]]:
    out = []
    for g in sorted(raw.groups or [], key=lambda g: g.group_id):
        owners = {tuple(tp): m["member_id"] for m in g.members for tp in m["assignment"]}
        rows = []
        for tp in sorted(set(g.committed) | set(owners)):
            committed = g.committed.get(tp)
            end = raw.offsets.get(tp, (None, None))[1]
            lag = max(end - committed, 0) if committed is not None and end is not None else None
            rows.append({"topic": tp[0], "partition": tp[1], "committed": committed, "end_offset": end,
                         "lag": lag, "owner": owners.get(tp)})
        lags = [r["lag"] for r in rows if r["lag"] is not None]
        out.append({
            "group_id": g.group_id, "state": g.state, "protocol": g.protocol, "coordinator": g.coordinator,
            "members": [{"member_id": m["member_id"], "client_id": m["client_id"], "host": m["host"],
                         "assignment": [f"{t}-{p}" for t, p in sorted(m["assignment"])]}
                        for m in sorted(g.members, key=lambda m: m["member_id"])],
            "partitions": rows, "total_lag": sum(lags) if lags else None,
        })
    return out


def build(raw: RawReads) -> dict[str, Any]:
    """The page's JSON for one cycle's reads."""
    live = set(raw.brokers or {})
    topics = _topics(raw, live)
    groups = _groups(raw)
    reassignments = [{"topic": t, "partition": p, "replicas": r["replicas"], "adding": r["adding_replicas"],
                      "removing": r["removing_replicas"]} for (t, p), r in sorted((raw.reassignments or {}).items())]
    return {
        "taken_at": raw.taken_at,
        "errors": [{"source": s, "message": m} for s, m in sorted(raw.errors.items())],
        "zookeeper": {"connect": raw.zookeeper_connect,
                      "members": [{"address": a, "mode": m, "ok": m is not None} for a, m in raw.ensemble]},
        "controller": raw.controller,
        "brokers": _brokers(raw, live),
        "topics": topics,
        "groups": groups,
        "reassignments": reassignments,
        "summary": {
            "brokers": len(live), "brokers_down": len(set(raw.known_brokers) - live) + len(raw.unreachable),
            "topics": len(topics), "partitions": sum(len(t["partitions"]) for t in topics),
            "under_replicated": sum(t["under_replicated"] for t in topics),
            "offline": sum(t["offline"] for t in topics),
            "groups": len(groups), "reassignments": len(reassignments),
        },
    }
