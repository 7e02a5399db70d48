"""Classic ISR-change propagation: batch the leader's ISR writes into one notification.

Invariant: every partition whose ISR this broker changed in ZooKeeper is
eventually named in exactly one ``/isr_change_notification/isr_change_`` node
(a failed write puts the partitions back); a node is written only when there
were changes and either none for ``BLACKOUT_MS`` or none propagated for
``INTERVAL_MS`` (Kafka's ``ReplicaManager.maybePropagateIsrChanges`` constants,
checked every ``CHECK_INTERVAL_MS``; Kafka has no config keys for them).
Sans-IO: times are passed in ms; the replica manager does the ZooKeeper write.
"""
from __future__ import annotations

TopicPartition = tuple[str, int]

CHECK_INTERVAL_MS = 2500       # the isr-change-propagation task period
BLACKOUT_MS = 5000             # IsrChangePropagationBlackOut
INTERVAL_MS = 60000            # IsrChangePropagationInterval


class IsrChangePropagation:
    """The set of partitions with unpropagated ISR changes and the two timestamps."""

    def __init__(self, now_ms: int):
        self.changes: set[TopicPartition] = set()
        self.last_change_ms = now_ms
        self.last_propagation_ms = now_ms

    def record(self, tp: TopicPartition, now_ms: int) -> None:
        """``recordIsrChange``: the leader changed ``tp``'s ISR in ZooKeeper."""
        self.changes.add(tp)
        self.last_change_ms = now_ms

    def due(self, now_ms: int) -> list[TopicPartition] | None:
        """The partitions to propagate now (and forget), or None if not yet."""
        if not self.changes:
            return None
        if self.last_change_ms + BLACKOUT_MS < now_ms or self.last_propagation_ms + INTERVAL_MS < now_ms:
            out = sorted(self.changes)
            self.changes.clear()
            self.last_propagation_ms = now_ms
            return out
        return None

    def restore(self, tps: list[TopicPartition]) -> None:
        """A notification write failed: propagate these with the next batch."""
        self.changes.update(tps)
