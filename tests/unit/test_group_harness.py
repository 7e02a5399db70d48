"""Test doubles for the group coordinator: a fake timer and a fake __consumer_offsets log.

Imported by the other test_group_* modules (``from test_group_harness import ...``);
its own tests check the doubles themselves.
"""
from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable

from odradek.broker.completion import Completion
from odradek.broker.group import AppendResult, GroupConfig, GroupCoordinator
from odradek.protocol.control_records import build_control_batch
from odradek.protocol.errors import ErrorCode
from odradek.protocol.group_records import decode_record
from odradek.protocol.record_batch import HEADER_SIZE, parse_header, set_base_offset
from odradek.protocol.records import iter_records


class _Handle:
    __slots__ = ("deadline", "callback", "cancelled")

    def __init__(self, deadline: int, callback: Callable[[], None]):
        self.deadline, self.callback, self.cancelled = deadline, callback, False


class FakeTimer:
    """A Timer whose clock only moves on ``advance``; callbacks fire in deadline order."""

    def __init__(self, now_ms: int = 1_600_000_000_000):
        self.now = now_ms
        self._queue: list[tuple[int, int, _Handle]] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self.now

    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> _Handle:
        handle = _Handle(self.now + max(delay_ms, 0), callback)
        heapq.heappush(self._queue, (handle.deadline, next(self._seq), handle))
        return handle

    def cancel(self, handle: Any) -> None:
        if handle is not None:
            handle.cancelled = True

    def pending(self) -> int:
        return sum(1 for _, _, h in self._queue if not h.cancelled)

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while self._queue and self._queue[0][0] <= target:
            deadline, _, handle = heapq.heappop(self._queue)
            if handle.cancelled:
                continue
            self.now = deadline
            handle.cancelled = True
            handle.callback()
        self.now = target


