"""SampledRate: Kafka's sampled ``Rate`` measured against a bound (its ``Quota``), shared by the
replication throttles (``broker/replication/replication_quota.py``) and the client quotas
(``broker/quotas/client_quotas.py``).

Invariants:
- the rate is what was recorded in the last ``samples`` windows of ``window_s`` seconds over the
  time those windows span, counted as at least ``samples - 1`` windows (Kafka's
  ``Rate.windowSize``), so one burst right after a quiet spell is spread over that minimum span;
- the bound is exceeded while that rate is above ``limit`` (strictly); ``UNLIMITED`` never is;
- ``throttle_ms`` is Kafka's ``ClientQuotaManager.throttleTime``: how long the recorded amount
  must be spread out for the rate to fall back to the limit, ``(rate - limit) / limit`` of the
  current span.
Sans-IO: times are passed in (seconds).
"""
from __future__ import annotations

from collections import deque

UNLIMITED = 2 ** 63 - 1       # Kafka's Long.MaxValue "no quota"
SAMPLES = 11                  # Kafka's quota.window.num / replication.quota.window.num
WINDOW_S = 1.0                # Kafka's quota.window.size.seconds / replication.quota.window.size.seconds


class SampledRate:
    def __init__(self, limit: float = UNLIMITED, samples: int = SAMPLES, window_s: float = WINDOW_S):
        self.limit = limit
        self.samples = samples
        self.window_s = window_s
        self._windows: deque[list[float]] = deque()   # [window start, amount]

    @property
    def enabled(self) -> bool:
        return self.limit < UNLIMITED

    def record(self, amount: float, now: float) -> None:
        if not self._windows or now - self._windows[-1][0] >= self.window_s:
            self._windows.append([now, 0.0])
        self._windows[-1][1] += amount
        self._purge(now)

    def unrecord(self, amount: float, now: float) -> None:
        """Take back what the last ``record`` added (Kafka's unrecordQuotaSensor)."""
        if self._windows:
            self._windows[-1][1] -= amount

    def _purge(self, now: float) -> None:
        while self._windows and now - self._windows[0][0] >= self.samples * self.window_s:
            self._windows.popleft()

    def span(self, now: float) -> float:
        """The seconds the rate is measured over (at least ``samples - 1`` windows)."""
        self._purge(now)
        elapsed = now - self._windows[0][0] if self._windows else 0.0
        full = int(elapsed / self.window_s)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_s
        return elapsed

    def rate(self, now: float) -> float:
        """Amount per second over the retained windows."""
        span = self.span(now)
        if not self._windows:
            return 0.0
        return sum(w[1] for w in self._windows) / span

    def is_exceeded(self, now: float) -> bool:
        return self.enabled and self.rate(now) > self.limit

    def throttle_ms(self, now: float) -> int:
        """0 within the bound, else the milliseconds to hold the client for (module invariants)."""
        if not self.enabled:
            return 0
        rate = self.rate(now)
        if rate <= self.limit:
            return 0
        if self.limit <= 0:
            return int(self.span(now) * 1000)
        return round((rate - self.limit) / self.limit * self.span(now) * 1000)
