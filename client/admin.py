"""AdminClient: create/delete topics through the controller; list/describe from Metadata.

Invariant: CreateTopics and DeleteTopics go to the broker Metadata names as
controller; a NOT_CONTROLLER answer (or a lost connection) refreshes metadata
and retries just the affected topics until ``timeout_ms``. Errors follow
kafka-python 2.1+: by default the call raises the first per-topic
``KafkaError`` (after every topic was tried); with ``raise_errors=False`` it
returns ``{topic: KafkaError | None}``. TOPIC_ALREADY_EXISTS is a KafkaError with
``code == ErrorCode.TOPIC_ALREADY_EXISTS``.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Iterable, Mapping

from odradek.protocol.apis import create_topics as _create_topics
from odradek.protocol.apis import delete_topics as _delete_topics
from odradek.protocol.errors import ErrorCode, KafkaError

from .cluster import ClusterMetadata, NodePool
from .config import ClientConfig
from .structs import KafkaTimeoutError, NewTopic

_RETRY_CODES = frozenset({ErrorCode.NOT_CONTROLLER, ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT})


class AdminClient:
    """Topic and cluster administration (thread-safe: one call at a time)."""

    def __init__(self, config: Mapping[str, Any] | None = None, **configs: Any) -> None:
        self.config = cfg = ClientConfig("admin", config, **configs)
        if cfg["client.id"] is None:
            cfg._values["client.id"] = "odradek-admin"
        self._cluster = ClusterMetadata(cfg)
        self._pool = NodePool(self._cluster)
        self._lock = threading.Lock()

    # -- controller requests ----------------------------------------------------------

    def _controller_call(self, api, names: list[str], build_body, timeout_ms: int,
                         ) -> dict[str, KafkaError | None]:
        """Send ``build_body(names)`` to the controller, retrying topics that hit NOT_CONTROLLER."""
        results: dict[str, KafkaError | None] = {}
        pending = list(names)
        deadline = time.monotonic() + max(timeout_ms, self.config["request.timeout.ms"]) / 1000.0
        backoff = self.config["retry.backoff.ms"] / 1000.0
        cluster = self._cluster
        refresh = True
        while pending:
            if refresh:
                try:
                    cluster.refresh([])
                except KafkaError:
                    pass
            controller = cluster.controller_id
            retry: list[str] = []
            if controller < 0:
                retry = pending
            else:
                try:
                    conn = self._pool.get(controller)
                    resp = conn.request(api, build_body(pending), version=conn.version_for(api),
                                        timeout=timeout_ms / 1000.0 + self.config["request.timeout.ms"] / 1000.0)
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    self._pool.drop(controller, exc)
                    retry = pending
                else:
                    entries = resp.topics if api is _create_topics else resp.responses
                    answered = set()
                    for t in entries:
                        answered.add(t.name)
                        code = t.error_code
                        if code in _RETRY_CODES:
                            retry.append(t.name)
                        elif code == ErrorCode.NONE:
                            results[t.name] = None
                        else:
                            msg = getattr(t, "error_message", None)
                            results[t.name] = KafkaError(code, f"{t.name}: {msg}" if msg else t.name)
                    retry += [n for n in pending if n not in answered and n not in results]
            pending = retry
            refresh = True
            if pending:
                if time.monotonic() + backoff > deadline:
                    for n in pending:
                        results[n] = KafkaTimeoutError(f"{api.NAME} for {n!r}: controller not reachable")
                    break
                time.sleep(backoff)
        return results

    @staticmethod
    def _finish(results: dict[str, KafkaError | None], raise_errors: bool) -> dict[str, KafkaError | None]:
        if raise_errors:
            for err in results.values():
                if err is not None:
                    raise err
        return results

    def create_topics(self, new_topics: Iterable[NewTopic], timeout_ms: int | None = None,
                      validate_only: bool = False, raise_errors: bool = True) -> dict[str, KafkaError | None]:
        """Create topics on the controller; see the module doc for the error behaviour."""
        topics = {t.name: t for t in new_topics}
        timeout_ms = self.config["request.timeout.ms"] if timeout_ms is None else timeout_ms

        def body(names: list[str]) -> dict:
            return {"topics": [{
                "name": n,
                "num_partitions": topics[n].num_partitions if not topics[n].replica_assignments else -1,
                "replication_factor": topics[n].replication_factor if not topics[n].replica_assignments else -1,
                "assignments": [{"partition_index": p, "broker_ids": list(r)}
                                for p, r in sorted(topics[n].replica_assignments.items())],
                "configs": [{"name": k, "value": None if v is None else str(v)}
                            for k, v in topics[n].topic_configs.items()],
            } for n in names], "timeout_ms": timeout_ms, "validate_only": validate_only}

        with self._lock:
            return self._finish(self._controller_call(_create_topics, list(topics), body, timeout_ms), raise_errors)

    def delete_topics(self, topics: Iterable[str], timeout_ms: int | None = None,
                      raise_errors: bool = True) -> dict[str, KafkaError | None]:
        """Delete topics through the controller."""
        names = list(topics)
        timeout_ms = self.config["request.timeout.ms"] if timeout_ms is None else timeout_ms

        def body(pending: list[str]) -> dict:
            return {"topic_names": pending, "topics": [{"name": n} for n in pending], "timeout_ms": timeout_ms}

        with self._lock:
            return self._finish(self._controller_call(_delete_topics, names, body, timeout_ms), raise_errors)

    # -- metadata views ---------------------------------------------------------------

    def list_topics(self) -> list[str]:
        with self._lock:
            self._cluster.refresh(all_topics=True, allow_auto_create=False)
            return sorted(t for t, tm in self._cluster.topics.items() if tm.error == ErrorCode.NONE)

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """kafka-python's shape: [{topic, error_code, is_internal, partitions: [{partition, leader, replicas, isr, ...}]}]."""
        with self._lock:
            if topics is None:
                self._cluster.refresh(all_topics=True, allow_auto_create=False)
                names = sorted(self._cluster.topics)
            else:
                names = list(topics)
                self._cluster.refresh(names, allow_auto_create=False)
            out = []
            for name in names:
                tm = self._cluster.topics.get(name)
                if tm is None:
                    out.append({"topic": name, "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                "is_internal": False, "partitions": []})
                    continue
                out.append({
                    "topic": name, "error_code": int(tm.error), "is_internal": tm.is_internal,
                    "partitions": [{
                        "partition": p.partition, "error_code": int(p.error), "leader": p.leader,
                        "leader_epoch": p.leader_epoch, "replicas": list(p.replicas), "isr": list(p.isr),
                        "offline_replicas": list(p.offline_replicas),
                    } for _, p in sorted(tm.partitions.items())],
                })
            return out

    def describe_cluster(self) -> dict[str, Any]:
        with self._lock:
            self._cluster.refresh([])
            c = self._cluster
            return {
                "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                            for _, b in sorted(c.brokers.items())],
                "controller_id": c.controller_id,
                "cluster_id": c.cluster_id,
            }

    def close(self) -> None:
        with self._lock:
            self._pool.close()
            self._cluster.close()

    def __enter__(self) -> "AdminClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