class FakeLog:
    """The injected ``append``: keeps every batch per partition, giving it the next log
    offsets (as the leader's log would); completes at once with ``error`` unless
    ``manual`` (then ``release()`` completes the parked appends, in order)."""

    def __init__(self) -> None:
        self.batches: dict[int, list[bytes]] = {}
        self.error = ErrorCode.NONE
        self.manual = False
        self.parked: list[tuple[Completion[AppendResult], int, bytes]] = []

    def __call__(self, partition: int, batch: bytes) -> Completion[AppendResult]:
        done: Completion[AppendResult] = Completion()
        if self.manual:
            self.parked.append((done, partition, batch))
        elif self.error != ErrorCode.NONE:
            done.complete(AppendResult(self.error))
        else:
            done.complete(AppendResult(ErrorCode.NONE, self._store(partition, batch)))
        return done

    def _store(self, partition: int, batch: bytes) -> int:
        """Append with the next offsets; returns the batch's base offset."""
        batches = self.batches.setdefault(partition, [])
        base = self.end_offset(partition)
        if len(batch) >= HEADER_SIZE:
            buf = bytearray(batch)
            set_base_offset(buf, 0, base)
            batch = bytes(buf)
        batches.append(batch)
        return base

    def end_offset(self, partition: int) -> int:
        batches = self.batches.get(partition, [])
        return parse_header(batches[-1]).next_offset if batches else 0

    def release(self, error: ErrorCode = ErrorCode.NONE, count: int | None = None) -> None:
        """Complete the first ``count`` parked appends (all by default) with ``error``."""
        n = len(self.parked) if count is None else count
        parked, self.parked = self.parked[:n], self.parked[n:]
        for done, partition, batch in parked:
            if error == ErrorCode.NONE:
                done.complete(AppendResult(error, self._store(partition, batch)))
            else:
                done.complete(AppendResult(error))

    def marker(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
               coordinator_epoch: int = 0) -> int:
        """Append a transaction marker (what WriteTxnMarkers writes); its offset."""
        return self._store(partition, build_control_batch(
            producer_id, producer_epoch, commit, coordinator_epoch, 0))

    def records(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        return [(r.key, r.value) for b in self.batches.get(partition, [])
                for r in iter_records(b)]

    def decoded(self, partition: int) -> list[tuple[Any, Any]]:
        return [decode_record(k, v) for k, v in self.records(partition)]

    def blob(self, partition: int) -> bytes:
        return b"".join(self.batches.get(partition, []))


def make_coordinator(partitions: range | list[int] | None = None, **config: Any
                     ) -> tuple[GroupCoordinator, FakeTimer, FakeLog]:
    """A started coordinator owning ``partitions`` (all by default), no initial delay."""
    config.setdefault("initial_rebalance_delay_ms", 0)
    cfg = GroupConfig(**config)
    timer, log = FakeTimer(), FakeLog()
    coord = GroupCoordinator(cfg, timer, log)
    coord.startup(periodic_expiry=False)
    for p in (range(cfg.offsets_partitions) if partitions is None else partitions):
        coord.load_partition(p, [])
    return coord, timer, log


PROTOS = [("range", b"range-meta"), ("roundrobin", b"rr-meta")]


def join(coord: GroupCoordinator, group: str = "g", member_id: str = "", *,
         protocols: list[tuple[str, bytes]] | None = None, session_ms: int = 10_000,
         rebalance_ms: int = 30_000, instance_id: str | None = None,
         client_id: str = "client", protocol_type: str = "consumer",
         require_known: bool = False):
    return coord.handle_join_group(group, member_id, instance_id, client_id, "/127.0.0.1",
                                   session_ms, rebalance_ms, protocol_type,
                                   PROTOS if protocols is None else protocols, require_known)


# --- the doubles' own tests ---------------------------------------------------------

def test_fake_timer_orders_and_cancels():
    timer, fired = FakeTimer(0), []
    timer.schedule(20, lambda: fired.append(("b", timer.now)))
    h = timer.schedule(10, lambda: fired.append("cancelled"))
    timer.schedule(10, lambda: timer.schedule(5, lambda: fired.append(("c", timer.now))))
    timer.cancel(h)
    timer.advance(30)
    assert fired == [("c", 15), ("b", 20)] and timer.now == 30 and timer.pending() == 0


def test_fake_log_manual_release():
    log = FakeLog()
    log.manual = True
    results = []
    log(3, b"x").add_callback(results.append)
    assert results == [] and log.batches == {}
    log.release(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert results == [AppendResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)] and log.batches == {}


def test_completion_contract():
    c: Completion[int] = Completion()
    seen = []
    c.add_callback(seen.append)
    assert not c.done
    c.complete(4)
    c.add_callback(lambda v: seen.append(v * 10))
    assert seen == [4, 40] and c.result == 4
    try:
        c.complete(5)
    except RuntimeError:
        pass
    else:
        raise AssertionError("double completion accepted")


def test_call_later_timer_over_twisted_clock():
    from twisted.internet.task import Clock

    from odradek.broker.group import CallLaterTimer
    clock = Clock()
    timer = CallLaterTimer(clock, clock=clock.seconds)
    fired = []
    timer.schedule(1500, lambda: fired.append(timer.now_ms()))
    h = timer.schedule(1000, lambda: fired.append("cancelled"))
    timer.cancel(h)
    timer.cancel(h)                     # cancelling twice is harmless
    clock.advance(1.5)
    assert fired == [1500]
    clock.advance(1)
    assert fired == [1500]


def test_group_config_from_kafka_config():
    from odradek.broker.config.kafka_config import KafkaConfig
    cfg = KafkaConfig({"broker.id": 0, "zookeeper.connect": "x:2181",
                       "offsets.retention.minutes": 2, "group.max.size": 7})
    group_cfg = GroupConfig.from_kafka_config(cfg)
    assert group_cfg.offsets_retention_ms == 120_000 and group_cfg.max_size == 7
    assert group_cfg.initial_rebalance_delay_ms == 3000
    assert group_cfg.offsets_partitions == 50 and group_cfg.offset_metadata_max_bytes == 4096
