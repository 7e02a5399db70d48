"""The distributed worker's config and status stores, each over a compacted topic.

Invariant (config): the snapshot only ever reflects a prefix of the config
topic; task configs of a connector change only when its ``commit-<name>``
record arrives (the ``task-<name>-<i>`` records before it are buffered), so a
worker never sees half of a new task set. Record keys and JSON values are Kafka
Connect's: ``connector-<name>`` ``{"properties": {...}}`` (null: deleted),
``task-<name>-<i>`` ``{"properties": {...}}``, ``commit-<name>`` ``{"tasks": n}``,
``target-state-<name>`` ``{"state": "STARTED"|"PAUSED"}``.

Invariant (status): ``status-connector-<name>`` / ``status-task-<name>-<i>``
hold ``{"state", "trace", "worker_id", "generation"}``; a status with a lower
group generation than the one stored never replaces it (a late UNASSIGNED from
the previous owner cannot hide the new owner's RUNNING).
"""
from __future__ import annotations

import json
import logging
import threading
from typing import Any, Callable

from .herder import MemoryStatusStore
from .kafka_log import KafkaBasedLog, ensure_topic

log = logging.getLogger(__name__)


def _json(value: bytes | None) -> Any:
    return None if value is None else json.loads(value)


def _dump(doc: Any) -> bytes | None:
    return None if doc is None else json.dumps(doc, separators=(",", ":")).encode("utf-8")


class ConfigSnapshot:
    def __init__(self, offset: int, configs: dict, task_configs: dict, target_states: dict) -> None:
        self.offset, self.configs, self.task_configs, self.target_states = offset, configs, task_configs, target_states


class KafkaConfigBackingStore:
    """``config.storage.topic`` (one partition, compacted)."""

    def __init__(self, wc: Any, on_change: Callable[[str, str], None]) -> None:
        self.wc = wc
        self.on_change = on_change  # (kind: connector|tasks|target, connector name)
        self.lock = threading.Lock()
        self.offset = 0
        self.configs: dict[str, dict[str, str]] = {}
        self.task_configs: dict[str, list[dict[str, str]]] = {}
        self.deferred: dict[str, dict[int, dict[str, str]]] = {}
        self.target_states: dict[str, str] = {}
        self.log = KafkaBasedLog(wc.config_topic, wc.producer_props(), wc.consumer_props(), self._on_record)

    def start(self) -> None:
        ensure_topic(self.wc.admin_props(), self.wc.config_topic, 1, self.wc.config_rf)
        self.log.start()

    def stop(self) -> None:
        self.log.stop()

    def _on_record(self, r: Any) -> None:
        key = (r.key or b"").decode("utf-8")
        try:
            doc = _json(r.value)
        except ValueError:
            log.error("config topic: undecodable value at offset %d", r.offset)
            doc = None
        change: tuple[str, str] | None = None
        with self.lock:
            self.offset = r.offset + 1
            if key.startswith("connector-"):
                name = key[len("connector-"):]
                if doc is None:
                    self.configs.pop(name, None)
                    self.task_configs.pop(name, None)
                    self.deferred.pop(name, None)
                    self.target_states.pop(name, None)
                else:
                    self.configs[name] = dict(doc.get("properties") or {})
                    self.target_states.setdefault(name, "STARTED")
                change = ("connector", name)
            elif key.startswith("task-"):
                name, _, idx = key[len("task-"):].rpartition("-")
                if doc is not None and idx.isdigit():
                    self.deferred.setdefault(name, {})[int(idx)] = dict(doc.get("properties") or {})
            elif key.startswith("commit-"):
                name = key[len("commit-"):]
                n = int((doc or {}).get("tasks", 0))
                pending = self.deferred.pop(name, {})
                if name in self.configs and all(i in pending for i in range(n)):
                    self.task_configs[name] = [pending[i] for i in range(n)]
                    change = ("tasks", name)
                else:
                    log.warning("config topic: incomplete task set for %s at offset %d", name, r.offset)
            elif key.startswith("target-state-"):
                name = key[len("target-state-"):]
                if doc is not None and name in self.configs:
                    self.target_states[name] = doc.get("state", "STARTED")
                    change = ("target", name)
        if change is not None:
            self.on_change(*change)

    def snapshot(self) -> ConfigSnapshot:
        with self.lock:
            return ConfigSnapshot(self.offset, {k: dict(v) for k, v in self.configs.items()},
                                  {k: [dict(t) for t in v] for k, v in self.task_configs.items()},
                                  dict(self.target_states))

    def read_to_end(self) -> None:
        self.log.read_to_end(timeout=30.0)

    def _send_all(self, records: list[tuple[str, Any]]) -> None:
        futures = [self.log.send(k.encode("utf-8"), _dump(v), partition=0) for k, v in records]
        for f in futures:
            f.get(timeout=30)
        self.read_to_end()

    def put_connector_config(self, name: str, props: dict[str, str]) -> None:
        self._send_all([(f"connector-{name}", {"properties": props})])

    def remove_connector_config(self, name: str) -> None:
        self._send_all([(f"connector-{name}", None), (f"target-state-{name}", None)])

    def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        recs: list[tuple[str, Any]] = [(f"task-{name}-{i}", {"properties": c}) for i, c in enumerate(configs)]
        recs.append((f"commit-{name}", {"tasks": len(configs)}))
        self._send_all(recs)

    def put_target_state(self, name: str, state: str) -> None:
        self._send_all([(f"target-state-{name}", {"state": state})])


