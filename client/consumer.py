"""Consumer (manual assignment, no groups yet): kafka-python-like poll/iterate over assigned partitions.

Invariant: all network I/O happens inside the calling thread's ``poll`` /
``position`` / offset-lookup calls (single-threaded, like kafka-python); a
partition without a position gets one from ``auto.offset.reset`` via
ListOffsets before it is fetched. Leader changes, NOT_LEADER and lost
connections lead to a metadata refresh and fetching continues from the same
position.

    c = Consumer(bootstrap_servers="127.0.0.1:9092", auto_offset_reset="earliest")
    c.assign([TopicPartition("events", 0)])
    for tp, records in c.poll(timeout_ms=1000).items(): ...
"""
from __future__ import annotations

import time
from typing import Any, Iterable, Iterator, Mapping

from odradek.protocol.apis import list_offsets as _list_offsets
from odradek.protocol.errors import ErrorCode, KafkaError

from .cluster import ClusterMetadata, NodePool
from .config import ClientConfig
from .fetcher import Fetcher
from .structs import ConsumerRecord, KafkaTimeoutError, OffsetAndTimestamp, TopicPartition

LATEST = -1
EARLIEST = -2
_client_ids = iter(range(1, 1 << 31))


class Consumer:
    """Fetches records of manually assigned partitions."""

    def __init__(self, *topics: Any, config: Mapping[str, Any] | None = None, **configs: Any) -> None:
        if topics and isinstance(topics[0], Mapping):  # Consumer({"bootstrap.servers": ...})
            config, topics = topics[0], topics[1:]
        self.config = cfg = ClientConfig("consumer", config, **configs)
        if cfg["client.id"] is None:
            cfg._values["client.id"] = f"odradek-consumer-{next(_client_ids)}"
        self._cluster = ClusterMetadata(cfg)
        self._pool = NodePool(self._cluster)
        self._fetcher = Fetcher(cfg, self._cluster, self._pool)
        self._assignment: list[TopicPartition] = []
        self._iter_buffer: list[ConsumerRecord] = []
        self._closed = False
        if topics:  # kafka-python's Consumer(*topics): without groups, assign all their partitions
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

    # -- assignment and positions -------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        tps = [TopicPartition(*tp) for tp in partitions]
        self._assignment = list(dict.fromkeys(tps))
        self._fetcher.assign(self._assignment)
        for tp in self._assignment:
            self._cluster.add_topic(tp.topic)

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def unsubscribe(self) -> None:
        self.assign([])

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
        """The offset of the next record to be returned (resolving a reset if needed)."""
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
        targets: dict[TopicPartition, int] = {}
        for tp in missing:
            strategy = f.pending_reset.get(tp) or self.config["auto.offset.reset"]
            if strategy == "none":
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"no offset for {tp} and auto.offset.reset=none")
            targets[tp] = EARLIEST if strategy == "earliest" else LATEST
        offsets = self._list_offsets(targets)
        for tp, (offset, _ts) in offsets.items():
            if f.pending_reset.get(tp) is not None or f.positions.get(tp) is None:
                f.seek(tp, offset)

    # -- ListOffsets ---------------------------------------------------------------------

    def _list_offsets(self, targets: Mapping[TopicPartition, int], timeout: float | None = None
                      ) -> dict[TopicPartition, tuple[int, int]]:
        """{tp: (offset, timestamp)} for ListOffsets targets (-1 latest, -2 earliest, or a timestamp)."""
        timeout = self.config["request.timeout.ms"] / 1000.0 if timeout is None else timeout
        deadline = time.monotonic() + timeout
        backoff = self.config["retry.backoff.ms"] / 1000.0
        pending = dict(targets)
        result: dict[TopicPartition, tuple[int, int]] = {}
        isolation = 1 if self.config["isolation.level"] == "read_committed" else 0
        cluster = self._cluster
        for tp in pending:
            cluster.add_topic(tp.topic)
        while pending:
            if cluster.needs_refresh() or any(cluster.leader_for(*tp) < 0 for tp in pending):
                try:
                    cluster.refresh()
                except KafkaError:
                    pass
            by_node: dict[int, list[TopicPartition]] = {}
            for tp in pending:
                by_node.setdefault(cluster.leader_for(*tp), []).append(tp)
            for node, tps in by_node.items():
                if node < 0:
                    continue
                topics: dict[str, list] = {}
                for tp in tps:
                    topics.setdefault(tp.topic, []).append(
                        {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": pending[tp],
                         "max_num_offsets": 1})
                body = {"replica_id": -1, "isolation_level": isolation,
                        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                try:
                    conn = self._pool.get(node)
                    resp = conn.request(_list_offsets, body, version=conn.version_for(_list_offsets))
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    self._pool.drop(node, exc)
                    cluster.request_update()
                    continue
                for t in resp.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        if tp not in pending:
                            continue
                        if p.error_code == ErrorCode.NONE:
                            offset = p.offset
                            if conn.version_for(_list_offsets) == 0:
                                offset = p.old_style_offsets[0] if p.old_style_offsets else -1
                            result[tp] = (offset, p.timestamp)
                            del pending[tp]
                        elif ErrorCode(p.error_code).retriable:
                            cluster.request_update()
                        else:
                            raise KafkaError(p.error_code, f"ListOffsets {tp.topic}-{tp.partition}")
            if pending:
                if time.monotonic() + backoff > deadline:
                    raise KafkaTimeoutError(f"ListOffsets did not complete for {sorted(pending)}")
                time.sleep(backoff)
        return result

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
            self._cluster.maybe_refresh()
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

    def fetch_stats(self) -> tuple[float, int]:
        """(seconds spent waiting on fetch responses, bytes fetched) — for the perf tool."""
        return self._fetcher.fetch_time, self._fetcher.bytes_fetched

    def close(self, autocommit: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        self._fetcher.close()
        self._pool.close()
        self._cluster.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
