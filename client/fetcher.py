"""The consumer's fetcher: pipelined Fetch requests per leader, buffered responses, positions.

Invariant: a partition's *position* only moves when records are handed to the
user (or when an empty/control-only batch range is passed), and a buffered
fetch is used only if it starts exactly at the current position; anything else
(after a seek, a reset or a reassignment) is dropped. At most one Fetch is in
flight per broker, and a partition is fetched ahead of the user by at most
``PREFETCH`` buffered responses, each continuing where the previous one ended.
Control batches (transaction markers) are never handed out, and with
``isolation.level=read_committed`` neither are the batches of aborted
transactions (Kafka's rule: a producer id is aborted from the ``first_offset``
the Fetch response lists until its ABORT marker; a COMMIT marker ends nothing).
"""
from __future__ import annotations

import collections
import functools
import heapq
import logging
import select
import time
from typing import Any, Callable

from odradek.protocol import record_batch
from odradek.protocol.apis import fetch as _fetch
from odradek.protocol.control_records import parse_control_record
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import Record, decode_batch

from .cluster import ClusterMetadata, NodePool
from .config import ClientConfig
from .structs import ConsumerRecord, TopicPartition

log = logging.getLogger(__name__)

PREFETCH = 2
_LEADER_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION,
})


class CompletedFetch:
    """One partition's slice of a Fetch response, consumed lazily."""

    __slots__ = ("tp", "fetch_offset", "next_offset", "error", "high_watermark", "blob", "records", "index",
                 "bytes", "aborted")

    def __init__(self, tp: TopicPartition, fetch_offset: int, error: int, high_watermark: int,
                 blob: bytes | None, aborted: list[tuple[int, int]] | None = None) -> None:
        self.tp = tp
        self.aborted = aborted  # read_committed: [(producer_id, first_offset)] of aborted transactions
        self.fetch_offset = fetch_offset
        self.error = error
        self.high_watermark = high_watermark
        self.blob = blob
        self.records: list | None = None
        self.index = 0
        self.bytes = len(blob) if blob else 0
        next_offset = fetch_offset
        if blob:
            for _pos, header in record_batch.iter_headers(blob):
                next_offset = max(next_offset, header.next_offset)
        self.next_offset = next_offset


