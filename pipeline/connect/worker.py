"""Worker: runs connector instances and task threads on this process.

Invariant: the worker only does what its herder tells it (start/stop a
connector or task, change a target state); every state change of a connector
or task is reported through the herder's status listener (``on_connector_state``,
``on_task_state``). A connector or task id is running here at most once:
starting a running one is refused, ``stop_task`` waits (up to
``task.shutdown.graceful.timeout.ms``) for the thread to end.
"""
from __future__ import annotations

import functools
import logging
import threading
import traceback
from typing import Protocol

from .api import Connector, ConnectorContext, SinkConnector
from .config import ConnectorConfig, WorkerConfig
from .offsets import OffsetBackingStore
from .plugins import resolve
from .worker_task import FAILED, PAUSED, RUNNING, UNASSIGNED, WorkerSinkTask, WorkerSourceTask, WorkerTask

log = logging.getLogger(__name__)


class StatusListener(Protocol):
    def on_connector_state(self, connector: str, state: str, trace: str | None) -> None: ...

    def on_task_state(self, connector: str, task: int, state: str, trace: str | None) -> None: ...

    def request_task_reconfiguration(self, connector: str) -> None: ...


def trace_of(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


class Worker:
    def __init__(self, wc: WorkerConfig, offset_store: OffsetBackingStore, listener: StatusListener) -> None:
        self.wc = wc
        self.offset_store = offset_store
        self.listener = listener
        self.connectors: dict[str, tuple[Connector, ConnectorConfig]] = {}
        self.tasks: dict[tuple[str, int], WorkerTask] = {}
        self.lock = threading.RLock()

    # -- connectors ------------------------------------------------------------------------------

    def start_connector(self, props: dict[str, str], target_state: str) -> bool:
        """Instantiate and start the connector (unless paused); False (and FAILED) on error."""
        cc = ConnectorConfig(props)
        with self.lock:
            if cc.name in self.connectors:
                raise RuntimeError(f"connector {cc.name} is already running on this worker")
            try:
                connector: Connector = resolve("connector", cc.connector_class)()
                connector.initialize(ConnectorContext(
                    functools.partial(self.listener.request_task_reconfiguration, cc.name),
                    functools.partial(self._connector_failed, cc.name)))
                connector.start(dict(props))
            except Exception as exc:
                log.error("failed to start connector %s", cc.name, exc_info=True)
                self.listener.on_connector_state(cc.name, FAILED, trace_of(exc))
                return False
            self.connectors[cc.name] = (connector, cc)
        self.listener.on_connector_state(cc.name, PAUSED if target_state == PAUSED else RUNNING, None)
        return True

    def _connector_failed(self, name: str, exc: BaseException) -> None:
        self.listener.on_connector_state(name, FAILED, trace_of(exc))

    def connector_task_configs(self, name: str) -> list[dict[str, str]]:
        """Task configs from the running connector, with ``task.class`` (and ``topics`` for sinks) added."""
        with self.lock:
            connector, cc = self.connectors[name]
        configs = connector.task_configs(cc.tasks_max)[:cc.tasks_max]
        out = []
        for tc in configs:
            tc = {str(k): str(v) for k, v in tc.items()}
            tc["task.class"] = f"{type(connector).__module__}.{connector.task_class().__name__}"
            if isinstance(connector, SinkConnector):
                for key in ("topics", "topics.regex"):
                    if cc.props.get(key):
                        tc[key] = cc.props[key]
            out.append(tc)
        return out

    def is_sink(self, props: dict[str, str]) -> bool:
        return issubclass(resolve("connector", props["connector.class"]), SinkConnector)

    def stop_connector(self, name: str) -> None:
        with self.lock:
            entry = self.connectors.pop(name, None)
        if entry is None:
            return
        try:
            entry[0].stop()
        except Exception:
            log.exception("connector %s: stop() failed", name)
        self.listener.on_connector_state(name, UNASSIGNED, None)

    def set_connector_target_state(self, name: str, state: str) -> None:
        if name in self.connectors:
            self.listener.on_connector_state(name, state, None)
        for (conn, _), task in list(self.tasks.items()):
            if conn == name:
                task.transition_to(state)

    # -- tasks -----------------------------------------------------------------------------------

    def start_task(self, connector_props: dict[str, str], task_id: int, task_props: dict[str, str],
                   target_state: str) -> bool:
        cc = ConnectorConfig(connector_props)
        key = (cc.name, task_id)
        with self.lock:
            if key in self.tasks and self.tasks[key].is_alive():
                raise RuntimeError(f"task {cc.name}-{task_id} is already running on this worker")
            try:
                args = (self.wc, cc, task_id, task_props, self.listener, target_state)
                if self.is_sink(connector_props):
                    task: WorkerTask = WorkerSinkTask(*args)
                else:
                    task = WorkerSourceTask(*args, offset_store=self.offset_store)
            except Exception as exc:
                self.listener.on_task_state(cc.name, task_id, FAILED, trace_of(exc))
                return False
            self.tasks[key] = task
            task.start()
        return True

    def stop_tasks(self, keys: list[tuple[str, int]]) -> None:
        """Signal all, then wait for each (so shutdowns overlap)."""
        with self.lock:
            tasks = [self.tasks.pop(k) for k in keys if k in self.tasks]
        for t in tasks:
            t.stop()
        timeout = self.wc.task_shutdown_timeout_ms / 1000.0 + 30
        for t in tasks:
            t.join(timeout)
            if t.is_alive():
                log.error("task %s did not stop within the graceful timeout", t.label)

    def running_tasks(self, connector: str | None = None) -> list[tuple[str, int]]:
        with self.lock:
            return [k for k in self.tasks if connector is None or k[0] == connector]

    def stop_all(self) -> None:
        self.stop_tasks(list(self.tasks))
        for name in list(self.connectors):
            self.stop_connector(name)
