"""Auto leader rebalance decisions (Kafka 2.8 KafkaController.checkAndTriggerAutoLeaderRebalance).

Invariant: pure functions of the controller's view (assignment, current
leader and ISR per partition, live brokers); partitions are grouped by their
preferred replica (the assignment head), a broker's imbalance ratio is
"partitions it should lead but does not" / "partitions it should lead", and only
a ratio strictly above ``leader.imbalance.per.broker.percentage`` / 100 makes its
partitions candidates — and only those whose preferred replica is live and in
the ISR (a preferred election that could not succeed is never attempted).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Mapping, Sequence

TopicPartition = tuple[str, int]


@dataclass
class BrokerImbalance:
    broker_id: int
    preferred: int                       # partitions whose assignment head is this broker
    not_led: list[TopicPartition] = field(default_factory=list)   # ... but led by someone else

    @property
    def ratio(self) -> float:
        return len(self.not_led) / self.preferred if self.preferred else 0.0


def imbalance_by_broker(assignments: Mapping[TopicPartition, Sequence[int]],
                        leaders: Mapping[TopicPartition, int],
                        excluded_topics: Collection[str] = ()) -> dict[int, BrokerImbalance]:
    """Per preferred broker: how many partitions it should lead and which it does not.

    Partitions without a known leader (no state yet) do not count as imbalanced, as in Kafka
    (``partitionLeadershipInfo(tp).exists(_.leader != preferred)``).
    """
    out: dict[int, BrokerImbalance] = {}
    for tp in sorted(assignments):
        replicas = assignments[tp]
        if not replicas or tp[0] in excluded_topics:
            continue
        head = replicas[0]
        entry = out.setdefault(head, BrokerImbalance(head, 0))
        entry.preferred += 1
        leader = leaders.get(tp)
        if leader is not None and leader != head:
            entry.not_led.append(tp)
    return out


def partitions_to_rebalance(assignments: Mapping[TopicPartition, Sequence[int]],
                            leaders: Mapping[TopicPartition, int],
                            isrs: Mapping[TopicPartition, Sequence[int]],
                            live_brokers: Collection[int],
                            imbalance_percentage: int,
                            excluded_topics: Collection[str] = ()) -> list[TopicPartition]:
    """The partitions a periodic rebalance check hands to the preferred replica election."""
    threshold = imbalance_percentage / 100.0
    chosen: list[TopicPartition] = []
    for broker_id, entry in sorted(imbalance_by_broker(assignments, leaders, excluded_topics).items()):
        if entry.ratio <= threshold or broker_id not in live_brokers:
            continue
        chosen += [tp for tp in entry.not_led if broker_id in isrs.get(tp, ())]
    return sorted(chosen)
