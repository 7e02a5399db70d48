"""DistributedHerder: workers sharing connectors and tasks through a Connect group.

Invariant: one herder thread owns membership and the worker: it polls the
worker coordinator (the consumer's group-membership core), inside which every
rebalance runs. It follows the eager protocol — before every JoinGroup it stops
every connector and task it runs (tasks commit their offsets on the way out),
and after SyncGroup it starts exactly what its assignment names, once its config
snapshot has reached the assignment's config offset. Any change of the connector set or of a task
set in the config topic triggers a rebalance; target-state changes (pause,
resume) are applied in place. Config writes happen on the leader only
(followers raise NotLeader, which the REST layer forwards), except task
configs, which the worker running the connector writes itself (single-partition
topic: writes are totally ordered; a documented simplification of Kafka's
forwarding to the leader).
"""
from __future__ import annotations

import logging
import threading
import time
import urllib.request
from typing import Any

from odradek.client import KafkaError

from .config import WorkerConfig
from .group import CONFIG_MISMATCH, NO_ERROR, ConnectAssignment, WorkerCoordinator, WorkerState, eager_assign
from .herder import STARTED, AbstractHerder, NotLeader, RestError
from .offsets import KafkaOffsetBackingStore
from .stores import KafkaConfigBackingStore, KafkaStatusBackingStore
from .worker import trace_of
from .worker_task import FAILED, PAUSED, RUNNING

log = logging.getLogger(__name__)


