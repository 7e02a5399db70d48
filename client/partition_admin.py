"""The AdminClient's partition operations: leader elections, reassignments, DeleteRecords,
DescribeProducers and log dirs (mixed into ``odradek.client.admin.AdminClient``).

Invariant: every request goes through the AdminClient's one ``_call`` (NodePool.call: metadata
refresh, retries within the timeout, one call at a time): ElectLeaders and the reassignment APIs
to the controller (NOT_CONTROLLER retried), DeleteRecords and DescribeProducers to each
partition's leader (asked again where the leader moved), DescribeLogDirs and AlterReplicaLogDirs to
each broker. Errors come back as ``KafkaError`` per partition, a top-level error raised.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from odradek.protocol.apis import alter_partition_reassignments as _alter_reassignments
from odradek.protocol.apis import alter_replica_log_dirs as _alter_replica_log_dirs
from odradek.protocol.apis import delete_records as _delete_records
from odradek.protocol.apis import describe_log_dirs as _describe_log_dirs
from odradek.protocol.apis import describe_producers as _describe_producers
from odradek.protocol.apis import elect_leaders as _elect_leaders
from odradek.protocol.apis import list_partition_reassignments as _list_reassignments
from odradek.protocol.errors import ErrorCode, KafkaError

from .cluster import ClusterMetadata
from .config import ClientConfig
from .structs import ProducerState, ReplicaLogDirInfo, TopicPartition, TopicPartitionReplica


class PartitionAdmin:
    config: ClientConfig
    _cluster: ClusterMetadata
    _lock: threading.Lock

    if TYPE_CHECKING:
        def _call(self, api: Any, body: dict[str, Any], nodes: Callable[[], Iterable[int]],
                  moved: Callable[[Any], str | None] | None = None, timeout_ms: int | None = None) -> Any: ...

    def elect_leaders(self, election_type: str, partitions: Iterable[TopicPartition] | None,
                      timeout_ms: int = 60000) -> dict[TopicPartition, KafkaError | None]:
        """ElectLeaders ("preferred" or "unclean") on the controller: {partition: None (elected) |
        KafkaError (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ...)}; ``partitions`` None:
        every partition of the cluster."""
        topics: dict[str, list[int]] = {}
        for tp in partitions or ():
            topics.setdefault(tp.topic, []).append(tp.partition)
        body = {"election_type": {"preferred": 0, "unclean": 1}[election_type.lower()], "timeout_ms": timeout_ms,
                "topic_partitions": None if partitions is None else [
                    {"topic": t, "partition_id": ps} for t, ps in topics.items()]}

        resp = self._call(_elect_leaders, body, self._controller, self._moved,
                          max(timeout_ms, self.config["request.timeout.ms"]))
        if resp.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(resp.error_code), "ElectLeaders")
        return {TopicPartition(r.topic, p.partition_id):
                None if p.error_code == ErrorCode.NONE else KafkaError(ErrorCode(p.error_code), p.error_message or "")
                for r in resp.replica_election_results for p in r.partition_result}

    def alter_partition_reassignments(self, reassignments: Mapping[TopicPartition, Iterable[int] | None]
                                      ) -> dict[TopicPartition, KafkaError | None]:
        """AlterPartitionReassignments on the controller: a target replica list per partition, or
        None to cancel its reassignment; {partition: None (started) | KafkaError}. The answer
        comes once the reassignments started; ``list_partition_reassignments`` follows them."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, replicas in reassignments.items():
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "replicas": None if replicas is None else list(replicas)})
        timeout_ms = self.config["request.timeout.ms"]
        resp = self._call(_alter_reassignments, {"timeout_ms": timeout_ms, "topics": [
            {"name": t, "partitions": ps} for t, ps in topics.items()]}, self._controller, self._moved)
        if resp.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(resp.error_code), resp.error_message or "AlterPartitionReassignments")
        return {TopicPartition(r.name, p.partition_index):
                None if p.error_code == ErrorCode.NONE else KafkaError(ErrorCode(p.error_code), p.error_message or "")
                for r in resp.responses for p in r.partitions}

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None
                                     ) -> dict[TopicPartition, dict[str, list[int]]]:
        """ListPartitionReassignments: {partition: {"replicas", "adding_replicas",
        "removing_replicas"}} for the reassignments in progress (of ``partitions``; None: all)."""
        topics: dict[str, list[int]] = {}
        for tp in partitions or ():
            topics.setdefault(tp.topic, []).append(tp.partition)
        resp = self._call(_list_reassignments, {"timeout_ms": self.config["request.timeout.ms"], "topics": None
                                                if partitions is None else [{"name": t, "partition_indexes": ps}
                                                                            for t, ps in topics.items()]},
                          self._controller, self._moved)
        if resp.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(resp.error_code), resp.error_message or "ListPartitionReassignments")
        return {TopicPartition(t.name, p.partition_index):
                {"replicas": list(p.replicas), "adding_replicas": list(p.adding_replicas),
                 "removing_replicas": list(p.removing_replicas)} for t in resp.topics for p in t.partitions}

    def delete_records(self, offsets: Mapping[TopicPartition, int], timeout_ms: int = 30000
                       ) -> dict[TopicPartition, int | KafkaError]:
        """DeleteRecords, each partition on its leader: {partition: its new low watermark (the
        offset its log now starts at on every live replica) | KafkaError}; an offset of -1 means
        the high watermark. A partition whose leader moved meanwhile is asked again."""
        def send(leader: int, tps: list[TopicPartition]) -> Any:
            topics: dict[str, list[dict[str, int]]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "offset": offsets[tp]})
            resp = self._call(_delete_records, {"topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                                                "timeout_ms": timeout_ms}, lambda: [leader],
                              timeout_ms=timeout_ms + self.config["request.timeout.ms"])
            return [(TopicPartition(t.name, p.partition_index), p.error_code, p.low_watermark)
                    for t in resp.topics for p in t.partitions]
        return self._on_leaders(list(offsets), send, timeout_ms)

    def describe_producers(self, partitions: Iterable[TopicPartition], broker_id: int | None = None,
                           timeout_ms: int = 30000) -> dict[TopicPartition, list[ProducerState] | KafkaError]:
        """DescribeProducers (KIP-664), each partition on its leader (or on ``broker_id``'s replica,
        as Kafka 3.0's ``DescribeProducersOptions.brokerId``): {partition: its active producers |
        KafkaError}."""
        def send(node: int, tps: list[TopicPartition]) -> Any:
            topics: dict[str, list[int]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(tp.partition)
            resp = self._call(_describe_producers, {"topics": [
                {"name": t, "partition_indexes": ps} for t, ps in topics.items()]}, lambda: [node])
            return [(TopicPartition(t.name, p.partition_index), p.error_code,
                     [ProducerState(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                                    s.coordinator_epoch, s.current_txn_start_offset) for s in p.active_producers])
                    for t in resp.topics for p in t.partitions]
        return self._on_leaders(list(partitions), send, timeout_ms, broker_id)

    def _on_leaders(self, partitions: list[TopicPartition],
                    send: Callable[[int, list[TopicPartition]], Iterable[tuple[TopicPartition, int, Any]]],
                    timeout_ms: int, node: int | None = None) -> dict[TopicPartition, Any]:
        """``send(broker, partitions)`` to each partition's leader (or to ``node``): {partition:
        the value it answered | KafkaError}; NOT_LEADER_OR_FOLLOWER from a leader is asked again
        (after a metadata refresh) until ``timeout_ms``."""
        out: dict[TopicPartition, Any] = {}
        pending = list(dict.fromkeys(partitions))
        deadline = time.monotonic() + timeout_ms / 1000.0
        while pending:
            with self._lock:
                self._cluster.refresh(sorted({tp.topic for tp in pending}), allow_auto_create=False)
                leaders = {tp: self._cluster.leader_for(tp.topic, tp.partition) if node is None else node
                           for tp in pending}
                known = {tp for tp in pending if tp.partition in getattr(self._cluster.topics.get(tp.topic),
                                                                         "partitions", {})}
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp, leader in leaders.items():
                if leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
                else:
                    missing = ErrorCode.LEADER_NOT_AVAILABLE if tp in known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    out[tp] = KafkaError(missing, f"{tp.topic}-{tp.partition}")
            retry: list[TopicPartition] = []
            for leader, tps in sorted(by_leader.items()):
                for tp, code, value in send(leader, tps):
                    if code == ErrorCode.NOT_LEADER_OR_FOLLOWER and node is None and time.monotonic() < deadline:
                        retry.append(tp)
                    elif code == ErrorCode.NONE:
                        out[tp] = value
                    else:
                        out[tp] = KafkaError(ErrorCode(code), f"{tp.topic}-{tp.partition}")
            pending = retry
            if pending:
                time.sleep(self.config["retry.backoff.ms"] / 1000.0)
        return out

    def _controller(self) -> list[int]:
        node = self._cluster.controller_id
        return [node] if node is not None and node >= 0 else []

    @staticmethod
    def _moved(resp: Any) -> str | None:
        return "no longer the controller" if resp.error_code == ErrorCode.NOT_CONTROLLER else None

    def describe_log_dirs(self, broker_ids: Iterable[int] | None = None, topics: Iterable[str] | None = None
                          ) -> dict[int, list[dict[str, Any]]]:
        """DescribeLogDirs of each broker (default: every live broker): {broker: [{"log_dir", "error"
        (None or the ErrorCode name), "partitions": [{"topic", "partition", "size", "offset_lag",
        "is_future"}]}]}; ``topics`` limits the partitions listed (default: all)."""
        with self._lock:
            self._cluster.refresh([] if topics is None else list(topics))
            wanted = None if topics is None else [
                {"topic": t, "partition_index": sorted(self._cluster.topics[t].partitions)}
                for t in topics if t in self._cluster.topics]
            ids = sorted(self._cluster.brokers) if broker_ids is None else list(broker_ids)
        out: dict[int, list[dict[str, Any]]] = {}
        for node in ids:
            resp = self._call(_describe_log_dirs, {"topics": wanted}, _only(node))
            out[node] = [{"log_dir": r.log_dir,
                          "error": None if r.error_code == 0 else ErrorCode(r.error_code).name,
                          "partitions": [{"topic": t.name, "partition": p.partition_index, "size": p.partition_size,
                                          "offset_lag": p.offset_lag, "is_future": p.is_future_key}
                                         for t in r.topics for p in t.partitions]} for r in resp.results]
        return out

    def alter_replica_log_dirs(self, replica_dirs: Mapping[TopicPartitionReplica, str]
                               ) -> dict[TopicPartitionReplica, KafkaError | None]:
        """AlterReplicaLogDirs on each replica's broker: move it to that absolute log dir there;
        {replica: None (moving, or already there) | KafkaError (LOG_DIR_NOT_FOUND,
        KAFKA_STORAGE_ERROR, REPLICA_NOT_AVAILABLE: not on that broker yet, the dir is kept for it)}."""
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
        for r, d in replica_dirs.items():
            by_broker.setdefault(r.broker_id, {}).setdefault(d, {}).setdefault(r.topic, []).append(r.partition)
        out: dict[TopicPartitionReplica, KafkaError | None] = {}
        for node, dirs in sorted(by_broker.items()):
            body = {"dirs": [{"path": d, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                             for d, topics in dirs.items()]}
            resp = self._call(_alter_replica_log_dirs, body, _only(node))
            for r in resp.results:
                for p in r.partitions:
                    out[TopicPartitionReplica(r.topic_name, p.partition_index, node)] = (
                        None if p.error_code == 0 else KafkaError(ErrorCode(p.error_code), "AlterReplicaLogDirs"))
        return out

    def describe_replica_log_dirs(self, replicas: Iterable[TopicPartitionReplica]
                                  ) -> dict[TopicPartitionReplica, ReplicaLogDirInfo]:
        """Where each replica is (DescribeLogDirs of its broker): its dir and lag, and its future
        replica's while it moves; a replica found in no live dir has no dir (None)."""
        replicas = list(replicas)
        out = {r: ReplicaLogDirInfo() for r in replicas}
        brokers = sorted({r.broker_id for r in replicas})
        for node, dirs in self.describe_log_dirs(brokers, sorted({r.topic for r in replicas})).items():
            for d in dirs:
                for p in d["partitions"]:
                    r = TopicPartitionReplica(p["topic"], p["partition"], node)
                    if r in out:
                        out[r] = out[r]._replace(**({"future_log_dir": d["log_dir"], "future_offset_lag": p["offset_lag"]}
                                                    if p["is_future"] else
                                                    {"current_log_dir": d["log_dir"], "current_offset_lag": p["offset_lag"]}))
        return out


def _only(node: int) -> Callable[[], list[int]]:
    """The node list of a request that must go to ``node`` itself."""
    return lambda: [node]
