"""Consumer: kafka-python-like polling with consumer groups (subscribe) or manual assignment.

Invariant: all fetching and group work happens inside the calling thread's
``poll`` / ``position`` / ``commit`` calls (single-threaded, like kafka-python);
only heartbeats run on the coordinator's background thread. A partition
without a position gets, in order: its committed offset (OffsetFetch, when a
group.id is set), else ``auto.offset.reset`` via ListOffsets. With
``subscribe()`` the assignment changes only inside ``poll()``: revoke (after an
auto-commit) before JoinGroup, assign after SyncGroup; positions of a revoked
partition are forgotten. Paused partitions keep their position and are neither
fetched nor returned.

    c = Consumer(bootstrap_servers="127.0.0.1:9092", group_id="billing", auto_offset_reset="earliest")
    c.subscribe(["events"])
    for tp, records in c.poll(timeout_ms=1000).items(): ...
"""
from __future__ import annotations

import logging
import re
import time
from typing import Any, Iterable, Iterator, Mapping

from odradek.protocol.errors import ErrorCode, KafkaError

from .assignors import AbstractAssignor, Assignment, resolve_assignors
from .cluster import ClusterMetadata, NodePool
from .config import ClientConfig, ConfigError
from .coordinator import ConsumerCoordinator
from .list_offsets import list_offsets
from .group_membership import Generation
from .fetcher import Fetcher
from .structs import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    IllegalStateError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)

log = logging.getLogger(__name__)

LATEST = -1
EARLIEST = -2
_client_ids = iter(range(1, 1 << 31))


class ConsumerRebalanceListener:
    """Callbacks around a rebalance (kafka-python / Java names); override what you need."""

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        """Before a rebalance (after the auto-commit): the partitions this member gives up."""

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        """After a rebalance: the partitions this member now owns."""

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        """The membership was lost (session or poll timeout): no commit was possible."""
        self.on_partitions_revoked(lost)


class _PausableFetcher(Fetcher):
    """The fetcher with pause(): paused partitions are hidden from sending and handing out."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.paused: set[TopicPartition] = set()

    def _unpaused(self, fn, *args: Any) -> Any:
        if not self.paused:
            return fn(*args)
        full = self.positions
        self.positions = {tp: pos for tp, pos in full.items() if tp not in self.paused}
        try:
            return fn(*args)
        finally:
            visible, self.positions = self.positions, full
            for tp, pos in visible.items():
                if tp in full:
                    full[tp] = pos

    def send_fetches(self) -> int:
        return self._unpaused(super().send_fetches)

    def fetched_records(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        return self._unpaused(super().fetched_records, max_records)

    def assign(self, tps: list[TopicPartition]) -> None:
        super().assign(tps)
        self.paused &= set(tps)


class _Hooks:
    """The coordinator's view of its consumer (see coordinator.GroupHooks)."""

    def __init__(self, consumer: "Consumer") -> None:
        self.c = consumer

    def subscribed_topics(self) -> list[str]:
        return sorted(self.c._subscription or ())

    def on_join_prepare(self, generation_valid: bool) -> None:
        self.c._on_join_prepare(generation_valid)

    def on_join_complete(self, generation: Generation, assignment: Assignment, assignor: AbstractAssignor) -> None:
        self.c._on_join_complete(assignment)

    def partitions_per_topic(self, topics: set[str]) -> dict[str, int]:
        return self.c._partitions_per_topic(topics)