class DistributedHerder(AbstractHerder):
    def __init__(self, wc: WorkerConfig) -> None:
        super().__init__(wc, KafkaOffsetBackingStore(wc))
        self.status: KafkaStatusBackingStore = KafkaStatusBackingStore(wc)
        self.config_store = KafkaConfigBackingStore(wc, self._on_config_change)
        self.member: WorkerCoordinator | None = None
        self.cv = threading.Condition()
        self.stopping = False
        self.rebalance_needed = True
        self.assignment: ConnectAssignment | None = None
        self.member_id = ""
        self.leader_id = ""
        self.member_urls: dict[str, str] = {}
        self.owners: dict[tuple[str, int], str] = {}  # leader: (connector, task|-1) -> member id
        self.reconfigure: set[str] = set()
        self.target_changed: set[str] = set()
        self.thread = threading.Thread(target=self._run, name="DistributedHerder", daemon=True)
        self.ready = threading.Event()
        self.error: BaseException | None = None

    # -- snapshot views for the REST reads (AbstractHerder uses these attributes) ------------------

    def _refresh_views(self) -> None:
        snap = self.config_store.snapshot()
        self.configs, self.task_config, self.target_states = snap.configs, snap.task_configs, snap.target_states

    def connectors(self) -> list[str]:
        self._refresh_views()
        return super().connectors()

    def connector_info(self, name: str) -> dict[str, Any]:
        self._refresh_views()
        return super().connector_info(name)

    def connector_config(self, name: str) -> dict[str, str]:
        self._refresh_views()
        return super().connector_config(name)

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        self._refresh_views()
        return super().task_configs(name)

    def connector_status(self, name: str) -> dict[str, Any]:
        self._refresh_views()
        return super().connector_status(name)

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        self._refresh_views()
        return super().task_status(name, task)

    # -- life cycle ------------------------------------------------------------------------------

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        with self.cv:
            self.stopping = True
            self.cv.notify_all()
        self.thread.join(120)

    def _wake(self) -> None:
        with self.cv:
            self.cv.notify_all()

    def _on_config_change(self, kind: str, name: str) -> None:
        with self.cv:
            if kind == "target":
                self.target_changed.add(name)
            else:
                self.rebalance_needed = True
            self.cv.notify_all()

    def _run(self) -> None:
        try:
            self.status.start()
            self.worker.offset_store.start()
            self.config_store.start()
            self.member = WorkerCoordinator(self.wc, self)
        except BaseException as exc:
            log.exception("distributed herder failed to start")
            self.error = exc
            return
        self.ready.set()
        try:
            while True:
                with self.cv:
                    if self.stopping:
                        break
                    need, self.rebalance_needed = self.rebalance_needed, False
                if need:
                    self.member.request_rejoin()
                try:
                    stable = self.member.poll(time.monotonic() + 1.0)
                except KafkaError as exc:
                    log.warning("joining the group failed: %s", exc)
                    with self.cv:
                        self.cv.wait(1.0)
                    continue
                if not stable:
                    continue
                self._tick()
                with self.cv:
                    if not (self.stopping or self.rebalance_needed or self.reconfigure or self.target_changed):
                        self.cv.wait(0.5)
        except BaseException:
            log.exception("distributed herder thread failed")
        finally:
            self._revoke_all()
            self.member.maybe_leave_group("the worker is stopping")
            self.member.close()
            for store in (self.config_store, self.worker.offset_store, self.status):
                try:
                    store.stop()
                except Exception:
                    log.exception("stopping a store failed")

    # -- rebalancing -----------------------------------------------------------------------------

    def _revoke_all(self) -> None:
        with self.lock:
            self.assignment = None
        self.worker.stop_all()

    # -- WorkerGroupListener: called by the worker coordinator inside poll() ---------------------

    def worker_state(self) -> WorkerState:
        return WorkerState(self.wc.advertised_url, self.config_store.snapshot().offset)

    def on_revoked(self) -> None:
        self._revoke_all()
        try:
            self.config_store.read_to_end()
        except Exception as exc:
            log.warning("reading the config topic failed: %s", exc)

    def on_assigned(self, generation: int, member_id: str, a: ConnectAssignment) -> None:
        assert self.member is not None
        if a.error == CONFIG_MISMATCH:
            log.info("config mismatch in generation %d; reading the config topic and rejoining", generation)
            self.member.request_rejoin()
            return
        if self.config_store.snapshot().offset < a.config_offset:
            try:
                self.config_store.read_to_end()
            except Exception:
                pass
            if self.config_store.snapshot().offset < a.config_offset:
                self.member.request_rejoin()
                return
        with self.lock:
            self.generation = generation
            self.member_id, self.leader_id = member_id, a.leader
            self.assignment = a
        log.info("generation %d: this worker (%s) runs connectors %s and tasks %s", generation,
                 self.member_id, a.connectors, a.tasks)
        snap = self.config_store.snapshot()
        for name in a.connectors:
            props = snap.configs.get(name)
            if props is None:
                continue
            target = PAUSED if snap.target_states.get(name) == PAUSED else RUNNING
            if self.worker.start_connector(props, target):
                self.reconfigure.add(name)
        for name, i in a.tasks:
            props, tcs = snap.configs.get(name), snap.task_configs.get(name, [])
            if props is None or i >= len(tcs):
                continue
            target = PAUSED if snap.target_states.get(name) == PAUSED else RUNNING
            self.worker.start_task(props, i, tcs[i], target)

    def leader_assign(self, leader_id: str, members: list[tuple[str, bytes]]) -> dict[str, bytes]:
        states = {m: WorkerState.decode(md) for m, md in members}
        max_offset = max(s.config_offset for s in states.values())
        if self.config_store.snapshot().offset < max_offset:
            try:
                self.config_store.read_to_end()
            except Exception:
                pass
        snap = self.config_store.snapshot()
        self.member_urls = {m: s.url for m, s in states.items()}
        if snap.offset < max_offset:
            bad = ConnectAssignment(CONFIG_MISMATCH, leader_id, self.wc.advertised_url, snap.offset).encode()
            return {m: bad for m in states}
        tasks = [(c, i) for c in snap.configs for i in range(len(snap.task_configs.get(c, [])))]
        plan = eager_assign(list(states), list(snap.configs), tasks)
        self.owners = {}
        out = {}
        for m, (conns, ts) in plan.items():
            for c in conns:
                self.owners[(c, -1)] = m
            for t in ts:
                self.owners[t] = m
            out[m] = ConnectAssignment(NO_ERROR, leader_id, self.wc.advertised_url, snap.offset, conns, ts).encode()
        log.info("leader assigned %s", {m: (len(c), len(t)) for m, (c, t) in plan.items()})
        return out

    # -- steady state ----------------------------------------------------------------------------

    def _tick(self) -> None:
        with self.cv:
            names, self.reconfigure = self.reconfigure, set()
            targets, self.target_changed = self.target_changed, set()
        snap = self.config_store.snapshot()
        for name in targets:
            state = PAUSED if snap.target_states.get(name) == PAUSED else RUNNING
            self.worker.set_connector_target_state(name, state)
        for name in names:
            if name not in self.worker.connectors:
                continue
            try:
                configs = self.worker.connector_task_configs(name)
            except Exception as exc:
                self.on_connector_state(name, FAILED, trace_of(exc))
                continue
            if configs != snap.task_configs.get(name):
                log.info("connector %s: writing %d task configs", name, len(configs))
                self.config_store.put_task_configs(name, configs)

    def request_task_reconfiguration(self, connector: str) -> None:
        with self.cv:
            self.reconfigure.add(connector)
            self.cv.notify_all()

    # -- REST writes (leader only) ------------------------------------------------------------------

    def _require_leader(self) -> None:
        with self.lock:
            a = self.assignment
            if a is None:
                raise NotLeader(None)
            if self.leader_id != self.member_id:
                raise NotLeader(a.leader_url)

    def put_connector_config(self, name: str, props: dict[str, str], allow_replace: bool
                             ) -> tuple[bool, dict[str, Any]]:
        props = {str(k): str(v) for k, v in props.items()}
        props.setdefault("name", name)
        if props["name"] != name:
            raise RestError(400, f"Connector name configuration ({props['name']}) doesn't match connector name in "
                                 f"the URL ({name})")
        self._require_leader()
        self.validate_config(props)
        with self.lock:
            self.config_store.read_to_end()
            exists = name in self.config_store.snapshot().configs
            if exists and not allow_replace:
                raise RestError(409, f"Connector {name} already exists")
            self.config_store.put_connector_config(name, props)
        return not exists, self.connector_info(name)

    def delete_connector(self, name: str) -> None:
        self._require_leader()
        with self.lock:
            self.config_store.read_to_end()
            if name not in self.config_store.snapshot().configs:
                raise RestError(404, f"Connector {name} not found")
            self.config_store.remove_connector_config(name)
            self.status.forget(name)

    def _set_target(self, name: str, state: str) -> None:
        self._require_leader()
        with self.lock:
            self.config_store.read_to_end()
            if name not in self.config_store.snapshot().configs:
                raise RestError(404, f"Connector {name} not found")
            self.config_store.put_target_state(name, state)

    def pause_connector(self, name: str) -> None:
        self._set_target(name, PAUSED)

    def resume_connector(self, name: str) -> None:
        self._set_target(name, STARTED)

    def _owner_url(self, key: tuple[str, int]) -> str | None:
        member = self.owners.get(key)
        return None if member is None else self.member_urls.get(member)

    def restart_connector(self, name: str) -> None:
        self._restart((name, -1))

    def restart_task(self, name: str, task: int) -> None:
        self._restart((name, task))

    def _restart(self, key: tuple[str, int]) -> None:
        """On the owner: restart in place. On the leader: forward to the owner."""
        name, task = key
        snap = self.config_store.snapshot()
        if name not in snap.configs:
            raise RestError(404, f"Connector {name} not found")
        if task >= 0 and task >= len(snap.task_configs.get(name, [])):
            raise RestError(404, f"Task {name}-{task} not found")
        a = self.assignment
        if a is not None and ((task < 0 and name in a.connectors) or (task >= 0 and key in a.tasks)):
            target = PAUSED if snap.target_states.get(name) == PAUSED else RUNNING
            if task < 0:
                self.worker.stop_connector(name)
                if self.worker.start_connector(snap.configs[name], target):
                    self.request_task_reconfiguration(name)
            else:
                self.worker.stop_tasks([key])
                self.worker.start_task(snap.configs[name], task, snap.task_configs[name][task], target)
            return
        self._require_leader()
        url = self._owner_url(key)
        if url is None:
            raise NotLeader(None)
        path = f"connectors/{name}/restart" if task < 0 else f"connectors/{name}/tasks/{task}/restart"
        req = urllib.request.Request(url.rstrip("/") + "/" + path + "?forward=false", method="POST", data=b"")
        try:
            with urllib.request.urlopen(req, timeout=60):
                pass
        except OSError as exc:
            raise RestError(409, f"restart on the owning worker failed: {exc}") from None
