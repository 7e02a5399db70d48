"""CollectorSchedule: the cycle collector's work in proportion to what is new, not to the heap.

Invariant: every ``freeze_interval_s`` the objects that are new since the last tick are
collected (a collection that traverses only them), and the survivors frozen; so CPython's
automatic collections, the full one included, traverse only objects at most one interval old. A
tick first unfreezes everything, so that its collection is a full one, when the heap (the
process's anonymous resident memory) has grown by a quarter since the last full one (as
CPython's own rule for its oldest generation) or ``full_interval_s`` has passed. A reference
cycle among objects that were alive at a tick (a connection's objects, say, once it closes) is
so reclaimed before such garbage is a quarter of the heap, and within the interval. Reference
counting frees every object outside a cycle at once, as always.

Why: a broker keeps a few objects per partition for its whole life (logs, segments, indexes,
partition and metadata state), and with CPython's defaults each full collection traversed all of
them. At 10,000 partitions on three brokers a full collection took 200-570 ms, collected
nothing, and ran several times a second while leadership moved, because the objects of one
LeaderAndIsr or UpdateMetadata of thousands of partitions are enough to trigger one. The
reactor stood still meanwhile.

The heap is measured by what the kernel reports (``/proc/self/statm``), which touches none of
it. ``sys.getallocatedblocks`` reads the header of every pool in every arena; where the memory
not touched for a while is slow to touch again (a host reclaiming a virtual machine's cold
pages, swap), that took 30 ms a tick in a 66 MB broker, and stalled the reactor as long.
"""
from __future__ import annotations

import gc
import logging
import os
import sys
import time
from typing import Any, Callable

from twisted.internet import task

log = logging.getLogger(__name__)

FREEZE_INTERVAL_S = 1.0
FULL_INTERVAL_S = 3600.0
OLDEST_THRESHOLD = 1000   # middle-generation collections before an automatic full one (CPython: 10)
FULL_GROWTH = 1.25        # the heap, against its size after the last full collection


STATM = "/proc/self/statm"


class ResidentHeap:
    """The process's anonymous resident pages (resident less file-backed and shared), where the
    interpreter's objects live: one ``pread`` of the line the kernel keeps, on a descriptor opened
    once (opening it at each tick cost 1-3 ms once the path's memory had gone cold)."""

    def __init__(self) -> None:
        self._fd = os.open(STATM, os.O_RDONLY | os.O_CLOEXEC)

    def __call__(self) -> int:
        fields = os.pread(self._fd, 128, 0).split()
        return int(fields[1]) - int(fields[2])

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def heap_measure() -> Callable[[], int]:
    """A ``ResidentHeap`` where the kernel reports it (Linux); elsewhere the interpreter's
    allocated blocks, which cost a walk of its arenas."""
    return ResidentHeap() if os.path.exists(STATM) else sys.getallocatedblocks


class CollectorSchedule:
    def __init__(self, clock: Any, freeze_interval_s: float = FREEZE_INTERVAL_S,
                 full_interval_s: float = FULL_INTERVAL_S):
        self.freeze_interval_s = freeze_interval_s
        self.full_every = max(1, round(full_interval_s / freeze_interval_s))   # in ticks
        self._ticks = self.full_every   # the first tick is a full collection
        self._heap = heap_measure()
        self._base = 0                  # the heap after the last full collection
        self._thresholds = gc.get_threshold()
        self._loop = task.LoopingCall(self._tick)
        self._loop.clock = clock

    def start(self) -> None:
        """The first tick now (what startup built is old already), then on schedule. The
        automatic collections keep their young generations' thresholds; the oldest one is left
        to the ticks."""
        young, middle, _ = self._thresholds
        gc.set_threshold(young, middle, OLDEST_THRESHOLD)
        self._loop.start(self.freeze_interval_s, now=True)

    def stop(self) -> None:
        """Back to CPython's own schedule."""
        if self._loop.running:
            self._loop.stop()
        gc.unfreeze()
        gc.set_threshold(*self._thresholds)
        if isinstance(self._heap, ResidentHeap):
            self._heap.close()

    def _tick(self) -> None:
        self._ticks += 1
        full = self._ticks >= self.full_every or self._heap() > self._base * FULL_GROWTH
        t0 = time.perf_counter()
        if full:
            gc.unfreeze()
        collected = gc.collect()
        gc.freeze()
        if full:
            self._ticks, self._base = 0, self._heap()
            log.debug("full collection: %d objects collected in %.0f ms", collected,
                      (time.perf_counter() - t0) * 1000)