class Consumer:
    """Fetches records of subscribed (group) or manually assigned partitions."""

    def __init__(self, *topics: Any, config: Mapping[str, Any] | None = None, **configs: Any) -> None:
        if topics and isinstance(topics[0], Mapping):  # Consumer({"bootstrap.servers": ...})
            config, topics = topics[0], topics[1:]
        self.config = cfg = ClientConfig("consumer", config, **configs)
        if cfg["client.id"] is None:
            cfg._values["client.id"] = f"odradek-consumer-{next(_client_ids)}"
        try:
            self._assignors = resolve_assignors(cfg["partition.assignment.strategy"])
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self._group_id: str | None = cfg["group.id"] or None
        self._cluster = ClusterMetadata(cfg)
        self._pool = NodePool(self._cluster)
        self._fetcher = _PausableFetcher(cfg, self._cluster, self._pool)
        self._assignment: list[TopicPartition] = []
        self._iter_buffer: list[ConsumerRecord] = []
        self._closed = False
        self._coordinator: ConsumerCoordinator | None = None
        self._subscription: set[str] | None = None  # subscribed topics (pattern: the matched ones)
        self._pattern: re.Pattern[str] | None = None
        self._pattern_refreshed = 0.0
        self._listener: Any = None
        self._user_assigned = False
        self._next_auto_commit = time.monotonic() + cfg["auto.commit.interval.ms"] / 1000.0
        self._seen_updates = -1
        if topics:
            topics = tuple(t for ts in topics for t in ([ts] if isinstance(ts, str) else ts))
            if self._group_id:
                self.subscribe(list(topics))
            else:  # kafka-python's Consumer(*topics) without a group: all partitions of the topics
                self.assign([TopicPartition(t, p) for t in topics for p in self._partitions_or_raise(t)])

    # -- metadata ----------------------------------------------------------------------

    def _partitions_or_raise(self, topic: str) -> list[int]:
        return self._cluster.wait_for_topic(topic, self.config["request.timeout.ms"] / 1000.0)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """Partition ids of ``topic``, or None if it does not exist (never auto-creates)."""
        self._cluster.refresh([topic], allow_auto_create=False)
        parts = self._cluster.partitions_for(topic)
        return set(parts) if parts else None

    def topics(self) -> set[str]:
        self._cluster.refresh(all_topics=True, allow_auto_create=False)
        return {t for t, tm in self._cluster.topics.items() if tm.error == ErrorCode.NONE}

    # -- subscription and assignment ------------------------------------------------------

    def _group(self, what: str) -> ConsumerCoordinator:
        if not self._group_id:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, f"{what} needs a group_id")
        if self._coordinator is None:
            self._coordinator = ConsumerCoordinator(self.config, self._cluster, self._pool, self._assignors,
                                                    _Hooks(self))
        return self._coordinator

    def subscribe(self, topics: Iterable[str] | str = (), pattern: str | re.Pattern[str] | None = None,
                  listener: Any = None) -> None:
        """Join ``group_id`` for ``topics`` or every topic matching ``pattern`` (a full-match regex)."""
        if self._user_assigned:
            raise IllegalStateError("subscribe() and assign() are mutually exclusive (call unsubscribe() first)")
        if isinstance(topics, str):
            topics = [topics]
        topics = list(topics)
        if topics and pattern is not None:
            raise ValueError("give topics or a pattern, not both")
        if not topics and pattern is None:
            self.unsubscribe()
            return
        coordinator = self._group("subscribe()")
        self._listener = listener
        if pattern is not None:
            self._pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            self._pattern_refreshed = 0.0
            new = set(self._subscription or ()) if self._subscription is not None else set()
        else:
            self._pattern = None
            new = set(topics)
        if new != self._subscription:
            self._subscription = new
            coordinator.request_rejoin()
        for t in new:
            self._cluster.add_topic(t)

    def subscription(self) -> set[str] | None:
        return None if self._subscription is None else set(self._subscription)

    def unsubscribe(self) -> None:
        """Leave the group (revoking through the listener) or drop a manual assignment."""
        if self._subscription is not None and self._coordinator is not None:
            self._call_listener("on_partitions_revoked", list(self._assignment))
            self._coordinator.maybe_leave_group("the consumer unsubscribed")
        self._subscription, self._pattern, self._listener = None, None, None
        self._user_assigned = False
        self._set_assignment([])

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        if self._subscription is not None:
            raise IllegalStateError("subscribe() and assign() are mutually exclusive (call unsubscribe() first)")
        tps = [TopicPartition(*tp) for tp in partitions]
        self._user_assigned = bool(tps)
        self._set_assignment(tps)

    def _set_assignment(self, tps: list[TopicPartition]) -> None:
        self._assignment = list(dict.fromkeys(tps))
        self._fetcher.assign(self._assignment)
        for tp in self._assignment:
            self._cluster.add_topic(tp.topic)

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching ``partitions`` (their positions are kept) until resume()."""
        for tp in partitions:
            self._check_assigned(TopicPartition(*tp))
        self._fetcher.paused.update(TopicPartition(*tp) for tp in partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._fetcher.paused.difference_update(TopicPartition(*tp) for tp in partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._fetcher.paused)

    # -- group callbacks (called from the coordinator inside poll) -------------------------

    def _call_listener(self, method: str, tps: list[TopicPartition]) -> None:
        fn = getattr(self._listener, method, None)
        if fn is None:
            return
        try:
            fn(list(tps))
        except Exception:  # kafka-python logs listener errors and carries on
            log.exception("rebalance listener %s failed", method)

    def _on_join_prepare(self, generation_valid: bool) -> None:
        if generation_valid and self.config["enable.auto.commit"]:
            try:
                self.commit()
            except KafkaError as exc:
                log.warning("group %s: auto-commit before rebalance failed: %s", self._group_id, exc)
        if generation_valid:
            self._call_listener("on_partitions_revoked", list(self._assignment))
        elif self._assignment:  # the generation was reset: nothing could be committed
            self._call_listener("on_partitions_lost", list(self._assignment))
        self._set_assignment([])
        self._maybe_refresh_pattern(force=True)

    def _on_join_complete(self, assignment: Assignment) -> None:
        subscribed = self._subscription or set()
        tps = [tp for tp in assignment.partitions if tp.topic in subscribed]
        if len(tps) != len(assignment.partitions):
            log.warning("group %s: ignoring assigned partitions of unsubscribed topics", self._group_id)
        self._set_assignment(tps)
        self._next_auto_commit = time.monotonic() + self.config["auto.commit.interval.ms"] / 1000.0
        self._call_listener("on_partitions_assigned", tps)

    def _partitions_per_topic(self, topics: set[str]) -> dict[str, int]:
        for t in topics:
            self._cluster.add_topic(t)
        try:
            self._cluster.refresh(sorted(topics), allow_auto_create=self.config["allow.auto.create.topics"])
        except KafkaError as exc:
            log.warning("metadata refresh for the assignment failed: %s", exc)
        return {t: len(ps) for t in topics if (ps := self._cluster.partitions_for(t))}

    def _maybe_refresh_pattern(self, force: bool = False) -> None:
        if self._pattern is None:
            return
        now = time.monotonic()
        if not force and (now - self._pattern_refreshed) * 1000 < self.config["metadata.max.age.ms"]:
            return
        self._pattern_refreshed = now
        try:
            self._cluster.refresh(all_topics=True, allow_auto_create=False)
        except KafkaError as exc:
            log.warning("metadata refresh for pattern subscription failed: %s", exc)
            return
        exclude = self.config["exclude.internal.topics"]
        matched = {t for t, tm in self._cluster.topics.items()
                   if tm.error == ErrorCode.NONE and not (exclude and tm.is_internal) and self._pattern.fullmatch(t)}
        if matched != self._subscription:
            log.info("pattern subscription now matches %s", sorted(matched))
            self._subscription = matched
            for t in matched:
                self._cluster.add_topic(t)
            if self._coordinator is not None:
                self._coordinator.request_rejoin()

    def _check_metadata_changes(self) -> None:
        """The leader rejoins when a group topic's partition count changed."""
        coordinator = self._coordinator
        if coordinator is None or self._cluster.updates == self._seen_updates:
            return
        self._seen_updates = self._cluster.updates
        if coordinator.is_leader and coordinator.stable():
            for topic, count in coordinator.leader_snapshot.items():
                now = self._cluster.partitions_for(topic)
                if now and len(now) != count:
                    log.info("partition count of %s changed (%s -> %s); rebalancing", topic, count, len(now))
                    coordinator.request_rejoin()
                    return

    # -- positions ------------------------------------------------------------------------

    def _check_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._fetcher.positions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} is not assigned to this consumer")

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._check_assigned(partition)
        if offset < 0:
            raise ValueError("offset must be >= 0")
        self._fetcher.seek(partition, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or self._assignment:
            self._check_assigned(tp)
            self._fetcher.seek(tp, None)  # type: ignore[arg-type]
            self._fetcher.pending_reset[tp] = "earliest"

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or self._assignment:
            self._check_assigned(tp)
            self._fetcher.seek(tp, None)  # type: ignore[arg-type]
            self._fetcher.pending_reset[tp] = "latest"

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record to be returned (resolving committed offsets / resets if needed)."""
        self._check_assigned(partition)
        self._update_positions()
        pos = self._fetcher.positions.get(partition)
        if pos is None:
            raise KafkaTimeoutError(f"no position for {partition}")
        return pos

    def highwater(self, partition: TopicPartition) -> int | None:
        return self._fetcher.high_watermarks.get(partition)

    def _update_positions(self) -> None:
        f = self._fetcher
        missing = [tp for tp, pos in f.positions.items() if pos is None]
        if not missing:
            return
        if self._group_id:
            initializing = [tp for tp in missing if tp not in f.pending_reset]
            committed = self._group("committed offsets").fetch_committed(
                initializing, self.config["request.timeout.ms"] / 1000.0) if initializing else {}
            for tp, om in committed.items():
                if om is not None and tp in f.positions and f.positions[tp] is None:
                    f.seek(tp, om.offset)
            missing = [tp for tp, pos in f.positions.items() if pos is None]
        targets: dict[TopicPartition, int] = {}
        undefined = []
        for tp in missing:
            strategy = f.pending_reset.get(tp) or self.config["auto.offset.reset"]
            if strategy == "none":
                undefined.append(tp)
            targets[tp] = EARLIEST if strategy == "earliest" else LATEST
        if undefined:
            raise NoOffsetForPartitionError(undefined)
        offsets = self._list_offsets(targets)
        for tp, (offset, _ts) in offsets.items():
            if f.pending_reset.get(tp) is not None or f.positions.get(tp) is None:
                f.seek(tp, offset)

    # -- commits ----------------------------------------------------------------------------

    def _consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(pos) for tp, pos in self._fetcher.positions.items() if pos is not None}

    @staticmethod
    def _normalize(offsets: Mapping[TopicPartition, Any]) -> dict[TopicPartition, OffsetAndMetadata]:
        out = {}
        for tp, v in offsets.items():
            if isinstance(v, OffsetAndMetadata):
                om = v
            elif isinstance(v, int):
                om = OffsetAndMetadata(v)
            else:  # (offset, metadata[, leader_epoch]) or kafka-python's OffsetAndMetadata
                om = OffsetAndMetadata(*tuple(v)[:3])
            out[TopicPartition(*tp)] = OffsetAndMetadata(int(om.offset), om.metadata or "",
                                                         -1 if om.leader_epoch is None else om.leader_epoch)
        return out

    def commit(self, offsets: Mapping[TopicPartition, Any] | None = None) -> None:
        """Commit ``offsets`` ({tp: offset | OffsetAndMetadata}; default: the consumed positions), blocking."""
        coordinator = self._group("commit()")
        todo = self._consumed() if offsets is None else self._normalize(offsets)
        coordinator.commit_sync(todo, self._subscription is not None,
                                self.config["default.api.timeout.ms"] / 1000.0)

    def commit_async(self, offsets: Mapping[TopicPartition, Any] | None = None, callback: Any = None) -> None:
        """Send a commit; ``callback(offsets, exception_or_None)`` runs during a later poll()/commit()/close()."""
        coordinator = self._group("commit_async()")
        todo = self._consumed() if offsets is None else self._normalize(offsets)
        coordinator.commit_async(todo, self._subscription is not None, callback)

    def committed(self, partition: TopicPartition, metadata: bool = False) -> int | OffsetAndMetadata | None:
        """The group's committed offset of ``partition`` (None when nothing is committed)."""
        coordinator = self._group("committed()")
        tp = TopicPartition(*partition)
        om = coordinator.fetch_committed([tp], self.config["default.api.timeout.ms"] / 1000.0).get(tp)
        if om is None:
            return None
        return om if metadata else om.offset

    def _maybe_auto_commit(self) -> None:
        if not (self._group_id and self.config["enable.auto.commit"]):
            return
        now = time.monotonic()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.config["auto.commit.interval.ms"] / 1000.0
        if self._subscription is not None:
            if self._coordinator is None or not self._coordinator.stable():
                return
        elif not self._user_assigned:
            return
        offsets = self._consumed()
        if offsets:
            self._group("auto-commit").commit_async(offsets, self._subscription is not None, None)

    # -- ListOffsets ---------------------------------------------------------------------

    def _list_offsets(self, targets: Mapping[TopicPartition, int], timeout: float | None = None
                      ) -> dict[TopicPartition, tuple[int, int]]:
        """{tp: (offset, timestamp)} for ListOffsets targets (-1 latest, -2 earliest, or a timestamp)."""
        timeout = self.config["request.timeout.ms"] / 1000.0 if timeout is None else timeout
        isolation = 1 if self.config["isolation.level"] == "read_committed" else 0
        return list_offsets(self._cluster, self._pool, targets, isolation, timeout,
                            self.config["retry.backoff.ms"] / 1000.0)

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: o for tp, (o, _) in self._list_offsets({TopicPartition(*tp): EARLIEST for tp in partitions}).items()}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: o for tp, (o, _) in self._list_offsets({TopicPartition(*tp): LATEST for tp in partitions}).items()}

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Earliest offset whose timestamp >= the given one (None when there is none)."""
        for ts in timestamps.values():
            if ts < 0:
                raise ValueError("timestamps must be >= 0")
        res = self._list_offsets({TopicPartition(*tp): int(ts) for tp, ts in timestamps.items()})
        return {tp: (OffsetAndTimestamp(o, ts) if o >= 0 else None) for tp, (o, ts) in res.items()}

    # -- polling ---------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0, max_records: int | None = None,
             update_offsets: bool = True) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records fetched from the assigned partitions, waiting up to ``timeout_ms`` for some."""
        if self._closed:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "consumer is closed")
        max_records = max_records or self.config["max.poll.records"]
        deadline = time.monotonic() + timeout_ms / 1000.0
        fetcher = self._fetcher
        while True:
            self._maybe_refresh_pattern()
            self._cluster.maybe_refresh()
            if self._subscription is not None:
                self._check_metadata_changes()
                if not self._group("subscribe()").poll(deadline):
                    return {}  # still joining when the timeout ran out
            elif self._coordinator is not None:
                self._coordinator.poll_io()
            self._maybe_auto_commit()
            self._update_positions()
            records = fetcher.fetched_records(max_records)
            fetcher.send_fetches()  # prefetch while the caller works
            if records:
                return records
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {}
            if not self._assignment:
                time.sleep(min(remaining, 0.1))
                continue
            fetcher.wait(min(remaining, 1.0) if fetcher.in_flight() else min(remaining, 0.05))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        """Next record, blocking; StopIteration after consumer_timeout_ms without records."""
        if self._iter_buffer:
            return self._iter_buffer.pop()
        timeout = self.config["consumer.timeout.ms"]
        deadline = time.monotonic() + timeout / 1000.0 if timeout != float("inf") else None
        while True:
            wait_ms = 1000 if deadline is None else max(0, min(1000, (deadline - time.monotonic()) * 1000))
            batch = self.poll(timeout_ms=int(wait_ms))
            if batch:
                recs = [r for rs in batch.values() for r in rs]
                recs.reverse()
                self._iter_buffer = recs
                return self._iter_buffer.pop()
            if deadline is not None and time.monotonic() >= deadline:
                raise StopIteration

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Group id, generation, member id and group.instance.id, for
        ``Producer.send_offsets_to_transaction`` (the group then rejects offsets of a stale generation)."""
        if not self._group_id:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "group_metadata() needs a group_id")
        coordinator = self._coordinator
        if coordinator is None or self._subscription is None:
            return ConsumerGroupMetadata(self._group_id, -1, "", self.config["group.instance.id"])
        with coordinator._lock:
            generation = coordinator.generation
        return ConsumerGroupMetadata(self._group_id, generation.generation_id, generation.member_id,
                                     coordinator.group_instance_id)

    def fetch_stats(self) -> tuple[float, int]:
        """(seconds spent waiting on fetch responses, bytes fetched) — for the perf tool."""
        return self._fetcher.fetch_time, self._fetcher.bytes_fetched

    def close(self, autocommit: bool = True) -> None:
        """Commit (if auto-commit and ``autocommit``), revoke, leave the group and close connections."""
        if self._closed:
            return
        self._closed = True
        coordinator = self._coordinator
        if coordinator is not None:
            try:
                if autocommit and self.config["enable.auto.commit"] and self._assignment and (
                        self._user_assigned or coordinator.stable()):
                    try:
                        self.commit()
                    except KafkaError as exc:
                        log.warning("group %s: commit on close failed: %s", self._group_id, exc)
                coordinator.flush_async(self.config["request.timeout.ms"] / 1000.0)
                if self._subscription is not None:
                    self._call_listener("on_partitions_revoked", list(self._assignment))
                    coordinator.maybe_leave_group("the consumer is being closed")
            finally:
                coordinator.close()
        self._fetcher.close()
        self._pool.close()
        self._cluster.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
