"""ReplicationQuota: one side (leader or follower) of this broker's inter-broker replication
throttle (Kafka's ReplicationQuotaManager, KIP-73).

Invariants:
- the rate is Kafka's sampled Rate (``broker/quotas/sampled_rate.py``, with Kafka's
  replication.quota.window.num = 11, .size.seconds = 1); the quota is exceeded while
  that rate is above the limit (``leader.replication.throttled.rate`` /
  ``follower.replication.throttled.rate``, a dynamic per-broker config; unlimited by default);
- a partition is throttled on this side when its topic's ``leader.replication.throttled.replicas``
  / ``follower.replication.throttled.replicas`` is ``*`` or names ``<partition>:<this broker>``;
- the callers throttle only replicas outside the ISR (Kafka's shouldLeaderThrottle /
  shouldFollowerThrottle): a throttle slows a catching-up replica (a reassignment's new one, a
  restarted broker), never the in-sync replication that acknowledges produce requests.
Sans-IO: times are passed in (seconds).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from ..quotas.sampled_rate import SAMPLES, UNLIMITED, WINDOW_S, SampledRate

ALL = "*"

__all__ = ["ReplicationQuota", "is_throttled", "SAMPLES", "UNLIMITED", "WINDOW_S"]


class ReplicationQuota(SampledRate):
    """One side's throttle: Kafka's sampled rate (``broker/quotas/sampled_rate.py``) against the
    throttled rate."""


@lru_cache(maxsize=1024)
def _parse(entries: tuple[str, ...], broker_id: int) -> frozenset[int] | str:
    if any(e.strip() == ALL for e in entries):
        return ALL
    out = set()
    for e in entries:
        partition, sep, broker = e.strip().partition(":")
        if sep and partition.strip().isdigit() and broker.strip().isdigit() and int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


def is_throttled(entries: Iterable[str] | None, partition: int, broker_id: int) -> bool:
    """Does a ``*.replication.throttled.replicas`` value throttle ``partition`` on ``broker_id``?"""
    if not entries:
        return False
    parsed = _parse(tuple(entries), broker_id)
    return parsed == ALL or partition in parsed
