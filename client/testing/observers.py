"""``ObservedCluster``: a LocalCluster whose state a test reads as the controller recorded it.

Invariant: every observer only reads ZooKeeper (the registrations under /brokers/ids,
/controller, the topic and partition state znodes) through the cluster's own kazoo client and
changes nothing; a partition without a leader reads as None, never as Kafka's -1. The one wait,
``wait_for_isr``, polls through faults (ZooKeeper and socket errors count as "not yet") for
``timeout`` seconds. ``KafkaCluster`` (the plugin's, with faults) builds on it; odradek's own
tests get it from their ``cluster_factory`` (Kafka's defaults, no proxies).
"""
from __future__ import annotations

import json

from odradek.zk.admin import AdminZkClient
from odradek.zk.cluster import LocalCluster

from .waits import wait_through_faults


class ObservedCluster(LocalCluster):
    """A LocalCluster with observers: ``leader``, ``isr``, ``replicas``, ``controller``,
    ``live_brokers``, ``partitions``, ``under_replicated``, ``led_by``, ``wait_for_isr``."""

    timeout: float = 90.0   # how long a wait on the cluster's state lasts

    def partition_state(self, topic: str, partition: int) -> dict:
        """The partition's state znode: leader, leader_epoch, isr, controller_epoch."""
        data, _ = self.zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return json.loads(data)

    def _states(self) -> dict[tuple[str, int], dict]:
        """Every partition's state; a partition without one is left out (a topic the controller
        is still creating, or one whose deletion stopped half-way: a controller killed while
        deleting its znodes leaves that to the next controller, as in Kafka)."""
        from kazoo.exceptions import NoNodeError
        out = {}
        for t, p in self.partitions():
            try:
                out[(t, p)] = self.partition_state(t, p)
            except NoNodeError:
                continue
        return out

    def leader(self, topic: str, partition: int) -> int | None:
        """The partition's leader as the controller recorded it in ZooKeeper (None: no leader)."""
        leader = self.partition_state(topic, partition)["leader"]
        return None if leader < 0 else leader

    def isr(self, topic: str, partition: int) -> list[int]:
        return sorted(self.partition_state(topic, partition)["isr"])

    def replicas(self, topic: str, partition: int) -> list[int]:
        data, _ = self.zk.get(f"/brokers/topics/{topic}")
        return list(json.loads(data)["partitions"][str(partition)])

    def controller(self) -> int | None:
        """The broker id holding /controller, or None while there is none."""
        return AdminZkClient(self.zk).controller_id()

    def live_brokers(self) -> set[int]:
        return {int(c) for c in self.zk.get_children("/brokers/ids")}

    def partitions(self) -> list[tuple[str, int]]:
        """Every (topic, partition) that has a state znode."""
        out = []
        for topic in self.zk.get_children("/brokers/topics"):
            if self.zk.exists(f"/brokers/topics/{topic}/partitions"):
                out += [(topic, int(p)) for p in self.zk.get_children(f"/brokers/topics/{topic}/partitions")]
        return sorted(out)

    def under_replicated(self) -> list[tuple[str, int]]:
        """The partitions whose ISR is smaller than their replica set."""
        states = self._states()
        admin = AdminZkClient(self.zk)
        assignments = {t: admin.topic_assignment(t) for t in {t for t, _ in states}}   # once per topic
        return [(t, p) for (t, p), st in states.items() if len(st["isr"]) < len(assignments[t][p])]

    def led_by(self, broker_id: int) -> list[tuple[str, int]]:
        return [tp for tp, st in self._states().items() if st["leader"] == broker_id]

    def wait_for_isr(self, topic: str, partition: int, expected: list[int] | None = None,
                     timeout: float | None = None) -> list[int]:
        """Wait until the ISR is ``expected`` (default: the whole replica set); the ISR."""
        want = sorted(expected if expected is not None else self.replicas(topic, partition))
        wait_through_faults(lambda: self.isr(topic, partition) == want, timeout or self.timeout,
                            f"ISR of {topic}-{partition} to be {want}")
        return want
