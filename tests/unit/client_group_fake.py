"""A fake group coordinator on top of the in-test FakeBroker, for the client's group tests.

Invariant: speaks the real wire protocol (odradek.protocol codecs) and follows
Kafka 2.8's GroupCoordinator rules closely enough for client tests: v4+
MEMBER_ID_REQUIRED, a rebalance waits for every known member (or the rebalance
timeout), only the leader gets the member list, followers' SyncGroup waits for
the leader's, heartbeats answer REBALANCE_IN_PROGRESS while preparing, commits
with generation -1 only on an Empty group. Several FakeBrokers may share one
``GroupState`` (``coordinator_id`` decides who answers; the others say
NOT_COORDINATOR). ``inject[api_name]`` is a list of error codes answered (one per
request) before the real handling. Not a broker: one lock, no persistence.
"""
from __future__ import annotations

import threading
import time
import uuid

import client_fake_broker
from client_fake_broker import FakeBroker

from odradek.protocol.errors import ErrorCode

_current = threading.local()
_decode_header = client_fake_broker.decode_request_header


def _remember_header(frame):
    header, offset = _decode_header(frame)
    _current.client_id = header.client_id
    return header, offset


client_fake_broker.decode_request_header = _remember_header


class Member:
    def __init__(self, member_id, client_id, instance_id, protocols, session_ms, rebalance_ms):
        self.member_id, self.client_id, self.instance_id = member_id, client_id, instance_id
        self.protocols = protocols  # [(name, metadata)]
        self.session_ms, self.rebalance_ms = session_ms, rebalance_ms
        self.assignment = b""
        self.joined = False


class Group:
    def __init__(self, group_id):
        self.group_id = group_id
        self.state = "Empty"
        self.generation = 0
        self.protocol = None
        self.protocol_type = None
        self.leader = None
        self.members: dict[str, Member] = {}
        self.pending: set[str] = set()
        self.rebalance_deadline = 0.0
        self.min_deadline = 0.0
        self.offsets: dict[tuple[str, int], tuple[int, str]] = {}


class GroupState:
    """Groups shared by the fake brokers; ``coordinator_id`` is the broker answering for all groups."""

    def __init__(self, coordinator_id: int = 0, initial_delay_s: float = 0.0) -> None:
        self.cond = threading.Condition()
        self.groups: dict[str, Group] = {}
        self.coordinator_id = coordinator_id
        self.initial_delay_s = initial_delay_s
        self.brokers: list["GroupFakeBroker"] = []

    def group(self, gid: str) -> Group:
        if gid not in self.groups:
            self.groups[gid] = Group(gid)
        return self.groups[gid]