class KafkaStatusBackingStore(MemoryStatusStore):
    """``status.storage.topic``: every worker's view of every connector's and task's status."""

    def __init__(self, wc: Any) -> None:
        super().__init__()
        self.wc = wc
        self.log = KafkaBasedLog(wc.status_topic, wc.producer_props(), wc.consumer_props(), self._on_record)

    def start(self) -> None:
        ensure_topic(self.wc.admin_props(), self.wc.status_topic, self.wc.status_partitions, self.wc.status_rf)
        self.log.start()

    def stop(self) -> None:
        self.log.stop()

    @staticmethod
    def _newer(old: dict | None, new: dict) -> bool:
        return old is None or new.get("generation", -1) >= old.get("generation", -1)

    def _on_record(self, r: Any) -> None:
        key = (r.key or b"").decode("utf-8")
        try:
            doc = _json(r.value)
        except ValueError:
            return
        with self.lock:
            if key.startswith("status-connector-"):
                name = key[len("status-connector-"):]
                if doc is None:
                    self.connectors.pop(name, None)
                elif self._newer(self.connectors.get(name), doc):
                    self.connectors[name] = doc
            elif key.startswith("status-task-"):
                name, _, idx = key[len("status-task-"):].rpartition("-")
                if not idx.isdigit():
                    return
                tkey = (name, int(idx))
                if doc is None:
                    self.tasks.pop(tkey, None)
                elif self._newer(self.tasks.get(tkey), doc):
                    self.tasks[tkey] = doc

    def put_connector(self, name: str, status: dict[str, Any]) -> None:
        super().put_connector(name, status)
        self._send(f"status-connector-{name}", status)

    def put_task(self, name: str, task: int, status: dict[str, Any]) -> None:
        super().put_task(name, task, status)
        self._send(f"status-task-{name}-{task}", status)

    def _send(self, key: str, status: dict[str, Any]) -> None:
        try:
            self.log.send(key.encode("utf-8"), _dump(status))
        except Exception as exc:  # status is best effort; the next change writes again
            log.warning("status write %s failed: %s", key, exc)

    def forget(self, name: str) -> None:
        with self.lock:
            keys = [k for k in self.tasks if k[0] == name]
        super().forget(name)
        for _, i in keys:
            self._send_raw(f"status-task-{name}-{i}")
        self._send_raw(f"status-connector-{name}")

    def _send_raw(self, key: str) -> None:
        try:
            self.log.send(key.encode("utf-8"), None)
        except Exception as exc:
            log.warning("status tombstone %s failed: %s", key, exc)