class Fetcher:
    """Positions, in-flight fetches and buffered responses of one consumer (its thread only)."""

    def __init__(self, config: ClientConfig, cluster: ClusterMetadata, pool: NodePool) -> None:
        self.config = config
        self.cluster = cluster
        self.pool = pool
        self.positions: dict[TopicPartition, int | None] = {}
        self.high_watermarks: dict[TopicPartition, int] = {}
        self.pending_reset: dict[TopicPartition, str] = {}
        self._completed: collections.deque[CompletedFetch] = collections.deque()
        self._buffered: dict[TopicPartition, list[CompletedFetch]] = {}
        self._in_flight: dict[int, Any] = {}
        self._in_flight_tps: set[TopicPartition] = set()
        self._isolation = 1 if config["isolation.level"] == "read_committed" else 0
        self._key_de: Callable | None = config["key.deserializer"]
        self._value_de: Callable | None = config["value.deserializer"]
        self.fetch_time = 0.0  # seconds spent waiting for fetch responses (perf tool)
        self.bytes_fetched = 0

    # -- assignment --------------------------------------------------------------------

    def assign(self, tps: list[TopicPartition]) -> None:
        keep = set(tps)
        self.positions = {tp: self.positions.get(tp) for tp in tps}
        self.pending_reset = {tp: s for tp, s in self.pending_reset.items() if tp in keep}
        self._drop_buffered(lambda tp: tp not in keep)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset
        self.pending_reset.pop(tp, None)
        self._drop_buffered(lambda t: t == tp)

    def _drop_buffered(self, pred: Callable[[TopicPartition], bool]) -> None:
        self._completed = collections.deque(cf for cf in self._completed if not pred(cf.tp))
        for tp in [tp for tp in self._buffered if pred(tp)]:
            del self._buffered[tp]

    # -- sending -----------------------------------------------------------------------

    def send_fetches(self) -> int:
        """Send a Fetch to every leader that has fetchable partitions and none in flight."""
        cfg = self.config
        by_node: dict[int, list[tuple[TopicPartition, int]]] = {}
        for tp, pos in self.positions.items():
            if pos is None or tp in self._in_flight_tps or tp in self.pending_reset:
                continue
            buffered = self._buffered.get(tp)
            if buffered:
                if len(buffered) >= PREFETCH:
                    continue
                pos = buffered[-1].next_offset
            leader = self.cluster.leader_for(tp.topic, tp.partition)
            if leader < 0:
                self.cluster.request_update()
                continue
            if leader in self._in_flight:
                continue
            by_node.setdefault(leader, []).append((tp, pos))
        sent = 0
        for node, parts in by_node.items():
            topics: dict[str, list[dict]] = {}
            for tp, pos in parts:
                topics.setdefault(tp.topic, []).append({
                    "partition": tp.partition, "current_leader_epoch": -1, "fetch_offset": pos,
                    "log_start_offset": -1, "partition_max_bytes": cfg["max.partition.fetch.bytes"]})
            body = {"replica_id": -1, "max_wait_ms": cfg["fetch.max.wait.ms"], "min_bytes": cfg["fetch.min.bytes"],
                    "max_bytes": cfg["fetch.max.bytes"], "isolation_level": self._isolation,
                    "session_id": 0, "session_epoch": -1,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                    "forgotten_topics_data": [], "rack_id": cfg["client.rack"] or ""}
            offsets = dict(parts)
            try:
                conn = self.pool.get(node)
                req = conn.send(_fetch, body, callback=functools.partial(self._on_response, node, offsets))
            except KafkaError as exc:
                log.debug("fetch to node %s failed: %s", node, exc)
                self.cluster.request_update()
                continue
            self._in_flight[node] = (req, offsets, time.monotonic())
            self._in_flight_tps.update(offsets)
            sent += 1
        return sent

    def _on_response(self, node: int, offsets: dict[TopicPartition, int], resp: Any, err: KafkaError | None) -> None:
        self._in_flight.pop(node, None)
        self._in_flight_tps.difference_update(offsets)
        if err is not None:
            log.debug("fetch from node %s failed: %s", node, err)
            self.pool.drop(node, err)
            self.cluster.request_update()
            return
        if resp.error_code not in (ErrorCode.NONE, None):
            self.cluster.request_update()
            return
        for topic in resp.responses:
            for p in topic.partition_responses:
                tp = TopicPartition(topic.topic, p.partition)
                fetch_offset = offsets.get(tp)
                if fetch_offset is None:
                    continue
                blob = p.record_set
                aborted = None
                if self._isolation and getattr(p, "aborted_transactions", None):
                    aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions]
                cf = CompletedFetch(tp, fetch_offset, p.error_code, p.high_watermark, blob, aborted)
                if p.error_code == ErrorCode.NONE:
                    self.high_watermarks[tp] = p.high_watermark
                    if cf.next_offset == fetch_offset:
                        continue  # nothing complete to hand out
                    self.bytes_fetched += cf.bytes
                    self._buffered.setdefault(tp, []).append(cf)
                self._completed.append(cf)

    # -- waiting -----------------------------------------------------------------------

    def in_flight(self) -> bool:
        return bool(self._in_flight)

    def wait(self, timeout: float) -> None:
        """Block up to ``timeout`` for fetch responses and handle those that arrive."""
        conns = {}
        for node in list(self._in_flight):
            conn = self.pool.conns.get(node)
            if conn is None or not conn.connected:
                self._in_flight.pop(node, None)
                self._in_flight_tps.clear()
                for entry in self._in_flight.values():
                    self._in_flight_tps.update(entry[1])
                continue
            conns[conn.fileno()] = conn
        if not conns:
            if timeout > 0:
                time.sleep(min(timeout, self.config["retry.backoff.ms"] / 1000.0))
            return
        start = time.monotonic()
        poller = select.poll()
        for fd in conns:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(max(timeout, 0.0) * 1000.0):
            conns[fd].read_responses()
        self.fetch_time += time.monotonic() - start
        now = time.monotonic()
        for node, (req, offsets, sent_at) in list(self._in_flight.items()):
            conn = self.pool.conns.get(node)
            if conn is not None and conn.expired(now):
                self.pool.drop(node, KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"fetch from node {node}"))

    # -- handing out records -------------------------------------------------------------

    def fetched_records(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        remaining = max_records
        completed = self._completed
        while completed and remaining > 0:
            cf = completed[0]
            tp = cf.tp
            position = self.positions.get(tp)
            if position is None or cf.fetch_offset != position and cf.records is None:
                self._discard(cf)
                continue
            if cf.error != ErrorCode.NONE:
                self._discard(cf)
                self._handle_error(cf)
                continue
            if cf.records is None:
                cf.records = committed_records(cf.blob, cf.aborted or [], position, self.config["check.crcs"])
                cf.blob = None
            recs = cf.records
            take = recs[cf.index:cf.index + remaining]
            if take:
                topic, part = tp
                kd, vd = self._key_de, self._value_de
                new = tuple.__new__   # what ConsumerRecord(...) runs, without its Python frame
                converted = [new(ConsumerRecord, (
                    topic, part, offset, timestamp, timestamp_type,
                    key if kd is None or key is None else kd(key),
                    value if vd is None or value is None else vd(value),
                    headers, -1 if key is None else len(key), -1 if value is None else len(value)))
                    for offset, timestamp, key, value, headers, timestamp_type in take]
                out.setdefault(tp, []).extend(converted)
                cf.index += len(take)
                remaining -= len(take)
                position = self.positions[tp] = take[-1].offset + 1
            if cf.index >= len(recs):
                self._discard(cf)
                if position < cf.next_offset:
                    self.positions[tp] = cf.next_offset
        return out

    def _discard(self, cf: CompletedFetch) -> None:
        if self._completed and self._completed[0] is cf:
            self._completed.popleft()
        buffered = self._buffered.get(cf.tp)
        if buffered and cf in buffered:
            buffered.remove(cf)
            if not buffered:
                del self._buffered[cf.tp]

    def _handle_error(self, cf: CompletedFetch) -> None:
        code = cf.error
        tp = cf.tp
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            strategy = self.config["auto.offset.reset"]
            if strategy == "none":
                raise KafkaError(code, f"fetch position {cf.fetch_offset} out of range for {tp.topic}-{tp.partition}")
            log.info("offset %s out of range for %s; resetting to %s", cf.fetch_offset, tp, strategy)
            self.pending_reset[tp] = strategy
            self.positions[tp] = None
            self._drop_buffered(lambda t: t == tp)
        elif code in _LEADER_ERRORS:
            self.cluster.request_update()
        elif code == ErrorCode.CORRUPT_MESSAGE:
            raise KafkaError(code, f"corrupt record batch in {tp.topic}-{tp.partition} at {cf.fetch_offset}")
        else:
            ec = ErrorCode(code)
            if ec.retriable:
                self.cluster.request_update()
            else:
                raise KafkaError(code, f"fetch {tp.topic}-{tp.partition}")

    def close(self) -> None:
        self._completed.clear()
        self._buffered.clear()


def _is_abort_marker(blob: bytes, pos: int) -> bool:
    try:
        commit, _epoch = parse_control_record(blob, pos)
    except KafkaError:  # another kind of control record: not a transaction marker
        return False
    return not commit


def committed_records(blob: bytes | None, aborted: list[tuple[int, int]], start: int,
                      check_crcs: bool = True) -> list[Record]:
    """Data records at or after ``start``, without control records and without the records of
    aborted transactions (``aborted``: the Fetch response's (producer_id, first_offset) list).
    Each batch's CRC32C is checked unless ``check_crcs`` is false (the consumer's
    ``check.crcs``); a batch that fails is CORRUPT_MESSAGE."""
    out: list[Record] = []
    if not blob:
        return out
    pending = [(first, pid) for pid, first in aborted]
    heapq.heapify(pending)
    aborted_pids: set[int] = set()
    for pos, header in record_batch.iter_headers(blob):
        if header.producer_id >= 0:
            # transactions that began at or before this batch's last offset are now aborted ones
            while pending and pending[0][0] <= header.last_offset:
                aborted_pids.add(heapq.heappop(pending)[1])
            if header.is_control:
                if _is_abort_marker(blob, pos):
                    aborted_pids.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in aborted_pids:
                continue
        if header.is_control:
            continue
        if header.last_offset < start:
            continue
        _header, records = decode_batch(blob, pos, check_crcs)
        out.extend(records if header.base_offset >= start else [r for r in records if r.offset >= start])
    return out
