"""Herders: what the REST API talks to. ``AbstractHerder`` holds the shared REST-facing logic and
statuses; ``StandaloneHerder`` keeps configs in memory and runs everything on this worker.

Invariant: every REST operation is serialized by the herder lock; a
connector config is validated (worker-level and connector-level settings)
before it is stored, so a stored config always starts (or fails at runtime with
its trace in the status). Errors leave as ``RestError(status, message)`` with
Kafka Connect's status codes (404 unknown connector, 409 conflict/rebalance,
400 invalid config).
"""
from __future__ import annotations

import logging
import threading
from typing import Any

from .api import ConfigException
from .config import ConnectorConfig, WorkerConfig
from .offsets import FileOffsetBackingStore, OffsetBackingStore
from .plugins import connector_plugins, connector_type, resolve
from .worker import Worker
from .worker_task import FAILED, PAUSED, RUNNING, UNASSIGNED

log = logging.getLogger(__name__)
STARTED = "STARTED"


class RestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class NotLeader(Exception):
    """This request must be served by the leader at ``leader_url`` (None: unknown, rebalancing)."""

    def __init__(self, leader_url: str | None) -> None:
        super().__init__(leader_url)
        self.leader_url = leader_url


def not_found(name: str) -> RestError:
    return RestError(404, f"Connector {name} not found")


class MemoryStatusStore:
    """Latest status per connector and task: {state, trace, worker_id, generation}."""

    def __init__(self) -> None:
        self.connectors: dict[str, dict[str, Any]] = {}
        self.tasks: dict[tuple[str, int], dict[str, Any]] = {}
        self.lock = threading.Lock()

    def put_connector(self, name: str, status: dict[str, Any]) -> None:
        with self.lock:
            self.connectors[name] = status

    def put_task(self, name: str, task: int, status: dict[str, Any]) -> None:
        with self.lock:
            self.tasks[(name, task)] = status

    def connector(self, name: str) -> dict[str, Any] | None:
        with self.lock:
            return self.connectors.get(name)

    def task(self, name: str, task: int) -> dict[str, Any] | None:
        with self.lock:
            return self.tasks.get((name, task))

    def forget(self, name: str) -> None:
        with self.lock:
            self.connectors.pop(name, None)
            for key in [k for k in self.tasks if k[0] == name]:
                del self.tasks[key]


class AbstractHerder:
    """Shared REST logic over ``self.configs`` / ``self.task_config`` / ``self.target_states``."""

    def __init__(self, wc: WorkerConfig, offset_store: OffsetBackingStore) -> None:
        self.wc = wc
        self.lock = threading.RLock()
        self.status = MemoryStatusStore()
        self.worker = Worker(wc, offset_store, self)
        self.configs: dict[str, dict[str, str]] = {}
        self.task_config: dict[str, list[dict[str, str]]] = {}
        self.target_states: dict[str, str] = {}
        self.generation = 0
        self.kafka_cluster_id: str | None = None

    # -- status listener (called from worker and task threads) -------------------------------------

    def _status(self, state: str, trace: str | None) -> dict[str, Any]:
        st = {"state": state, "trace": trace, "worker_id": self.wc.worker_id, "generation": self.generation}
        return st

    def on_connector_state(self, connector: str, state: str, trace: str | None) -> None:
        self.status.put_connector(connector, self._status(state, trace))

    def on_task_state(self, connector: str, task: int, state: str, trace: str | None) -> None:
        self.status.put_task(connector, task, self._status(state, trace))

    def request_task_reconfiguration(self, connector: str) -> None:
        raise NotImplementedError

    # -- validation ----------------------------------------------------------------------------

    def validate_config(self, props: dict[str, str]) -> ConnectorConfig:
        try:
            cc = ConnectorConfig(props)
            cls = resolve("connector", cc.connector_class)
            from .worker_task import make_converter, make_transforms
            for which in ("key.converter", "value.converter"):
                make_converter(self.wc, cc, which)
            make_transforms(cc)
        except ConfigException as exc:
            raise RestError(400, f"Connector configuration is invalid and contains the following 1 error(s):\n"
                                 f"{exc}\nYou can also find the above list of errors at the endpoint "
                                 f"`/connector-plugins/{{connectorType}}/config/validate`") from None
        errors = [e for errs in cls().validate(props).values() for e in errs]
        if connector_type(cls) == "sink" and not (props.get("topics") or props.get("topics.regex")):
            errors.append("Must configure one of topics or topics.regex")
        if errors:
            raise RestError(400, f"Connector configuration is invalid and contains the following {len(errors)} "
                                 f"error(s):\n" + "\n".join(errors) + "\nYou can also find the above list of errors "
                                 "at the endpoint `/connector-plugins/{connectorType}/config/validate`")
        return cc

    def validate_plugin_config(self, plugin: str, props: dict[str, str]) -> dict[str, Any]:
        """``PUT /connector-plugins/{plugin}/config/validate`` (Kafka's shape, values trimmed)."""
        try:
            cls = resolve("connector", plugin)
        except ConfigException as exc:
            raise RestError(400, str(exc)) from None
        errors = cls().validate(props)
        configs = [{"definition": {"name": k}, "value": {"name": k, "value": props.get(k), "errors": errs}}
                   for k, errs in errors.items()]
        return {"name": cls.__name__, "error_count": sum(len(e) for e in errors.values()), "groups": ["Common"],
                "configs": configs}

    # -- reads -----------------------------------------------------------------------------------

    def connectors(self) -> list[str]:
        with self.lock:
            return sorted(self.configs)

    def _require(self, name: str) -> dict[str, str]:
        props = self.configs.get(name)
        if props is None:
            raise not_found(name)
        return props

    def connector_info(self, name: str) -> dict[str, Any]:
        with self.lock:
            props = self._require(name)
            tasks = [{"connector": name, "task": i} for i in range(len(self.task_config.get(name, [])))]
            try:
                ctype = connector_type(resolve("connector", props["connector.class"]))
            except ConfigException:
                ctype = "unknown"
            return {"name": name, "config": dict(props), "tasks": tasks, "type": ctype}

    def connector_config(self, name: str) -> dict[str, str]:
        with self.lock:
            return dict(self._require(name))

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        with self.lock:
            self._require(name)
            return [{"id": {"connector": name, "task": i}, "config": dict(tc)}
                    for i, tc in enumerate(self.task_config.get(name, []))]

    @staticmethod
    def _state_view(st: dict[str, Any] | None) -> dict[str, Any]:
        if st is None:
            return {"state": UNASSIGNED, "worker_id": None}
        out = {"state": st["state"], "worker_id": st["worker_id"]}
        if st.get("trace"):
            out["trace"] = st["trace"]
        return out

    def connector_status(self, name: str) -> dict[str, Any]:
        with self.lock:
            info = self.connector_info(name)
            tasks = [{"id": i, **self._state_view(self.status.task(name, i))} for i in range(len(info["tasks"]))]
            return {"name": name, "connector": self._state_view(self.status.connector(name)), "tasks": tasks,
                    "type": info["type"]}

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        with self.lock:
            self._require(name)
            if task >= len(self.task_config.get(name, [])):
                raise RestError(404, f"No status found for task {name}-{task}")
            return {"id": task, **self._state_view(self.status.task(name, task))}

    def plugins(self) -> list[dict[str, str]]:
        return connector_plugins()


