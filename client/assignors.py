"""Partition assignors (range, roundrobin, sticky) and the ConsumerProtocol byte formats.

Invariant: every assignor is a pure function of (partitions per topic, member
subscriptions) that returns an assignment for *every* member (possibly empty)
and assigns each partition of a subscribed, known topic to exactly one member
subscribed to that topic. Members are ordered as Kafka's ``MemberInfo``: static
members (group.instance.id) first by instance id, then dynamic ones by member id.
The subscription/assignment encodings are Kafka's ConsumerProtocol v0/v1
(int16 version, then the fields; a newer version is read with the v1 layout and
trailing bytes are ignored), so other clients in the same group can read them.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .structs import TopicPartition

CONSUMER_PROTOCOL_TYPE = "consumer"
PROTOCOL_VERSION = 1  # Kafka 2.8's ConsumerProtocol.CONSUMER_PROTOCOL_VERSION

_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")


# -- byte helpers ----------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = bytes(data), 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated ConsumerProtocol data")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise ValueError("null string in ConsumerProtocol data")
        return self._take(n).decode("utf-8")

    def nbytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self._take(n)

    def array(self, item) -> list:
        n = self.i32()
        return [] if n < 0 else [item() for _ in range(n)]

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos


def _w_string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def _w_bytes(b: bytes | None) -> bytes:
    return _I32.pack(-1) if b is None else _I32.pack(len(b)) + bytes(b)


def _group_by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def _w_topic_partitions(tps: Iterable[TopicPartition]) -> bytes:
    grouped = _group_by_topic(tps)
    parts = [_I32.pack(len(grouped))]
    for topic, ps in grouped.items():
        parts.append(_w_string(topic) + _I32.pack(len(ps)) + b"".join(_I32.pack(p) for p in ps))
    return b"".join(parts)


def _r_topic_partitions(r: _Reader) -> list[TopicPartition]:
    out: list[TopicPartition] = []
    for topic, ps in r.array(lambda: (r.string(), r.array(r.i32))):
        out.extend(TopicPartition(topic, p) for p in ps)
    return out


# -- ConsumerProtocol ----------------------------------------------------------------------

@dataclass
class Subscription:
    """ConsumerProtocolSubscription; ``group_instance_id`` comes from JoinGroup, not the bytes."""
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    version: int = PROTOCOL_VERSION
    group_instance_id: str | None = None

    def encode(self) -> bytes:
        out = _I16.pack(self.version) + _I32.pack(len(self.topics)) + b"".join(_w_string(t) for t in self.topics)
        out += _w_bytes(self.user_data)
        if self.version >= 1:
            out += _w_topic_partitions(self.owned_partitions)
        return out

    @classmethod
    def decode(cls, data: bytes, group_instance_id: str | None = None) -> "Subscription":
        r = _Reader(data)
        version = r.i16()
        if version < 0:
            raise ValueError(f"bad ConsumerProtocol subscription version {version}")
        topics = r.array(r.string)
        user_data = r.nbytes()
        owned = _r_topic_partitions(r) if version >= 1 and r.remaining else []
        return cls(topics, user_data, owned, version, group_instance_id)


@dataclass
class Assignment:
    """ConsumerProtocolAssignment (v0 and v1 share one layout)."""
    partitions: list[TopicPartition]
    user_data: bytes | None = None
    version: int = PROTOCOL_VERSION

    def encode(self) -> bytes:
        return _I16.pack(self.version) + _w_topic_partitions(self.partitions) + _w_bytes(self.user_data)

    @classmethod
    def decode(cls, data: bytes | None) -> "Assignment":
        if not data:  # an empty assignment from a leader that gave us nothing
            return cls([])
        r = _Reader(data)
        version = r.i16()
        if version < 0:
            raise ValueError(f"bad ConsumerProtocol assignment version {version}")
        partitions = _r_topic_partitions(r)
        user_data = r.nbytes() if r.remaining else None
        return cls(partitions, user_data, version)


# -- assignors -----------------------------------------------------------------------------

def member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Member ids in Kafka's MemberInfo order (static members first, by instance id)."""
    def key(mid: str) -> tuple:
        gid = subscriptions[mid].group_instance_id
        return (0, gid, mid) if gid is not None else (1, mid, "")
    return sorted(subscriptions, key=key)


class AbstractAssignor:
    """An assignment strategy; ``name`` is the protocol name sent in JoinGroup."""

    name = ""
    java_class = ""

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        return None

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        raise NotImplementedError

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        """Called on every member after SyncGroup with its own assignment."""


