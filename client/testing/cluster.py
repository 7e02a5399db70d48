"""``KafkaCluster``: a LocalCluster a test can break on purpose, and watch recover.

Invariant: every fault method returns only once the cluster has observed the fault, judged
from ZooKeeper's own state (registrations under /brokers/ids, /controller, the partition state
znodes), never after a fixed sleep: ``kill``/``pause``/``isolate`` once the broker left
/brokers/ids and no partition names it as leader; ``restart``/``resume``/``heal`` once it
registered again with a new session; ``expire_session`` once its old session was expired by
ZooKeeper and it registered with a new one. Each broker's ZooKeeper and inter-broker links
run through proxies of this cluster's ``ProxyLayer`` (clients connect to the brokers
directly), so a test can cut or slow them; the proxies listen on 127.0.0.1 only.
"""
from __future__ import annotations

import os
import signal
from typing import Any

from odradek.zk.cluster import HOST, BrokerProcess
from odradek.zk.ensemble import free_ports

from .observers import ObservedCluster
from .proxy import Proxy, ProxyLayer
from .tmpfs import FaultUnavailable, TmpfsMount
from .waits import wait_through_faults

# Kafka's defaults made faster for tests (a user's ``properties`` win over these):
TEST_DEFAULTS: dict[str, object] = {
    "zookeeper.session.timeout.ms": 6000,          # Kafka: 18000; pause/isolate wait this out
    "controlled.shutdown.retry.backoff.ms": 200,   # Kafka: 5000; teardown of a broken cluster
}


