"""ControllerRequestBatch: what the controller will tell each broker, built as plain dicts.

Invariant: pure (no I/O). The state machines add LeaderAndIsr / StopReplica /
UpdateMetadata entries while handling one event; ``build()`` turns them into
per-broker request bodies (field names = Kafka 2.8 JSON names, snake_case) in
Kafka's send order — LeaderAndIsr, then UpdateMetadata, then StopReplica — and
empties the batch. Every LeaderAndIsr entry also schedules UpdateMetadata of the
same partition to all live brokers (as Kafka's addLeaderAndIsrRequestForBrokers).
Bodies fill every version's layout (fields not in the sent version are ignored
by the codec), so they encode at any version the codec offers.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable

from odradek.protocol.apis import leader_and_isr, stop_replica, update_metadata
from odradek.protocol.primitives import ZERO_UUID
from odradek.zk.znodes import LeaderIsrAndControllerEpoch

from .context import ControllerContext, TopicPartition
from .election import LEADER_DURING_DELETE

NO_EPOCH = -1
EPOCH_DURING_DELETE = -2
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

LEADER_AND_ISR = "LeaderAndIsr"
UPDATE_METADATA = "UpdateMetadata"
STOP_REPLICA = "StopReplica"
API_MODULES = {LEADER_AND_ISR: leader_and_isr, UPDATE_METADATA: update_metadata,
               STOP_REPLICA: stop_replica}


class BatchNotEmptyError(Exception):
    """new_batch() while requests from the previous event were never sent."""


@dataclass
class OutRequest:
    broker_id: int
    api: str                               # LEADER_AND_ISR / UPDATE_METADATA / STOP_REPLICA
    version: int
    body: dict[str, Any]
    deleted_partitions: list[TopicPartition] = field(default_factory=list)  # StopReplica(delete)

    @property
    def api_module(self):
        return API_MODULES[self.api]


@dataclass
class _LeaderAndIsrEntry:
    state: LeaderIsrAndControllerEpoch
    replicas: list[int]
    is_new: bool
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)


def _group(items: dict[TopicPartition, Any]) -> dict[str, list[tuple[int, Any]]]:
    out: dict[str, list[tuple[int, Any]]] = {}
    for (t, p), v in sorted(items.items()):
        out.setdefault(t, []).append((p, v))
    return out


class ControllerRequestBatch:
    def __init__(self, context: ControllerContext, controller_id: int,
                 inter_broker_listener: str = "PLAINTEXT",
                 versions: dict[str, int] | None = None):
        self.ctx = context
        self.controller_id = controller_id
        self.listener = inter_broker_listener
        self.versions = {LEADER_AND_ISR: leader_and_isr.MAX_VERSION,
                         UPDATE_METADATA: update_metadata.MAX_VERSION,
                         STOP_REPLICA: stop_replica.MAX_VERSION, **(versions or {})}
        self.leader_and_isr: dict[int, dict[TopicPartition, _LeaderAndIsrEntry]] = {}
        self.stop_replica: dict[int, dict[TopicPartition, tuple[bool, int]]] = {}
        self.update_metadata_brokers: set[int] = set()
        self.update_metadata_partitions: set[TopicPartition] = set()

    # ------------------------------------------------------------ building up

    def is_empty(self) -> bool:
        return not (self.leader_and_isr or self.stop_replica or self.update_metadata_brokers)

    def new_batch(self) -> None:
        if not self.is_empty():
            raise BatchNotEmptyError("controller request batch still holds unsent requests")

    def clear(self) -> None:
        self.leader_and_isr.clear()
        self.stop_replica.clear()
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()

    def add_leader_and_isr(self, broker_ids: Iterable[int], tp: TopicPartition,
                           state: LeaderIsrAndControllerEpoch, replicas: list[int],
                           is_new: bool) -> None:
        ra = self.ctx.full_assignment(tp)
        adding = [b for b in ra.adding_replicas if b in replicas]
        removing = [b for b in ra.removing_replicas if b in replicas]
        for b in broker_ids:
            if b < 0:
                continue
            per = self.leader_and_isr.setdefault(b, {})
            old = per.get(tp)
            per[tp] = _LeaderAndIsrEntry(state, list(replicas), is_new or (old is not None and old.is_new),
                                         adding, removing)
        self.add_update_metadata(self.ctx.live_or_shutting_down_broker_ids(), [tp])

    def add_stop_replica(self, broker_ids: Iterable[int], tp: TopicPartition, delete: bool) -> None:
        st = self.ctx.leadership.get(tp)
        if st is None:
            epoch = NO_EPOCH
        elif self.ctx.is_topic_queued_for_deletion(tp[0]):
            epoch = EPOCH_DURING_DELETE
        else:
            epoch = st.leader_epoch
        for b in broker_ids:
            if b < 0:
                continue
            per = self.stop_replica.setdefault(b, {})
            old = per.get(tp)
            per[tp] = (delete or (old is not None and old[0]), epoch)

    def add_update_metadata(self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        self.update_metadata_partitions.update(partitions)

    # ------------------------------------------------------------ bodies

    def _live_brokers(self) -> list[dict[str, Any]]:
        out = []
        for bid in sorted(self.ctx.live_brokers):
            info = self.ctx.live_brokers[bid]
            eps = [{"port": e.port, "host": e.host, "listener": e.listener,
                    "security_protocol": SECURITY_PROTOCOLS.get(e.security_protocol, 0)}
                   for e in info.endpoints]
            plain = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
            out.append({"id": bid, "v0_host": plain.host if plain else "",
                        "v0_port": plain.port if plain else -1, "endpoints": eps, "rack": info.rack})
        return out

    def _topic_id(self, topic: str) -> uuid.UUID:
        return self.ctx.topic_ids.get(topic, ZERO_UUID)

    def _update_metadata_partition(self, tp: TopicPartition) -> dict[str, Any] | None:
        st = self.ctx.leadership.get(tp)
        if st is None:
            return None
        replicas = self.ctx.replicas(tp)
        leader, leader_epoch, zk_version = st.leader, st.leader_epoch, st.zk_version
        if self.ctx.is_topic_queued_for_deletion(tp[0]):
            leader, leader_epoch, zk_version = LEADER_DURING_DELETE, 0, 0
        return {"topic_name": tp[0], "partition_index": tp[1], "controller_epoch": st.controller_epoch,
                "leader": leader, "leader_epoch": leader_epoch, "isr": list(st.isr),
                "zk_version": zk_version, "replicas": list(replicas),
                "offline_replicas": [b for b in replicas if not self.ctx.is_replica_online(b, tp)]}

    def _leader_and_isr_body(self, broker_id: int,
                             entries: dict[TopicPartition, _LeaderAndIsrEntry]) -> dict[str, Any]:
        def pstate(tp: TopicPartition, e: _LeaderAndIsrEntry) -> dict[str, Any]:
            return {"topic_name": tp[0], "partition_index": tp[1],
                    "controller_epoch": e.state.controller_epoch, "leader": e.state.leader,
                    "leader_epoch": e.state.leader_epoch, "isr": list(e.state.isr),
                    "zk_version": e.state.zk_version, "replicas": list(e.replicas),
                    "adding_replicas": list(e.adding), "removing_replicas": list(e.removing), "is_new": e.is_new}
        leader_ids = {e.state.leader for e in entries.values()}
        live_leaders = []
        for b in sorted(leader_ids):
            info = self.ctx.live_brokers.get(b)
            if info is None:
                continue
            try:
                ep = info.endpoint(self.listener)
            except KeyError:
                ep = info.endpoint()
            live_leaders.append({"broker_id": b, "host_name": ep.host, "port": ep.port})
        # One dict per partition, shared by the layout before v2 (ungrouped) and from v2 on
        # (grouped by topic): the codec only reads them.
        states = {tp: pstate(tp, e) for tp, e in sorted(entries.items())}
        return {
            "controller_id": self.controller_id, "controller_epoch": self.ctx.epoch,
            "broker_epoch": self.ctx.broker_epoch(broker_id), "type": 0,
            "ungrouped_partition_states": list(states.values()),
            "topic_states": [{"topic_name": t, "topic_id": self._topic_id(t),
                              "partition_states": [states[(t, p)] for p, _ in ps]}
                             for t, ps in _group(entries).items()],
            "live_leaders": live_leaders,
        }

    def _stop_replica_bodies(self, broker_id: int, entries: dict[TopicPartition, tuple[bool, int]]
                             ) -> list[tuple[dict[str, Any], list[TopicPartition]]]:
        version = self.versions[STOP_REPLICA]
        if version >= 3:
            groups = [entries]
        else:  # one delete flag per request before v3
            groups = [{tp: v for tp, v in entries.items() if v[0] == flag} for flag in (False, True)]
        out = []
        for g in groups:
            if not g:
                continue
            grouped = _group(g)
            out.append(({
                "controller_id": self.controller_id, "controller_epoch": self.ctx.epoch,
                "broker_epoch": self.ctx.broker_epoch(broker_id),
                "delete_partitions": any(v[0] for v in g.values()),
                "ungrouped_partitions": [{"topic_name": t, "partition_index": p} for t, p in sorted(g)],
                "topics": [{"name": t, "partition_indexes": [p for p, _ in ps]} for t, ps in grouped.items()],
                "topic_states": [{"topic_name": t, "partition_states": [
                    {"partition_index": p, "leader_epoch": v[1], "delete_partition": v[0]} for p, v in ps]}
                    for t, ps in grouped.items()],
            }, sorted(tp for tp, v in g.items() if v[0])))
        return out

    def _update_metadata_body(self, broker_id: int, states: list[dict[str, Any]]) -> dict[str, Any]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for s in states:
            by_topic.setdefault(s["topic_name"], []).append(s)
        return {
            "controller_id": self.controller_id, "controller_epoch": self.ctx.epoch,
            "broker_epoch": self.ctx.broker_epoch(broker_id),
            "ungrouped_partition_states": states,
            "topic_states": [{"topic_name": t, "topic_id": self._topic_id(t), "partition_states": ps}
                             for t, ps in by_topic.items()],
            "live_brokers": self._live_brokers(),
        }

    def build(self) -> list[OutRequest]:
        """All requests of this batch in send order; the batch is empty afterwards."""
        out: list[OutRequest] = []
        live = self.ctx.live_or_shutting_down_broker_ids()
        for b in sorted(self.leader_and_isr):
            if b in live and self.leader_and_isr[b]:
                out.append(OutRequest(b, LEADER_AND_ISR, self.versions[LEADER_AND_ISR],
                                      self._leader_and_isr_body(b, self.leader_and_isr[b])))
        if self.update_metadata_brokers:
            states = [s for tp in sorted(self.update_metadata_partitions)
                      if (s := self._update_metadata_partition(tp)) is not None]
            for b in sorted(self.update_metadata_brokers & live):
                out.append(OutRequest(b, UPDATE_METADATA, self.versions[UPDATE_METADATA],
                                      self._update_metadata_body(b, states)))
        for b in sorted(self.stop_replica):
            if b in live:
                for body, deleted in self._stop_replica_bodies(b, self.stop_replica[b]):
                    out.append(OutRequest(b, STOP_REPLICA, self.versions[STOP_REPLICA], body, deleted))
        self.clear()
        return out
