"""ReplicationQuota: one side (leader or follower) of this broker's inter-broker replication
throttle (Kafka's ReplicationQuotaManager, KIP-73).

Invariants:
- the rate is Kafka's sampled Rate: the bytes recorded in the last ``samples`` windows of
  ``window_s`` seconds (Kafka's replication.quota.window.num = 11, .size.seconds = 1) over the time
  those windows span, counted as at least ``samples - 1`` windows; the quota is exceeded while
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

from collections import deque
from functools import lru_cache
from typing import Iterable

UNLIMITED = 2 ** 63 - 1       # Kafka's Long.MaxValue default of the throttled rates
SAMPLES = 11
WINDOW_S = 1.0
ALL = "*"


class ReplicationQuota:
    def __init__(self, limit: int = UNLIMITED, samples: int = SAMPLES, window_s: float = WINDOW_S):
        self.limit = limit
        self.samples = samples
        self.window_s = window_s
        self._windows: deque[list[float]] = deque()   # [window start, bytes]

    @property
    def enabled(self) -> bool:
        return self.limit < UNLIMITED

    def record(self, nbytes: int, now: float) -> None:
        if not self._windows or now - self._windows[-1][0] >= self.window_s:
            self._windows.append([now, 0.0])
        self._windows[-1][1] += nbytes
        self._purge(now)

    def _purge(self, now: float) -> None:
        while self._windows and now - self._windows[0][0] >= self.samples * self.window_s:
            self._windows.popleft()

    def rate(self, now: float) -> float:
        """Bytes per second over the retained windows."""
        self._purge(now)
        if not self._windows:
            return 0.0
        elapsed = now - self._windows[0][0]
        full = int(elapsed / self.window_s)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_s
        return sum(w[1] for w in self._windows) / elapsed

    def is_exceeded(self, now: float) -> bool:
        return self.enabled and self.rate(now) > self.limit


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
