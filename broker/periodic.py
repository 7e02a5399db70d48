"""A broker's periodic tasks (Kafka's KafkaScheduler), one LoopingCall each, and how those that
run on a thread read the reactor's tables.

Invariant: a task that raises is logged and runs again at its next period; a task that returns a
Deferred (its work on a thread) is not started again until that Deferred has fired, so a slow run
never overlaps the next, and a failure there is logged the same way. A task on a thread reads a
table only through ``items_from_thread``, which never holds the GIL for the whole table.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, TypeVar

from twisted.internet import defer, task

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


def every(clock: Any, interval_s: float, name: str, fn: Callable[[], Any]) -> task.LoopingCall:
    """Run ``fn`` every ``interval_s`` on ``clock``, the first time one interval from now."""
    def run() -> defer.Deferred | None:
        try:
            result = fn()
        except Exception:
            log.exception("periodic task %s failed", name)
            return None
        if isinstance(result, defer.Deferred):
            return result.addErrback(lambda f: log.error("periodic task %s failed: %s", name, f.getTraceback()))
        return None
    loop = task.LoopingCall(run)
    loop.clock = clock
    loop.start(interval_s, now=False)
    return loop


def items_from_thread(table: dict[K, V]) -> list[tuple[K, V]]:
    """``table``'s items, read on a thread while the reactor may change it. Read one at a time in a
    Python loop, where the interpreter hands the GIL back to the reactor every switch interval (1 ms
    in the broker): a copy in one C call holds it while it touches every key and value, 40-80 ms
    at 5,000 partitions whose memory had gone cold. Read again if the reactor resized the table meanwhile
    (a change of size ends the walk); the third time, one C call."""
    for _ in range(2):
        try:
            return [item for item in table.items()]
        except RuntimeError:   # dictionary changed size during iteration
            continue
    return list(table.items())
