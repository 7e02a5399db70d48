"""The perf tools' Throttler: it holds the target rate, as Kafka's ThroughputThrottler does, by
sleeps of at least 2 ms, never one per record."""
from __future__ import annotations

from odradek.client.perf import MIN_SLEEP_S, Throttler


def run(target: float, records: int) -> tuple[float, list[float]]:
    """Send ``records`` at no cost on a clock that only sleeps move: (the time taken, the sleeps)."""
    clock, sleeps = 0.0, []
    throttler = Throttler(target, clock)
    for i in range(records):
        wait = throttler.ahead(i + 1, clock)
        if wait:
            sleeps.append(wait)
            clock += wait
    return clock, sleeps


def test_the_rate_is_held_by_sleeps_of_at_least_two_milliseconds():
    took, sleeps = run(10_000, 50_000)
    assert 5.0 - MIN_SLEEP_S <= took <= 5.0   # 50,000 records at 10,000/s
    assert min(sleeps) >= MIN_SLEEP_S == 0.002
    assert 2_380 <= len(sleeps) <= 2_500   # one sleep per 20 or 21 records, not one per record


def test_a_slow_target_sleeps_for_each_record_and_unthrottled_never():
    took, sleeps = run(100, 50)   # 10 ms apart
    assert len(sleeps) == 50 and abs(took - 0.5) < 1e-9
    assert run(-1, 1000) == (0.0, [])
