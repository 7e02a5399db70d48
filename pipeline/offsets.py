"""Driver-side offset planning for the ``odradek`` source: which partitions, from where, to where.

Invariant: the offsets this module hands to Spark only ever move forward for a
partition it already tracks, and every partition in ``start`` is carried into
``end`` (a partition whose leader is away keeps its offset until it is back), so
no range is skipped and none is read twice. Ranges are half-open ``[start, end)``.
Network calls go through one ``OffsetPlanner`` owning its clients; the planning
arithmetic (``limit_offsets``) is pure.
"""
from __future__ import annotations

import logging
from typing import Any

from odradek.client import AdminClient, Consumer, KafkaError, TopicPartition
from odradek.protocol.errors import ErrorCode

from .options import EARLIEST, LATEST, OffsetMap, OptionError, ReadOptions

log = logging.getLogger("odradek.pipeline")


class DataLossError(RuntimeError):
    """Offsets Spark still had to read are gone (retention, deleted topic) and failOnDataLoss=true."""


def data_loss(opts: ReadOptions, message: str) -> None:
    """Raise (failOnDataLoss=true) or log a warning (false)."""
    if opts.fail_on_data_loss:
        raise DataLossError(message + ". Set failOnDataLoss=false to skip lost records and go on.")
    log.warning("%s; failOnDataLoss=false, skipping ahead", message)


def to_tps(offsets: OffsetMap) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): o for t, ps in offsets.items() for p, o in ps.items()}


def to_map(offsets: dict[TopicPartition, int]) -> OffsetMap:
    out: OffsetMap = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def limit_offsets(start: dict[TopicPartition, int], latest: dict[TopicPartition, int],
                  max_rows: int | None) -> dict[TopicPartition, int]:
    """End offsets reading at most ``max_rows`` records, shared out by each partition's lag (as Spark's).

    ``start`` must hold a concrete offset for every partition of ``latest``; a partition
    whose latest offset is below its start (already reported as data loss) ends at latest.
    """
    lags = {tp: max(0, o - start[tp]) for tp, o in latest.items()}
    total = sum(lags.values())
    if max_rows is None or total <= max_rows:
        return dict(latest)
    out = {tp: (start[tp] if lags[tp] else latest[tp]) for tp in latest}
    given = 0
    for tp in sorted(lags):
        share = lags[tp] * max_rows // total
        out[tp] += share
        given += share
    # hand out the rounding remainder one record at a time, biggest lag first
    for tp in sorted(lags, key=lambda t: (-lags[t], t)):
        if given >= max_rows:
            break
        if out[tp] < latest[tp]:
            out[tp] += 1
            given += 1
    return out


class OffsetPlanner:
    """Topic discovery and ListOffsets for a subscription, for the driver (lazy clients)."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._admin: AdminClient | None = None
        self._consumer: Consumer | None = None

    def _settings(self) -> dict[str, Any]:
        s = dict(self.opts.consumer)
        s.setdefault("request.timeout.ms", 15000)
        return s

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            s = self._settings()
            self._admin = AdminClient(bootstrap_servers=s["bootstrap.servers"],
                                      request_timeout_ms=s["request.timeout.ms"])
        return self._admin

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(**{k: v for k, v in self._settings().items()},
                                      auto_offset_reset="none", enable_auto_commit=False)
        return self._consumer

    def close(self) -> None:
        for client in (self._consumer, self._admin):
            if client is not None:
                try:
                    client.close()
                except Exception:  # closing is best effort
                    pass
        self._admin = self._consumer = None

    # -- discovery ---------------------------------------------------------------------

    def partitions(self) -> tuple[set[TopicPartition], set[TopicPartition], set[str]]:
        """(all partitions of the subscription, those with a live leader, topics known to exist)."""
        sub = self.opts.subscription
        if sub.kind == "subscribe":
            names = list(sub.topics)
        elif sub.kind == "assign":
            names = sorted({t for t, _ in sub.assigned})
        else:
            names = [t for t in self.admin.list_topics() if sub.matches(t)]
        every: set[TopicPartition] = set()
        live: set[TopicPartition] = set()
        existing: set[str] = set()
        if not names:
            return every, live, existing
        for t in self.admin.describe_topics(names):
            if t["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or not t["partitions"]:
                continue
            existing.add(t["topic"])
            for p in t["partitions"]:
                tp = TopicPartition(t["topic"], p["partition"])
                if sub.kind == "assign" and (tp.topic, tp.partition) not in sub.assigned:
                    continue
                every.add(tp)
                if p["leader"] >= 0:
                    live.add(tp)
        return every, live, existing

    def list_offsets(self, tps: set[TopicPartition], which: int) -> dict[TopicPartition, int]:
        """Earliest (-2) or latest (-1) offsets; {} for partitions that did not answer in time."""
        if not tps:
            return {}
        fn = self.consumer.beginning_offsets if which == EARLIEST else self.consumer.end_offsets
        try:
            return fn(sorted(tps))
        except KafkaError as exc:
            if not exc.retriable:
                raise
        out: dict[TopicPartition, int] = {}
        for tp in sorted(tps):  # one at a time, so one unavailable partition holds back only itself
            try:
                out.update(fn([tp]))
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                log.warning("no offsets for %s-%s yet (%s); trying again next trigger", tp.topic, tp.partition, exc)
        return out

    # -- resolving option specs -----------------------------------------------------------

    def resolve(self, spec: str | OffsetMap, live: set[TopicPartition], default: int,
                name: str) -> dict[TopicPartition, int]:
        """Concrete offsets for ``spec`` over the ``live`` partitions (-2/-1 entries looked up).

        Partitions the JSON does not name get ``default`` (-2 earliest, -1 latest).
        """
        if isinstance(spec, str):
            which = EARLIEST if spec == "earliest" else LATEST
            return self.list_offsets(live, which)
        wanted = to_tps(spec)
        missing = [tp for tp in wanted if tp not in live]
        if missing:
            raise OptionError(f"option {name} names partitions that are not available: "
                              f"{', '.join(f'{t}-{p}' for t, p in sorted(missing))}")
        out = {tp: o for tp, o in wanted.items() if o >= 0}
        out.update(self.list_offsets({tp for tp, o in wanted.items() if o == EARLIEST}, EARLIEST))
        out.update(self.list_offsets({tp for tp, o in wanted.items() if o == LATEST}, LATEST))
        out.update(self.list_offsets(live - set(wanted), default))  # partitions the JSON does not name
        return out
