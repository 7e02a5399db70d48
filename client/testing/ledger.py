"""``DeliveryLedger`` and ``assert_no_loss``: what was acknowledged versus what was consumed.

Invariant: a record is identified by (topic, partition, key, value) — what a consumer sees
of it — so a re-delivery at another offset still counts as the same record. An acknowledged
record missing from the consumed ones is *lost*; one consumed more often than acknowledged is
*duplicated*; within a partition, consumed records whose order differs from their
acknowledged offsets are *reordered*. ``assert_no_loss`` fails listing all three, per
partition; duplicates alone are allowed when ``allow_duplicates`` (at-least-once).
"""
from __future__ import annotations

import threading
from collections import Counter, defaultdict
from typing import Any, Iterable, NamedTuple


class Delivered(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def _b(x: Any) -> bytes | None:
    if x is None or isinstance(x, bytes):
        return x
    return str(x).encode() if not isinstance(x, (bytearray, memoryview)) else bytes(x)


def as_record(obj: Any) -> Delivered:
    """A ``Delivered`` from a confluent-kafka Message, an odradek / kafka-python / aiokafka
    ConsumerRecord, a ``Delivered`` or a (topic, partition, offset, key, value) tuple."""
    if isinstance(obj, Delivered):
        return obj
    if not hasattr(obj, "topic"):  # a plain tuple (a ConsumerRecord may be a named one)
        topic, partition, offset, key, value = obj
        return Delivered(topic, int(partition), int(offset), _b(key), _b(value))
    topic = obj.topic
    if callable(topic):  # confluent-kafka Message
        return Delivered(obj.topic(), obj.partition(), obj.offset(), _b(obj.key()), _b(obj.value()))
    return Delivered(topic, obj.partition, obj.offset, _b(obj.key), _b(obj.value))


class DeliveryLedger:
    """Acknowledged records, recorded from any client's delivery report (thread-safe).

    - confluent-kafka: ``producer.produce(topic, v, on_delivery=ledger.on_delivery)``;
    - odradek or kafka-python: ``ledger.track(producer.send(topic, v, key=k), value=v, key=k)``
      (their futures carry no value, so it is given here);
    - anything else: ``ledger.record(topic, partition, offset, key, value)``.
    Failed deliveries are kept in ``failed`` (they may or may not be in the log)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acked: list[Delivered] = []
        self.failed: list[tuple[Any, Any]] = []

    def record(self, topic: str, partition: int, offset: int, key: Any, value: Any) -> None:
        with self._lock:
            self.acked.append(Delivered(topic, partition, offset, _b(key), _b(value)))

    def on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            with self._lock:
                self.failed.append((err, msg))
        else:
            rec = as_record(msg)
            self.record(*rec)

    def track(self, future: Any, value: Any = None, key: Any = None) -> Any:
        def ok(md: Any) -> None:
            self.record(md.topic, md.partition, md.offset, key, value)

        def failed(exc: Any) -> None:
            with self._lock:
                self.failed.append((exc, value))
        future.add_callback(ok)
        future.add_errback(failed)
        return future

    def __iter__(self):
        with self._lock:
            return iter(list(self.acked))

    def __len__(self) -> int:
        return len(self.acked)


def _show(r: Delivered) -> str:
    return f"offset {r.offset} key={r.key!r} value={r.value!r}"


def loss_report(produced_acks: Iterable[Any], consumed: Iterable[Any], *,
                allow_duplicates: bool = False, limit: int = 10) -> str:
    """The problems found (empty: none), as readable lines per partition."""
    acked = [as_record(r) for r in produced_acks]
    got = [as_record(r) for r in consumed]
    ident = lambda r: (r.topic, r.partition, r.key, r.value)  # noqa: E731
    want, have = Counter(map(ident, acked)), Counter(map(ident, got))
    by_tp: dict[tuple[str, int], list[str]] = defaultdict(list)
    first_offset: dict[tuple[Any, ...], Any] = {}
    for r in acked:
        first_offset.setdefault(ident(r), r)
    for k, n in want.items():
        if have[k] < n:
            by_tp[k[:2]].append(f"lost: {_show(first_offset[k])}" + (f" (x{n - have[k]})" if n - have[k] > 1 else ""))
    if not allow_duplicates:
        for k, n in have.items():
            if want[k] and n > want[k]:
                by_tp[k[:2]].append(f"duplicated: key={k[2]!r} value={k[3]!r} consumed {n} times, acked {want[k]}")
    order: dict[tuple[str, int], list[int]] = defaultdict(list)
    seen: set = set()
    for r in got:
        k = ident(r)
        if k in first_offset and k not in seen:
            seen.add(k)
            order[k[:2]].append(first_offset[k].offset)
    for tp, offsets in order.items():
        bad = [(a, b) for a, b in zip(offsets, offsets[1:]) if b < a]
        if bad:
            by_tp[tp].append("reordered: " + ", ".join(f"offset {b} consumed after {a}" for a, b in bad[:limit]))
    lines = []
    for (topic, p), problems in sorted(by_tp.items()):
        lines.append(f"{topic}-{p}: {len(problems)} problem(s)")
        lines += [f"  {x}" for x in problems[:limit]]
        if len(problems) > limit:
            lines.append(f"  ... and {len(problems) - limit} more")
    return "\n".join(lines)


def assert_no_loss(produced_acks: Iterable[Any], consumed: Iterable[Any], *, allow_duplicates: bool = False) -> None:
    """Fail, with a per-partition diff, if an acknowledged record was not consumed, a record was
    consumed more often than acknowledged (unless ``allow_duplicates``) or out of offset order."""
    acked, got = list(produced_acks), list(consumed)
    report = loss_report(acked, got, allow_duplicates=allow_duplicates)
    if report:
        raise AssertionError(f"{len(acked)} records acknowledged, {len(got)} consumed:\n{report}")