class RangeAssignor(AbstractAssignor):
    """Per topic: partitions split in ranges over the subscribed members; the first get one extra."""

    name = "range"
    java_class = "org.apache.kafka.clients.consumer.RangeAssignor"

    def assign(self, partitions_per_topic, subscriptions):
        out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        order = member_order(subscriptions)
        for topic in sorted({t for s in subscriptions.values() for t in s.topics}):
            n = partitions_per_topic.get(topic)
            if not n:
                continue
            members = [m for m in order if topic in subscriptions[m].topics]
            per, extra = divmod(n, len(members))
            for i, m in enumerate(members):
                start = per * i + min(i, extra)
                length = per + (1 if i < extra else 0)
                out[m].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return out


class RoundRobinAssignor(AbstractAssignor):
    """All partitions sorted by topic then partition, dealt over sorted members subscribed to each topic."""

    name = "roundrobin"
    java_class = "org.apache.kafka.clients.consumer.RoundRobinAssignor"

    def assign(self, partitions_per_topic, subscriptions):
        out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        order = member_order(subscriptions)
        if not order:
            return out
        topics = sorted({t for s in subscriptions.values() for t in s.topics if partitions_per_topic.get(t)})
        i = 0
        for topic in topics:
            for p in range(partitions_per_topic[topic]):
                while topic not in subscriptions[order[i % len(order)]].topics:
                    i += 1
                out[order[i % len(order)]].append(TopicPartition(topic, p))
                i += 1
        return out


# -- sticky ------------------------------------------------------------------------------------

def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    """StickyAssignor's user data, schema V1: previous_assignment [topic, [partition]], generation."""
    return _w_topic_partitions(partitions) + _I32.pack(generation)


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int | None]:
    """(previous assignment, generation or None for the V0 schema)."""
    r = _Reader(data)
    partitions = _r_topic_partitions(r)
    generation = r.i32() if r.remaining >= 4 else None
    return partitions, generation


