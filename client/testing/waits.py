"""``wait_until``: poll a condition until it holds, or fail saying what was awaited.

Invariant: the condition is called at least once and then every ``interval`` seconds until it
returns something truthy (that value is returned) or ``timeout`` seconds have passed (an
``AssertionError`` names ``what``, the timeout and the last value or error). An exception of a
type in ``retry_on`` counts as "not yet" (a cluster in flux: connection loss, a broker
restarting); any other exception propagates at once. ``wait_through_faults`` is the same with
ZooKeeper and socket errors counted as "not yet", for waits across injected faults.
"""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float = 60.0, what: str = "condition", *,
               interval: float = 0.1, retry_on: tuple[type[BaseException], ...] = ()) -> T:
    """The first truthy value of ``condition()``, polled every ``interval`` s for ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = condition()
        except retry_on as exc:
            last = exc
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def wait_through_faults(condition: Callable[[], T], timeout: float = 90.0, what: str = "condition", *,
                        interval: float = 0.1) -> T:
    """``wait_until`` where a ZooKeeper error (connection loss during a fault) or an OSError is "not yet"."""
    from kazoo.exceptions import KazooException
    return wait_until(condition, timeout, what, interval=interval, retry_on=(KazooException, OSError))
