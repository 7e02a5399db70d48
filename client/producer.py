"""Producer: kafka-python-like blocking facade over the accumulator and the sender thread.

Invariant: ``send`` never does network I/O once the topic's metadata is known:
it serializes, picks a partition (murmur2 for keys, sticky for null keys, like
Java's DefaultPartitioner), appends to the accumulator under its lock and
returns a future. Everything else (requests, retries, completions) happens on
the sender thread.

    p = Producer(bootstrap_servers="127.0.0.1:9092", linger_ms=5, acks="all")
    md = p.send("events", b"value", key=b"k").get(timeout=10)
    p.flush(); p.close()

Transactions (``transactional_id`` set; Kafka's KafkaProducer API):

    p = Producer(bootstrap_servers=..., transactional_id="billing-1")
    p.init_transactions()
    p.begin_transaction()
    p.send("out", b"v")
    p.send_offsets_to_transaction({tp: next_offset}, consumer.group_metadata())
    p.commit_transaction()          # or p.abort_transaction()
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Mapping

from odradek.protocol.errors import ErrorCode, KafkaError

from .accumulator import RECORD_OVERHEAD, FutureRecordMetadata, RecordAccumulator
from .cluster import ClusterMetadata
from .config import ClientConfig
from .partitioner import StickyPartitioner, partition_for_key
from .sender import Sender
from .structs import ConsumerGroupMetadata, IllegalStateError, KafkaTimeoutError, TopicPartition
from .transaction_manager import TransactionManager

_client_ids = iter(range(1, 1 << 31))
_new_tuple = tuple.__new__
_NO_HEADERS: tuple[tuple[str, bytes | None], ...] = ()   # a record without headers


def _to_bytes(obj: Any, what: str) -> bytes | None:
    if obj is None or type(obj) is bytes:
        return obj
    if isinstance(obj, str):
        return obj.encode("utf-8")
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    raise TypeError(f"{what} must be bytes or str (or set a {what}_serializer), got {type(obj).__name__}")


def _headers(headers: Iterable | Mapping | None) -> list[tuple[str, bytes | None]]:
    if not headers:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for k, v in items:
        if not isinstance(k, str):
            k = bytes(k).decode("utf-8")
        out.append((k, _to_bytes(v, "header value")))
    return out


class Producer:
    """Asynchronous record producer; thread-safe ``send``."""

    def __init__(self, config: Mapping[str, Any] | None = None, **configs: Any) -> None:
        self.config = cfg = ClientConfig("producer", config, **configs)
        if cfg["client.id"] is None:
            cfg._values["client.id"] = f"odradek-producer-{next(_client_ids)}"
        self._cluster = ClusterMetadata(cfg)
        self._acc = RecordAccumulator(
            batch_size=cfg["batch.size"], compression=cfg["compression.type"], linger_ms=cfg["linger.ms"],
            buffer_memory=cfg["buffer.memory"], max_block_ms=cfg["max.block.ms"],
            retry_backoff_ms=cfg["retry.backoff.ms"],
            guarantee_order=cfg["max.in.flight.requests.per.connection"] == 1)
        self._partitioner = cfg["partitioner"]
        self._sticky = StickyPartitioner()
        self._key_ser: Callable | None = cfg["key.serializer"]
        self._value_ser: Callable | None = cfg["value.serializer"]
        self._max_block = cfg["max.block.ms"] / 1000.0
        self._max_request = cfg["max.request.size"]
        self._linger0 = cfg["linger.ms"] == 0
        self._parts: dict[str, tuple[int, list[int], list[int]]] = {}
        self._closed = False
        self._txn: TransactionManager | None = None
        if cfg["transactional.id"] is not None:
            self._txn = TransactionManager(cfg["transactional.id"], cfg["transaction.timeout.ms"],
                                           cfg["retry.backoff.ms"])
        self._sender = Sender(cfg, self._cluster, self._acc, self._txn)
        self._sender.start()

    # -- sending -------------------------------------------------------------------

    def _partitions(self, topic: str) -> tuple[list[int], list[int]]:
        """The topic's partitions and its available ones, read from the cluster and kept for
        ``send`` (which reads them in place) until the cluster's metadata changes."""
        cluster = self._cluster
        parts = cluster.partitions_for(topic)
        if parts is None:
            parts = cluster.wait_for_topic(topic, self._max_block)
        avail = cluster.available_partitions(topic)
        self._parts[topic] = (cluster.updates, parts, avail)
        return parts, avail

    def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
             timestamp_ms: int | None = None, headers: Iterable | Mapping | None = None,
             callback: Callable[[RecordMetadata | None, Exception | None], Any] | None = None
             ) -> FutureRecordMetadata:
        """Queue one record; returns a future (``.get(timeout)`` -> RecordMetadata).

        ``callback(metadata, exception)`` runs on the sender thread when the batch completes.
        """
        if self._closed:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "send after close")
        if self._sender.fatal_error is not None:
            raise self._sender.fatal_error
        txn = self._txn
        if txn is not None:
            txn.fail_if_not_ready_for_send()
        if self._key_ser is not None:
            key = self._key_ser(key)
        if self._value_ser is not None:
            value = self._value_ser(value)
        # bytes or None as they are (the common case, without a call per record)
        kb = key if key is None or type(key) is bytes else _to_bytes(key, "key")
        vb = value if value is None or type(value) is bytes else _to_bytes(value, "value")
        hdrs = _headers(headers) if headers else _NO_HEADERS
        ts = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
        size = RECORD_OVERHEAD + (len(kb) if kb else 0) + (len(vb) if vb else 0)
        if hdrs:
            size += sum(len(k) + (len(v) if v else 0) + 10 for k, v in hdrs)
        if size + 61 > self._max_request:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"the record is {size} bytes, larger than max.request.size {self._max_request}")
        cached = self._parts.get(topic)   # _partitions' cache, read in place
        if cached is not None and cached[0] == self._cluster.updates:
            parts, avail = cached[1], cached[2]
        else:
            parts, avail = self._partitions(topic)
        sticky = False
        if partition is not None:
            if partition not in parts:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"partition {partition} of {topic!r} (it has {len(parts)})")
            p = partition
        elif self._partitioner != "murmur2":
            p = self._partitioner(kb, parts, avail)
        elif kb is not None:
            p = parts[partition_for_key(kb, len(parts))]
        else:
            current = self._sticky.current.get(topic)     # the sticky partition, without a call per record
            p = self._sticky.partition(topic, None, parts, avail) if current is None else current
            sticky = True
        tp = _new_tuple(TopicPartition, (topic, p))   # without the NamedTuple's __new__ (per record)
        fut, new_batch = self._acc.append(tp, ts, kb, vb, hdrs, size, abort_on_new_batch=sticky)
        if fut is None:
            self._sticky.on_new_batch(topic, p)
            p = self._sticky.partition(topic, None, parts, avail)
            tp = TopicPartition(topic, p)
            fut, new_batch = self._acc.append(tp, ts, kb, vb, hdrs, size)
        assert fut is not None  # only an append that may abort for a new batch returns none
        if txn is not None:
            txn.maybe_add_partition(tp)
        sender = self._sender
        if sender.sleeping and (new_batch or self._linger0):
            sender.wakeup()
        if new_batch and self._acc.queued_batches(tp) > 1:
            # a full batch waits for the sender thread: let it have the GIL now. A thread waiting
            # for it gets it from one that keeps running only after the switch interval (5 ms),
            # and meanwhile an unthrottled producer's records pile up in buffer.memory. (Not when
            # the sender took the batch before: handed the GIL then, it would take this batch
            # with its one record, and with linger.ms=0 a producer sending flat out would settle
            # into batches of a few records, at half the rate.)
            time.sleep(0)
        if callback is not None:
            fut.add_callback(lambda md: callback(md, None))
            fut.add_errback(lambda exc: callback(None, exc))
        return fut

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now (ignoring linger.ms) and wait for every batch to complete."""
        acc = self._acc
        acc.flushing += 1
        try:
            self._sender.wakeup()
            deadline = None if timeout is None else time.monotonic() + timeout
            for result in acc.incomplete():
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not result.event.wait(remaining):
                    raise KafkaTimeoutError(f"flush did not complete within {timeout} s")
        finally:
            acc.flushing -= 1

    # -- transactions ----------------------------------------------------------------

    def _transactional(self, what: str) -> TransactionManager:
        if self._txn is None:
            raise IllegalStateError(f"cannot use {what}() without a transactional.id")
        if self._closed:
            raise IllegalStateError(f"cannot use {what}() after close()")
        return self._txn

    def _await(self, result: Any, timeout: float | None) -> None:
        self._sender.wakeup()
        result.wait(self._max_block if timeout is None else timeout)

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional.id with its coordinator (fencing older producers with the
        same id, completing their open transaction); call once, before any other transactional call.
        Waits up to ``timeout`` s (default max.block.ms); after a timeout it may be called again."""
        self._await(self._transactional("init_transactions").initialize(), timeout)

    def begin_transaction(self) -> None:
        """Start a transaction (local only: partitions are added as records are sent)."""
        self._transactional("begin_transaction").begin()

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, Any],
                                    group_id_or_metadata: str | ConsumerGroupMetadata | Any,
                                    timeout: float | None = None) -> None:
        """Commit consumer ``offsets`` ({tp: next offset | OffsetAndMetadata}) as part of the transaction.

        Pass ``consumer.group_metadata()`` (the generation is then checked, TxnOffsetCommit v3) or a group id.
        """
        txn = self._transactional("send_offsets_to_transaction")
        group = group_id_or_metadata
        if isinstance(group, str):
            group = ConsumerGroupMetadata(group)
        elif not isinstance(group, ConsumerGroupMetadata):  # any object with Kafka's four fields
            group = ConsumerGroupMetadata(group.group_id, getattr(group, "generation_id", -1),
                                          getattr(group, "member_id", ""), getattr(group, "group_instance_id", None))
        if not group.group_id:
            raise ValueError("send_offsets_to_transaction needs a consumer group id")
        self._await(txn.send_offsets({TopicPartition(*tp): v for tp, v in offsets.items()}, group), timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send everything queued, then commit. Raises the error of any failed send or request
        (then call abort_transaction()), ProducerFencedError if fenced, KafkaTimeoutError after
        ``timeout`` s (default max.block.ms; calling it again resumes the same commit)."""
        result = self._transactional("commit_transaction").begin_commit()
        acc = self._acc
        acc.flushing += 1  # linger.ms no longer matters: everything goes now
        try:
            self._await(result, timeout)
        finally:
            acc.flushing -= 1

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop the records not sent yet and abort: nothing of this transaction becomes visible to
        read_committed consumers. Allowed after an abortable error; raises if the producer is fenced."""
        self._await(self._transactional("abort_transaction").begin_abort(), timeout)

    def partitions_for(self, topic: str) -> set[int]:
        """Partition ids of ``topic`` (waits for metadata up to max.block.ms)."""
        return set(self._partitions(topic)[0])

    def close(self, timeout: float | None = None) -> None:
        """Flush queued records (up to ``timeout`` s, then fail the rest) and stop the sender."""
        if self._closed:
            return
        self._closed = True
        self._sender.initiate_close()
        self._sender.join(timeout)
        if self._sender.is_alive():
            self._sender.force_close()
            self._sender.join()
        self._cluster.close()

    def metrics(self) -> dict[str, Any]:
        return {}

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


from .structs import RecordMetadata  # noqa: E402  (type name used in the send() annotation)
