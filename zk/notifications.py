"""Kafka's change notifications (ZkNodeChangeNotificationListener's znodes): sequential children
``<prefix><10-digit seq>`` under a change path, each naming what changed.

Invariant: blocking kazoo calls only (callers run them in a thread). Children are handled in
sequence order and names without the prefix are ignored; a notification older than 15 minutes
is deleted by whichever reader sees it first (the others find it gone, which is fine).
"""
from __future__ import annotations

import time
from typing import Any, Iterable

from kazoo.exceptions import NoNodeError

CHANGE_EXPIRATION_MS = 15 * 60 * 1000


def sequenced(change: Any, names: Iterable[str]) -> list[tuple[int, str]]:
    """[(sequence, child name)] of a change path's children, oldest first (others ignored)."""
    out = []
    for name in names:
        if name.startswith(change.prefix):
            try:
                out.append((int(name[len(change.prefix):]), name))
            except ValueError:
                continue
    return sorted(out)


def read(kazoo: Any, change: Any, name: str) -> tuple[bytes | None, int]:
    """(the notification's data, or None when it is gone; its ctime in ms)."""
    try:
        data, stat = kazoo.get(f"{change.path}/{name}")
    except NoNodeError:
        return None, 0
    return data, stat.ctime


def purge_expired(kazoo: Any, change: Any, name: str, ctime_ms: int, now_ms: float | None = None) -> None:
    """Delete a notification older than 15 minutes."""
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    if ctime_ms and now_ms - ctime_ms > CHANGE_EXPIRATION_MS:
        try:
            kazoo.delete(f"{change.path}/{name}")
        except NoNodeError:
            pass
