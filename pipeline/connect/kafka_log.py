"""KafkaBasedLog: a compacted topic read from the beginning into memory and appended to
(what the distributed worker keeps configs, offsets and statuses in).

Invariant: one background thread owns the Consumer (it assigns every partition
of the topic and reads from the earliest offset), so ``callback(record)`` runs
on that thread, in offset order per partition. ``read_to_end()`` returns only
after every record that was in the topic when it was called has been passed to
the callback. ``send`` is thread-safe (the Producer is) and returns a future.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable

from odradek.client import AdminClient, Consumer, ErrorCode, KafkaError, NewTopic, Producer, TopicPartition

log = logging.getLogger(__name__)


def ensure_topic(admin_props: dict[str, Any], topic: str, partitions: int, replication_factor: int,
                 configs: dict[str, str] | None = None, timeout_s: float = 60.0) -> None:
    """Create ``topic`` (compacted by default) unless it exists."""
    admin = AdminClient(admin_props)
    try:
        configs = {"cleanup.policy": "compact", **(configs or {})}
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                admin.create_topics([NewTopic(topic, partitions, replication_factor, configs)])
                log.info("created topic %s (%d partitions, rf %d, %s)", topic, partitions, replication_factor, configs)
                return
            except KafkaError as exc:
                if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                    return
                if not exc.retriable or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        admin.close()


class KafkaBasedLog:
    """Tails ``topic`` from the beginning; ``callback(ConsumerRecord)`` sees every record."""

    def __init__(self, topic: str, producer_props: dict[str, Any], consumer_props: dict[str, Any],
                 callback: Callable[[Any], None]) -> None:
        self.topic = topic
        self.callback = callback
        self._producer_props = {**producer_props, "acks": "all", "linger.ms": "0"}
        self._consumer_props = {**consumer_props, "enable.auto.commit": "false", "auto.offset.reset": "earliest"}
        self._consumer_props.pop("group.id", None)
        self._lock = threading.Condition()
        self._pending: list[Future] = []
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.producer: Producer | None = None
        self.error: BaseException | None = None

    def start(self) -> None:
        self.producer = Producer(self._producer_props)
        self.consumer = Consumer(self._consumer_props)
        parts = self.consumer._cluster.wait_for_topic(self.topic, 60.0)
        self.partitions = [TopicPartition(self.topic, p) for p in parts]
        self.consumer.assign(self.partitions)
        self.consumer.seek_to_beginning(*self.partitions)
        self._thread = threading.Thread(target=self._run, name=f"KafkaBasedLog-{self.topic}", daemon=True)
        self._thread.start()
        self.read_to_end(timeout=60.0)

    def _run(self) -> None:
        c = self.consumer
        while True:
            with self._lock:
                if self._stopping:
                    return
                pending, self._pending = self._pending, []
            try:
                if pending:
                    ends = c.end_offsets(self.partitions)
                    while any(c.position(tp) < end for tp, end in ends.items()):
                        self._deliver(c.poll(timeout_ms=200))
                        if self._stopping:
                            return
                    for fut in pending:
                        fut.set_result(None)
                    continue
                self._deliver(c.poll(timeout_ms=200))
            except Exception as exc:  # keep tailing; report to waiters
                log.warning("KafkaBasedLog %s: %s", self.topic, exc)
                for fut in pending:
                    if not fut.done():
                        fut.set_exception(exc)
                time.sleep(0.2)

    def _deliver(self, batch: dict) -> None:
        for records in batch.values():
            for r in records:
                try:
                    self.callback(r)
                except Exception:
                    log.exception("KafkaBasedLog %s: callback failed", self.topic)

    def read_to_end(self, timeout: float = 30.0) -> None:
        fut: Future = Future()
        with self._lock:
            self._pending.append(fut)
        fut.result(timeout)

    def send(self, key: bytes | None, value: bytes | None, partition: int | None = None) -> Any:
        assert self.producer is not None
        return self.producer.send(self.topic, value=value, key=key, partition=partition)

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
        if self._thread is not None:
            self._thread.join(10)
        if self.producer is not None:
            self.producer.close(5)
        try:
            self.consumer.close(autocommit=False)
        except Exception:
            pass