class GroupFakeBroker(FakeBroker):
    def __init__(self, node_id: int = 0, state: GroupState | None = None, **kw) -> None:
        super().__init__(node_id, **kw)
        self.state = state or GroupState(coordinator_id=node_id)
        self.state.brokers.append(self)
        self.inject: dict[str, list[int]] = {}

    # -- plumbing -----------------------------------------------------------------------------

    def _injected(self, name: str) -> int | None:
        errs = self.inject.get(name)
        if errs:
            return errs.pop(0)
        if self.state.coordinator_id != self.node_id:
            return ErrorCode.NOT_COORDINATOR
        return None

    def _h_Metadata(self, req, version):
        body = super()._h_Metadata(req, version)
        body["brokers"] = [{"node_id": b.node_id, "host": "127.0.0.1", "port": b.port, "rack": None}
                           for b in self.state.brokers]
        return body

    def _h_FindCoordinator(self, req, version):
        errs = self.inject.get("FindCoordinator")
        if errs:
            return {"error_code": errs.pop(0), "node_id": -1, "host": "", "port": -1}
        coord = next(b for b in self.state.brokers if b.node_id == self.state.coordinator_id)
        return {"error_code": 0, "error_message": None, "node_id": coord.node_id, "host": "127.0.0.1",
                "port": coord.port}

    # -- membership ---------------------------------------------------------------------------

    def _complete_join(self, g: Group) -> None:
        for mid in [m for m, mem in g.members.items() if not mem.joined]:
            del g.members[mid]
        g.generation += 1
        if not g.members:
            g.state, g.protocol, g.leader = "Empty", None, None
            return
        votes: dict[str, int] = {}
        common = set.intersection(*({n for n, _ in m.protocols} for m in g.members.values()))
        for m in g.members.values():
            first = next(n for n, _ in m.protocols if n in common)
            votes[first] = votes.get(first, 0) + 1
        g.protocol = max(sorted(votes), key=lambda n: votes[n])
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.state = "CompletingRebalance"
        for m in g.members.values():
            m.assignment = b""

    def _prepare(self, g: Group) -> None:
        if g.state != "PreparingRebalance":
            delay = self.state.initial_delay_s if g.state == "Empty" else 0.0
            g.state = "PreparingRebalance"
            g.rebalance_deadline = time.monotonic() + max(
                [m.rebalance_ms / 1000 for m in g.members.values()] + [0.0]) + delay
            g.min_deadline = time.monotonic() + delay
            for m in g.members.values():
                m.joined = False

    def _h_JoinGroup(self, req, version):
        def err(code, member_id=""):
            return {"error_code": code, "generation_id": -1, "protocol_name": "", "leader": "",
                    "member_id": member_id, "members": []}
        code = self._injected("JoinGroup")
        if code is not None:
            return err(code)
        cond = self.state.cond
        with cond:
            g = self.state.group(req.group_id)
            if g.protocol_type is not None and g.members and req.protocol_type != g.protocol_type:
                return err(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            mid = req.member_id
            if not mid:
                new_id = f"{getattr(_current, 'client_id', None) or 'client'}-{uuid.uuid4()}"
                if version >= 4:
                    g.pending.add(new_id)
                    return err(ErrorCode.MEMBER_ID_REQUIRED, new_id)
                mid = new_id
            elif mid not in g.members and mid not in g.pending:
                return err(ErrorCode.UNKNOWN_MEMBER_ID, mid)
            g.pending.discard(mid)
            rebalance_ms = req.rebalance_timeout_ms if version >= 1 else req.session_timeout_ms
            m = g.members.get(mid)
            if m is None:
                m = g.members[mid] = Member(mid, getattr(_current, "client_id", None) or "", getattr(req, "group_instance_id", None),
                                            [], req.session_timeout_ms, rebalance_ms)
            m.protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
            g.protocol_type = req.protocol_type
            self._prepare(g)
            m.joined = True
            gen_before = g.generation
            cond.notify_all()
            while g.state == "PreparingRebalance" and g.generation == gen_before:
                now = time.monotonic()
                if all(x.joined for x in g.members.values()) and now >= g.min_deadline or now >= g.rebalance_deadline:
                    self._complete_join(g)
                    cond.notify_all()
                    break
                cond.wait(0.02)
            if mid not in g.members:
                return err(ErrorCode.UNKNOWN_MEMBER_ID, mid)
            members = []
            if mid == g.leader:
                members = [{"member_id": x.member_id, "group_instance_id": x.instance_id,
                            "metadata": dict(x.protocols)[g.protocol]} for x in g.members.values()]
            return {"error_code": 0, "generation_id": g.generation, "protocol_name": g.protocol,
                    "leader": g.leader, "member_id": mid, "members": members}

    def _h_SyncGroup(self, req, version):
        code = self._injected("SyncGroup")
        if code is not None:
            return {"error_code": code, "assignment": b""}
        cond = self.state.cond
        with cond:
            g = self.state.group(req.group_id)
            if req.member_id not in g.members:
                return {"error_code": ErrorCode.UNKNOWN_MEMBER_ID, "assignment": b""}
            if req.generation_id != g.generation:
                return {"error_code": ErrorCode.ILLEGAL_GENERATION, "assignment": b""}
            if g.state == "PreparingRebalance":
                return {"error_code": ErrorCode.REBALANCE_IN_PROGRESS, "assignment": b""}
            if req.member_id == g.leader and g.state == "CompletingRebalance":
                for a in req.assignments:
                    if a.member_id in g.members:
                        g.members[a.member_id].assignment = bytes(a.assignment)
                g.state = "Stable"
                cond.notify_all()
            gen = g.generation
            while g.state == "CompletingRebalance" and g.generation == gen:
                cond.wait(0.02)
            if g.generation != gen or g.state != "Stable" or req.member_id not in g.members:
                return {"error_code": ErrorCode.REBALANCE_IN_PROGRESS, "assignment": b""}
            return {"error_code": 0, "assignment": g.members[req.member_id].assignment}

    def _h_Heartbeat(self, req, version):
        code = self._injected("Heartbeat")
        if code is not None:
            return {"error_code": code}
        with self.state.cond:
            g = self.state.group(req.group_id)
            if req.member_id not in g.members:
                return {"error_code": ErrorCode.UNKNOWN_MEMBER_ID}
            if req.generation_id != g.generation:
                return {"error_code": ErrorCode.ILLEGAL_GENERATION}
            if g.state == "PreparingRebalance":
                return {"error_code": ErrorCode.REBALANCE_IN_PROGRESS}
            return {"error_code": 0}

    def _h_LeaveGroup(self, req, version):
        code = self._injected("LeaveGroup")
        if code is not None:
            return {"error_code": code, "members": []}
        ids = [m.member_id for m in req.members] if version >= 3 else [req.member_id]
        out = []
        with self.state.cond:
            g = self.state.group(req.group_id)
            for mid in ids:
                if mid in g.members:
                    del g.members[mid]
                    out.append({"member_id": mid, "group_instance_id": None, "error_code": 0})
                else:
                    out.append({"member_id": mid, "group_instance_id": None,
                                "error_code": ErrorCode.UNKNOWN_MEMBER_ID})
            if g.members:
                self._prepare(g)
            else:
                g.state, g.leader = "Empty", None
                g.generation += 1
            self.state.cond.notify_all()
        return {"error_code": 0, "members": out}

    # -- offsets --------------------------------------------------------------------------------

    def _h_OffsetCommit(self, req, version):
        code = self._injected("OffsetCommit")
        with self.state.cond:
            g = self.state.group(req.group_id)
            if code is None:
                if req.generation_id < 0 and g.state == "Empty":
                    code = 0
                elif req.member_id not in g.members:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
                elif req.generation_id != g.generation:
                    code = ErrorCode.ILLEGAL_GENERATION
                elif g.state == "CompletingRebalance":
                    code = ErrorCode.REBALANCE_IN_PROGRESS
                else:
                    code = 0
            if code == 0:
                for t in req.topics:
                    for p in t.partitions:
                        g.offsets[(t.name, p.partition_index)] = (p.committed_offset, p.committed_metadata or "")
        return {"topics": [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": code}
                                                           for p in t.partitions]} for t in req.topics]}

    def _h_OffsetFetch(self, req, version):
        code = self._injected("OffsetFetch")
        if code is not None:
            return {"error_code": code, "topics": []}
        with self.state.cond:
            g = self.state.group(req.group_id)
            if req.topics is None:
                wanted: dict[str, list[int]] = {}
                for (t, p) in sorted(g.offsets):
                    wanted.setdefault(t, []).append(p)
            else:
                wanted = {t.name: list(t.partition_indexes) for t in req.topics}
            topics = [{"name": t, "partitions": [
                {"partition_index": p, "committed_offset": g.offsets.get((t, p), (-1, ""))[0],
                 "metadata": g.offsets.get((t, p), (-1, ""))[1], "error_code": 0} for p in ps]}
                for t, ps in wanted.items()]
        return {"error_code": 0, "topics": topics}

    # -- admin ----------------------------------------------------------------------------------

    def _h_ListGroups(self, req, version):
        with self.state.cond:
            groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type or "consumer"}
                      for g in self.state.groups.values()] if self.state.coordinator_id == self.node_id else []
        return {"error_code": 0, "groups": groups}

    def _h_DescribeGroups(self, req, version):
        out = []
        with self.state.cond:
            for gid in req.groups:
                g = self.state.groups.get(gid)
                if g is None:
                    out.append({"error_code": 0, "group_id": gid, "group_state": "Dead", "protocol_type": "",
                                "protocol_data": "", "members": []})
                    continue
                out.append({"error_code": 0, "group_id": gid, "group_state": g.state,
                            "protocol_type": g.protocol_type or "", "protocol_data": g.protocol or "",
                            "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                                         "client_id": m.client_id, "client_host": "/127.0.0.1",
                                         "member_metadata": dict(m.protocols).get(g.protocol, b""),
                                         "member_assignment": m.assignment}
                                        for m in g.members.values()] if g.state == "Stable" else []})
        return {"groups": out}

    def _h_DeleteGroups(self, req, version):
        out = []
        with self.state.cond:
            for gid in req.groups_names:
                g = self.state.groups.get(gid)
                if g is None:
                    code = ErrorCode.GROUP_ID_NOT_FOUND
                elif g.members:
                    code = ErrorCode.NON_EMPTY_GROUP
                else:
                    del self.state.groups[gid]
                    code = 0
                out.append({"group_id": gid, "error_code": code})
        return {"results": out}
