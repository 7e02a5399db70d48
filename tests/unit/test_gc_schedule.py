"""The broker's cycle-collector schedule: new objects collected and the survivors frozen at each
tick, a cycle among frozen objects reclaimed by the periodic full collection, CPython's own
schedule back after stop()."""
from __future__ import annotations

import gc
import mmap
import sys
import weakref

import pytest
from twisted.internet.task import Clock

from odradek.broker import gc_schedule
from odradek.broker.gc_schedule import OLDEST_THRESHOLD, CollectorSchedule, ResidentHeap


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> tuple[Node, weakref.ref]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a, weakref.ref(b)


@pytest.fixture
def collector():
    """Only the ticks collect; CPython's schedule and state are back afterwards."""
    before, was = gc.get_threshold(), gc.isenabled()
    made: list[CollectorSchedule] = []

    def make(full_interval_s: float) -> tuple[CollectorSchedule, Clock]:
        clock = Clock()
        made.append(CollectorSchedule(clock, freeze_interval_s=1.0, full_interval_s=full_interval_s))
        return made[-1], clock
    gc.disable()
    yield make
    for s in made:
        s.stop()
    if was:
        gc.enable()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before


def test_a_tick_collects_what_is_new_and_freezes_what_lives(collector):
    s, clock = collector(full_interval_s=3.0)   # a full collection every third tick
    dead, dead_ref = cycle()
    del dead
    s.start()                                   # the first tick, at once (a full one)
    assert dead_ref() is None                   # garbage made before a tick: collected
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold()[2] == OLDEST_THRESHOLD
    alive, alive_ref = cycle()
    clock.advance(1.0)                          # the cycle is alive at this tick: frozen
    del alive
    gc.collect()                                # a collection leaves frozen objects alone
    clock.advance(1.0)                          # a tick that is not a full one, too
    assert alive_ref() is not None
    clock.advance(1.0)                          # the third: a full collection
    assert alive_ref() is None


def test_a_heap_grown_by_a_quarter_gets_a_full_collection(collector):
    s, clock = collector(full_interval_s=1000.0)
    s.start()
    alive, alive_ref = cycle()
    clock.advance(1.0)                          # frozen
    del alive
    clock.advance(1.0)                          # the heap as it was: no full collection
    assert alive_ref() is not None
    heap = ResidentHeap()
    grown = b"x" * (heap() * mmap.PAGESIZE // 3)   # a third more resident memory
    heap.close()
    clock.advance(1.0)                          # the heap grew by more than a quarter
    assert alive_ref() is None and grown


def test_the_heap_is_the_anonymous_resident_memory_the_kernel_reports():
    heap = ResidentHeap()                       # one descriptor, read again at each call
    before = heap()
    grown = b"x" * (64 << 20)
    assert heap() - before >= (64 << 20) // mmap.PAGESIZE * 0.95
    del grown
    assert heap() - before < (64 << 20) // mmap.PAGESIZE * 0.5   # a freed large buffer leaves
    heap.close()
    heap.close()                                # once closed, closing again closes nothing else


def test_without_the_kernels_report_the_heap_is_the_interpreters_allocated_blocks(collector, monkeypatch):
    monkeypatch.setattr(gc_schedule, "STATM", "/nonexistent/statm")
    assert gc_schedule.heap_measure() is sys.getallocatedblocks
    s, clock = collector(full_interval_s=1000.0)
    s.start()
    alive, alive_ref = cycle()
    clock.advance(1.0)                          # frozen
    del alive
    grown = [[] for _ in range(sys.getallocatedblocks() // 3)]   # a third more blocks
    clock.advance(1.0)
    assert alive_ref() is None and grown