class KafkaCluster(ObservedCluster):
    """``LocalCluster(data_dir, zookeepers, brokers, overrides=...)`` with faults, and the
    observers of ``ObservedCluster``.

    ``disk`` (e.g. "16m"): every broker's log dir is a tmpfs of that size, so ``full_disk``
    works (needs root: ``FaultUnavailable`` otherwise). ``timeout``: how long a fault waits
    for the cluster to observe it."""

    def __init__(self, data_dir: str | os.PathLike, zookeepers: int = 1, brokers: int = 3,
                 overrides: dict[str, object] | None = None, *, disk: str | None = None,
                 timeout: float = 90.0, **kwargs: Any):
        super().__init__(data_dir, zookeepers=zookeepers, brokers=brokers,
                         overrides={**TEST_DEFAULTS, **(overrides or {})}, **kwargs)
        self.timeout = timeout
        self.disk = disk
        self.proxies = ProxyLayer(self._broker_sources)
        self._internal_ports: dict[int, int] = {}
        self._mounts: dict[int, TmpfsMount] = {}
        self._isolated: set[int] = set()
        self._paused: set[int] = set()

    # ------------------------------------------------------------ wiring
    def _broker_sources(self) -> dict[str, int]:
        return {f"broker-{i}": pid for i, pid in self.broker_pids.items() if pid is not None}

    def _proxy(self, name: str, target_port: int) -> Proxy:
        proxy = self.proxies.proxies.get(name)
        return proxy if proxy is not None else self.proxies.add(name, target_port)

    def internal_proxy(self, broker_id: int) -> Proxy:
        """The proxy every other broker (and the controller) reaches ``broker_id`` through."""
        return self.proxies.proxies[f"internal-{broker_id}"]

    def zookeeper_proxies(self, broker_id: int) -> list[Proxy]:
        """The proxies ``broker_id`` reaches the ZooKeeper nodes through."""
        return [p for name, p in self.proxies.proxies.items() if name.startswith(f"zk-{broker_id}-")]

    def server_properties(self, broker: BrokerProcess) -> dict[str, str]:
        props = super().server_properties(broker)
        if broker.id not in self._internal_ports:
            self._internal_ports[broker.id] = free_ports(1)[0]
        port = self._internal_ports[broker.id]
        internal = self._proxy(f"internal-{broker.id}", port)
        zk = [self._proxy(f"zk-{broker.id}-{n.id}", n.client_port) for n in self.ensemble.nodes.values()]
        props.update({
            "listeners": f"{props['listeners']},INTERNAL://{HOST}:{port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{broker.port},INTERNAL://{HOST}:{internal.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "zookeeper.connect": ",".join(f"{HOST}:{p.port}" for p in zk),
        })
        if self.disk is not None:
            if broker.id not in self._mounts:
                self._mounts[broker.id] = TmpfsMount(broker.dir / "tmpfs-logs", self.disk)
            props["log.dirs"] = str(self._mounts[broker.id].path)
        return props

    def _spawn(self, broker: BrokerProcess) -> None:
        super()._spawn(broker)
        self.write_state()  # every process recorded at once: a run killed mid-start is reaped too

    def start(self, before_brokers: Any = None) -> "KafkaCluster":
        try:
            super().start(before_brokers)
        except BaseException:
            self._release()
            raise
        return self

    def stop(self, timeout: float = 30.0) -> None:
        for broker_id in list(self._isolated):
            self._link(broker_id, up=True)
        for broker in self.brokers.values():  # a paused broker cannot shut down
            if broker.pid is not None:
                os.kill(broker.pid, signal.SIGCONT)
        try:
            super().stop(timeout)
        finally:
            self._release()

    def _release(self) -> None:
        self.proxies.close()
        for mount in self._mounts.values():
            mount.unmount()
        self._mounts.clear()

    # ------------------------------------------------------------ waits
    def _wait_gone(self, broker_id: int, why: str) -> None:
        wait_through_faults(lambda: broker_id not in self.live_brokers(), self.timeout,
                   f"broker {broker_id} to leave /brokers/ids ({why})")
        wait_through_faults(lambda: not self.led_by(broker_id), self.timeout,
                   f"the controller to move leadership off broker {broker_id} ({why})")

    def _wait_registered(self, broker_id: int, old_czxid: int | None, why: str) -> None:
        wait_through_faults(lambda: self._registration_czxid(broker_id) not in (None, old_czxid), self.timeout,
                   f"broker {broker_id} to register again ({why})")

    # ------------------------------------------------------------ faults
    def kill(self, broker_id: int) -> None:
        """SIGKILL a broker; returns once no partition is led by it."""
        self.kill_broker(broker_id, signal.SIGKILL)
        self._wait_gone(broker_id, "killed")

    def restart(self, broker_id: int) -> None:
        """Start a stopped broker again (one shutting down by itself, e.g. after its log dir
        failed, is first waited for); returns once it registered again."""
        broker = self._broker(broker_id)
        if broker.pid is not None and broker_id not in self._isolated | self._paused | self.live_brokers():
            wait_through_faults(lambda: broker.pid is None, self.timeout, f"broker {broker_id} to exit")
        self.start_broker(broker_id, self.timeout)

    def kill_controller(self) -> int:
        """SIGKILL the controller; returns its id once another broker is controller."""
        old = wait_through_faults(self.controller, self.timeout, "a controller")
        assert old is not None  # wait_through_faults returns the condition's first truthy value
        self.kill(old)
        wait_through_faults(lambda: self.controller() not in (None, old), self.timeout, "a new controller")
        return old

    def pause(self, broker_id: int) -> None:
        """SIGSTOP a broker; returns once ZooKeeper expired its session and leadership moved."""
        os.kill(self._pid(broker_id), signal.SIGSTOP)
        self._paused.add(broker_id)
        self._wait_gone(broker_id, "paused past its ZooKeeper session")

    def resume(self, broker_id: int) -> None:
        """SIGCONT a paused broker; returns once it registered with a new session."""
        old = self._registration_czxid(broker_id)
        os.kill(self._pid(broker_id), signal.SIGCONT)
        self._paused.discard(broker_id)
        self._wait_registered(broker_id, old, "resumed")

    def expire_session(self, broker_id: int) -> None:
        """A real ZooKeeper session expiry: the broker's ZooKeeper links are cut (it keeps
        running and serving) until the ensemble has expired its session, then restored;
        returns once the broker registered with a new session."""
        self._cut_zookeeper(broker_id, True)
        try:
            self._wait_gone(broker_id, "session expired")
        finally:
            self._cut_zookeeper(broker_id, False)
        self._wait_registered(broker_id, None, "new session after expiry")

    def isolate(self, broker_id: int) -> None:
        """Cut a broker off ZooKeeper and every other broker (clients still reach it); returns
        once its session expired and leadership moved off it. ``heal`` undoes it."""
        self._link(broker_id, up=False)
        self._isolated.add(broker_id)
        self._wait_gone(broker_id, "isolated")

    def heal(self, broker_id: int) -> None:
        """Reconnect an isolated broker; returns once it registered again."""
        self._link(broker_id, up=True)
        self._isolated.discard(broker_id)
        self._wait_registered(broker_id, None, "healed")

    def network_delay(self, ms: float, broker_id: int | None = None) -> None:
        """Add ``ms`` of latency each way to the ZooKeeper and inter-broker links (of one broker,
        or all); 0 removes it."""
        for name, proxy in self.proxies.proxies.items():
            if broker_id is None or name in (f"internal-{broker_id}",) or name.startswith(f"zk-{broker_id}-"):
                self.proxies.set_delay(proxy, ms)

    def kill_zookeeper(self, node_id: int) -> None:
        """SIGKILL a ZooKeeper node; returns once the others serve again (if they keep a quorum)."""
        self.ensemble.stop_node(node_id, sig=signal.SIGKILL)
        rest = [n for n, pid in self.ensemble.pids.items() if pid is not None]
        if len(rest) * 2 > len(self.ensemble.nodes):
            self.ensemble.wait_serving(rest, self.timeout)

    def restart_zookeeper(self, node_id: int) -> None:
        """Start a stopped ZooKeeper node; returns once it serves."""
        self.ensemble.start_node(node_id, timeout=self.timeout)

    def full_disk(self, broker_id: int) -> None:
        """Fill the broker's log dir (a tmpfs: the cluster needs ``disk=``, and root). Its next
        write fails with ENOSPC: the broker takes the dir offline (its only one: it shuts down,
        which ``wait_gone`` observes). ``free_disk`` and ``restart`` bring it back."""
        self._mount(broker_id).fill()

    def free_disk(self, broker_id: int) -> None:
        self._mount(broker_id).free()

    def wait_gone(self, broker_id: int) -> None:
        """Wait until the broker left /brokers/ids and leads no partition."""
        self._wait_gone(broker_id, "gone")

    def repair(self) -> list[str]:
        """Undo every fault still in force (delays, isolation, pauses, full disks, stopped
        ZooKeeper nodes and brokers); returns once every broker is registered. What it undid."""
        undone = []
        self.network_delay(0)
        for n, pid in self.ensemble.pids.items():
            if pid is None:
                self.restart_zookeeper(n)
                undone.append(f"restarted ZooKeeper node {n}")
        for b in sorted(self._isolated):
            self.heal(b)
            undone.append(f"healed broker {b}")
        for b in sorted(self._paused):
            self.resume(b)
            undone.append(f"resumed broker {b}")
        for b, mount in self._mounts.items():
            if (mount.path / "filler").exists():
                mount.free()
                undone.append(f"freed the disk of broker {b}")
        for b, pid in self.broker_pids.items():
            if pid is None:
                self.restart(b)
                undone.append(f"restarted broker {b}")
        wait_through_faults(lambda: self.live_brokers() == set(self.brokers), self.timeout,
                            "every broker registered")
        return undone

    # ------------------------------------------------------------ internals
    def _pid(self, broker_id: int) -> int:
        pid = self._broker(broker_id).pid
        if pid is None:
            raise ValueError(f"broker {broker_id} is not running")
        return pid

    def _mount(self, broker_id: int) -> TmpfsMount:
        self._broker(broker_id)
        if broker_id not in self._mounts:
            raise FaultUnavailable("full_disk needs the cluster started with disk=SIZE "
                                   "(@pytest.mark.kafka_cluster(disk='16m'); mounting a tmpfs needs root)")
        return self._mounts[broker_id]

    def _cut_zookeeper(self, broker_id: int, cut: bool) -> None:
        for proxy in self.zookeeper_proxies(broker_id):
            (self.proxies.block if cut else self.proxies.unblock)(proxy)

    def _link(self, broker_id: int, up: bool) -> None:
        change = self.proxies.unblock if up else self.proxies.block
        self._cut_zookeeper(broker_id, not up)
        change(self.internal_proxy(broker_id))
        for other in self.brokers:
            if other != broker_id and f"internal-{other}" in self.proxies.proxies:
                change(self.internal_proxy(other), f"broker-{broker_id}")