class StandaloneHerder(AbstractHerder):
    """Everything on this worker; configs live in memory (given on the command line or via REST)."""

    def __init__(self, wc: WorkerConfig) -> None:
        assert wc.offset_file is not None  # WorkerConfig requires it of a standalone worker
        super().__init__(wc, FileOffsetBackingStore(wc.offset_file))

    def start(self) -> None:
        self.worker.offset_store.start()

    def stop(self) -> None:
        with self.lock:
            self.worker.stop_all()
            self.worker.offset_store.stop()

    def put_connector_config(self, name: str, props: dict[str, str], allow_replace: bool
                             ) -> tuple[bool, dict[str, Any]]:
        props = {str(k): str(v) for k, v in props.items()}
        props.setdefault("name", name)
        if props["name"] != name:
            raise RestError(400, "Connector name configuration (" + props["name"] + ") doesn't match connector "
                                 "name in the URL (" + name + ")")
        self.validate_config(props)
        with self.lock:
            created = name not in self.configs
            if not created and not allow_replace:
                raise RestError(409, f"Connector {name} already exists")
            if not created:
                self._stop_connector_and_tasks(name)
            self.configs[name] = props
            self.target_states.setdefault(name, STARTED)
            if self.worker.start_connector(props, self._target(name)):
                self._update_tasks(name)
            else:
                self.task_config[name] = []
            return created, self.connector_info(name)

    def _target(self, name: str) -> str:
        return PAUSED if self.target_states.get(name) == PAUSED else RUNNING

    def _update_tasks(self, name: str) -> None:
        try:
            configs = self.worker.connector_task_configs(name)
        except Exception as exc:
            from .worker import trace_of
            self.on_connector_state(name, FAILED, trace_of(exc))
            configs = []
        old = self.task_config.get(name)
        if old == configs and self.worker.running_tasks(name):
            return
        self.worker.stop_tasks(self.worker.running_tasks(name))
        self.task_config[name] = configs
        for i, tc in enumerate(configs):
            self.worker.start_task(self.configs[name], i, tc, self._target(name))

    def _stop_connector_and_tasks(self, name: str) -> None:
        self.worker.stop_tasks(self.worker.running_tasks(name))
        self.worker.stop_connector(name)

    def request_task_reconfiguration(self, connector: str) -> None:
        def later() -> None:
            with self.lock:
                if connector in self.configs and connector in self.worker.connectors:
                    self._update_tasks(connector)
        threading.Thread(target=later, daemon=True).start()

    def delete_connector(self, name: str) -> None:
        with self.lock:
            self._require(name)
            self._stop_connector_and_tasks(name)
            del self.configs[name]
            self.task_config.pop(name, None)
            self.target_states.pop(name, None)
            self.status.forget(name)

    def pause_connector(self, name: str) -> None:
        with self.lock:
            self._require(name)
            self.target_states[name] = PAUSED
            self.worker.set_connector_target_state(name, PAUSED)

    def resume_connector(self, name: str) -> None:
        with self.lock:
            self._require(name)
            self.target_states[name] = STARTED
            self.worker.set_connector_target_state(name, RUNNING)

    def restart_connector(self, name: str) -> None:
        with self.lock:
            props = self._require(name)
            self.worker.stop_connector(name)
            if self.worker.start_connector(props, self._target(name)):
                self._update_tasks(name)

    def restart_task(self, name: str, task: int) -> None:
        with self.lock:
            self._require(name)
            configs = self.task_config.get(name, [])
            if task >= len(configs):
                raise RestError(404, f"Task {name}-{task} not found")
            self.worker.stop_tasks([(name, task)])
            self.worker.start_task(self.configs[name], task, configs[task], self._target(name))