class StickyAssignor(AbstractAssignor):
    """Kafka's StickyAssignor: balanced first, then as few partition movements as possible.

    When all members subscribe to the same topics every member ends with
    floor(P/C) or ceil(P/C) partitions and keeps as many of its previous ones as
    that allows; otherwise no partition can move to an eligible member with at
    least two fewer partitions. Previous ownership comes from the user data
    (previous assignment + generation; stale generations are ignored) or, when
    absent, from the subscription's owned partitions.
    """

    name = "sticky"
    java_class = "org.apache.kafka.clients.consumer.StickyAssignor"

    def __init__(self) -> None:
        self.member_assignment: list[TopicPartition] | None = None
        self.generation = -1

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        if self.member_assignment is None:
            return None
        return encode_sticky_user_data(self.member_assignment, self.generation)

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self.member_assignment = list(assignment.partitions)
        self.generation = generation

    @staticmethod
    def _member_data(sub: Subscription) -> tuple[list[TopicPartition], int | None]:
        if sub.user_data:
            try:
                return decode_sticky_user_data(sub.user_data)
            except (ValueError, UnicodeDecodeError):
                pass
        return list(sub.owned_partitions), None

    def _previous_owners(self, partitions_per_topic: Mapping[str, int],
                         subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        """Valid previous ownership: highest generation only, existing subscribed partitions, unique claims."""
        data = {m: self._member_data(s) for m, s in subscriptions.items()}
        gens = [g for _, g in data.values() if g is not None]
        max_gen = max(gens) if gens else None
        owned: dict[str, list[TopicPartition]] = {}
        claims: dict[TopicPartition, int] = {}
        for m in member_order(subscriptions):
            parts, gen = data[m]
            if max_gen is not None and gen is not None and gen < max_gen:
                parts = []
            topics = set(subscriptions[m].topics)
            keep = [tp for tp in dict.fromkeys(TopicPartition(*tp) for tp in parts)
                    if tp.topic in topics and 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0)]
            owned[m] = keep
            for tp in keep:
                claims[tp] = claims.get(tp, 0) + 1
        return {m: [tp for tp in ps if claims[tp] == 1] for m, ps in owned.items()}

    def assign(self, partitions_per_topic, subscriptions):
        order = member_order(subscriptions)
        if not order:
            return {}
        owned = self._previous_owners(partitions_per_topic, subscriptions)
        topic_sets = {frozenset(s.topics) for s in subscriptions.values()}
        if len(topic_sets) == 1:
            return self._constrained(partitions_per_topic, subscriptions, order, owned)
        return self._general(partitions_per_topic, subscriptions, order, owned)

    @staticmethod
    def _all_partitions(partitions_per_topic: Mapping[str, int], topics: Iterable[str]) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t in sorted(set(topics)) for p in range(partitions_per_topic.get(t, 0))]

    def _constrained(self, partitions_per_topic, subscriptions, order, owned):
        """Same subscriptions everywhere: quotas floor/ceil, keep owned partitions up to the quota."""
        all_parts = self._all_partitions(partitions_per_topic, subscriptions[order[0]].topics)
        n_members = len(order)
        min_quota, extra = divmod(len(all_parts), n_members)
        max_quota = min_quota + (1 if extra else 0)
        out: dict[str, list[TopicPartition]] = {m: [] for m in order}
        over = 0  # members holding max_quota (> min_quota) partitions
        # members owning the most keep their extra partition first
        for m in sorted(order, key=lambda m: (-len(owned[m]), order.index(m))):
            mine = owned[m]
            if len(mine) > min_quota and max_quota > min_quota and over < extra:
                out[m] = mine[:max_quota]
                over += 1
            else:
                out[m] = mine[:min_quota]
        taken = {tp for ps in out.values() for tp in ps}
        unassigned = [tp for tp in all_parts if tp not in taken]
        for tp in unassigned:
            # the member with the fewest partitions (in member order) that still has room
            candidates = [m for m in order if len(out[m]) < min_quota
                          or (len(out[m]) == min_quota and max_quota > min_quota and over < extra)]
            m = min(candidates, key=lambda m: len(out[m]))
            if len(out[m]) == min_quota:
                over += 1
            out[m].append(tp)
        return out

    def _general(self, partitions_per_topic, subscriptions, order, owned):
        """Different subscriptions: keep owned, place the rest greedily, then move until balanced."""
        rank = {m: i for i, m in enumerate(order)}
        eligible: dict[TopicPartition, list[str]] = {}
        for tp in self._all_partitions(partitions_per_topic, {t for s in subscriptions.values() for t in s.topics}):
            ms = [m for m in order if tp.topic in subscriptions[m].topics]
            if ms:
                eligible[tp] = ms
        out: dict[str, list[TopicPartition]] = {m: list(owned[m]) for m in order}
        owner = {tp: m for m, ps in out.items() for tp in ps}
        # partitions with the fewest potential owners first, as Kafka sorts them
        pending = sorted((tp for tp in eligible if tp not in owner), key=lambda tp: (len(eligible[tp]), tp))
        for tp in pending:
            m = min(eligible[tp], key=lambda m: (len(out[m]), rank[m]))
            out[m].append(tp)
            owner[tp] = m
        # balance: move a partition to an eligible member with at least two fewer partitions
        moved = True
        while moved:
            moved = False
            for m in sorted(order, key=lambda m: (-len(out[m]), rank[m])):
                for tp in sorted(out[m], key=lambda tp: (len(eligible[tp]), tp)):
                    target = min(eligible[tp], key=lambda x: (len(out[x]), rank[x]))
                    if len(out[m]) > len(out[target]) + 1:
                        out[m].remove(tp)
                        out[target].append(tp)
                        moved = True
                        break
                if moved:
                    break
        return out


_BUILTIN: dict[str, type[AbstractAssignor]] = {}
for _cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor):
    _BUILTIN[_cls.name] = _cls
    _BUILTIN[_cls.java_class.lower()] = _cls
    _BUILTIN[_cls.__name__.lower()] = _cls


def resolve_assignors(strategies: Iterable[Any]) -> list[AbstractAssignor]:
    """Assignor objects for ``partition.assignment.strategy`` (names, Java class names, classes, instances)."""
    out: list[AbstractAssignor] = []
    for s in strategies:
        if isinstance(s, AbstractAssignor):
            out.append(s)
        elif isinstance(s, type) and issubclass(s, AbstractAssignor):
            out.append(s())
        elif isinstance(s, str) and s.strip().lower() in _BUILTIN:
            out.append(_BUILTIN[s.strip().lower()]())
        elif hasattr(s, "name") and hasattr(s, "assign"):  # a duck-typed assignor object
            out.append(s)
        else:
            raise ValueError(f"unknown partition.assignment.strategy {s!r} (range, roundrobin or sticky)")
    names = [a.name for a in out]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate assignor names in partition.assignment.strategy: {names}")
    return out


__all__ = [
    "CONSUMER_PROTOCOL_TYPE", "Subscription", "Assignment", "AbstractAssignor", "RangeAssignor",
    "RoundRobinAssignor", "StickyAssignor", "resolve_assignors", "member_order",
    "encode_sticky_user_data", "decode_sticky_user_data",
]
