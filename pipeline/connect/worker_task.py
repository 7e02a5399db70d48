"""WorkerSourceTask and WorkerSinkTask: the threads that run one task each.

Invariant (source): a source offset is stored only after ``producer.flush()``
returned with every record sent before the offset snapshot acknowledged, so
stored offsets never run ahead of the data in Kafka (at least once). Invariant
(sink): consumer offsets are committed only after ``task.pre_commit``/``flush``
returned for them and the DLQ producer was flushed, so a committed offset never
runs ahead of what the sink made durable (at least once). A task that raises
goes to FAILED with its trace and stops; a paused task neither polls nor puts.
"""
from __future__ import annotations

import functools
import logging
import threading
import time
import traceback
from typing import Any, Protocol

from odradek.client import Consumer, ConsumerRebalanceListener, Producer, TopicPartition

from .api import ConnectException, RetriableException, _freeze, SinkRecord, SinkTask, SinkTaskContext, SourceRecord, \
    SourceTask, SourceTaskContext
from .config import ConnectorConfig, WorkerConfig
from .converters import Converter
from .errors import KEY_CONVERTER, SKIPPED, TRANSFORMATION, VALUE_CONVERTER, DeadLetterQueueReporter, \
    RetryWithToleranceOperator
from .offsets import ConnectorOffsetReader, OffsetBackingStore, offset_key, offset_value
from .plugins import resolve
from .transforms import Transformation

log = logging.getLogger(__name__)

RUNNING, PAUSED, FAILED, UNASSIGNED, DESTROYED = "RUNNING", "PAUSED", "FAILED", "UNASSIGNED", "DESTROYED"


class TaskStatusListener(Protocol):
    def on_task_state(self, connector: str, task: int, state: str, trace: str | None) -> None: ...


def make_converter(wc: WorkerConfig, cc: ConnectorConfig, which: str) -> Converter:
    """``key.converter``/``value.converter`` of the connector, else of the worker, configured."""
    name = cc.converter(which) or getattr(wc, which.replace(".", "_"))
    props = {**wc.converter_props(which), **cc.converter_props(which)}
    conv = resolve("converter", name)()
    conv.configure(props, which == "key.converter")
    return conv


def make_transforms(cc: ConnectorConfig) -> list[tuple[str, Transformation]]:
    out = []
    for alias in cc.transforms:
        t = resolve("transform", cc.props[f"transforms.{alias}.type"])()
        t.configure(cc.transform_props(alias))
        out.append((alias, t))
    return out


class WorkerTask(threading.Thread):
    """Common life cycle: start, loop while not stopped, report state changes."""

    def __init__(self, wc: WorkerConfig, cc: ConnectorConfig, task_id: int, task_props: dict[str, str],
                 listener: TaskStatusListener, target_state: str) -> None:
        super().__init__(name=f"task-{cc.name}-{task_id}", daemon=True)
        self.wc, self.cc, self.task_id, self.task_props = wc, cc, task_id, task_props
        self.listener = listener
        self.label = f"{cc.name}-{task_id}"
        self.stopping = threading.Event()
        self.paused = target_state == PAUSED
        self.state_cv = threading.Condition()
        self.failed = False

    def transition_to(self, target: str) -> None:
        with self.state_cv:
            self.paused = target == PAUSED
            self.state_cv.notify_all()
        if not self.failed and self.is_alive():
            self.listener.on_task_state(self.cc.name, self.task_id, PAUSED if self.paused else RUNNING, None)

    def stop(self) -> None:
        self.stopping.set()
        with self.state_cv:
            self.state_cv.notify_all()

    def wait_if_paused(self) -> bool:
        """True when the task is paused (after waiting a little, so the loop does not spin)."""
        with self.state_cv:
            if self.paused and not self.stopping.is_set():
                self.state_cv.wait(0.5)
                return True
        return False

    def run(self) -> None:
        try:
            self.initialize_and_start()
            self.listener.on_task_state(self.cc.name, self.task_id, PAUSED if self.paused else RUNNING, None)
            self.execute()
        except BaseException as exc:  # the task failed: FAILED with the trace, then clean up
            self.failed = True
            log.error("WorkerTask{id=%s} Task threw an uncaught and unrecoverable exception", self.label,
                      exc_info=True)
            trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            self.listener.on_task_state(self.cc.name, self.task_id, FAILED, trace)
        finally:
            try:
                self.close()
            except Exception:
                log.exception("task %s: error while closing", self.label)
        if not self.failed:
            self.listener.on_task_state(self.cc.name, self.task_id, UNASSIGNED, None)

    def initialize_and_start(self) -> None:
        raise NotImplementedError

    def execute(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class WorkerSourceTask(WorkerTask):
    def __init__(self, *args: Any, offset_store: OffsetBackingStore) -> None:
        super().__init__(*args)
        self.offset_store = offset_store
        self.pending_offsets: dict[Any, tuple[dict, dict]] = {}  # frozen partition -> (partition, offset)
        self._last_partition: dict | None = None
        self._last_key: Any = None
        self.send_errors: list[BaseException] = []
        self.producer: Producer | None = None
        self.task: SourceTask | None = None
        self.records_sent = 0

    def initialize_and_start(self) -> None:
        self.key_converter = make_converter(self.wc, self.cc, "key.converter")
        self.value_converter = make_converter(self.wc, self.cc, "value.converter")
        self.transforms = make_transforms(self.cc)
        self.ops = RetryWithToleranceOperator(self.cc, self.label)
        self.producer = Producer(self.wc.producer_props())
        cls = resolve("connector", self.cc.connector_class)().task_class()
        self.task = cls()
        self.task.initialize(SourceTaskContext(self.task_props, ConnectorOffsetReader(self.offset_store,
                                                                                      self.cc.name)))
        self.task.start(self.task_props)

    def _transform(self, record: SourceRecord) -> Any:
        for alias, t in self.transforms:
            record = self.ops.execute(TRANSFORMATION, type(t).__name__, functools.partial(t.apply, record))
            if record is None or record is SKIPPED:
                return None
        return record

    def execute(self) -> None:
        assert self.task is not None and self.producer is not None
        flush_every = self.wc.offset_flush_interval_ms / 1000.0
        next_flush = time.monotonic() + flush_every
        while not self.stopping.is_set():
            if self.send_errors:
                raise ConnectException("Unrecoverable exception from producer send callback") \
                    from self.send_errors[0]
            if time.monotonic() >= next_flush:
                self.commit_offsets()
                next_flush = time.monotonic() + flush_every
            if self.wait_if_paused():
                continue
            try:
                records = self.task.poll()
            except RetriableException as exc:
                log.warning("task %s: poll failed, retrying: %s", self.label, exc)
                self.stopping.wait(0.5)
                continue
            if records:
                self._send(records)

    def _send(self, records: list[SourceRecord]) -> None:
        producer = self.producer
        assert producer is not None
        kc, vc = self.key_converter, self.value_converter
        for original in records:
            record = self._transform(original) if self.transforms else original
            if record is not None:
                topic = record.topic
                try:  # fast path; on failure the operator retries/tolerates the same pure call
                    key = kc.from_connect_data(topic, record.key_schema, record.key)
                except Exception:
                    key = self.ops.execute(KEY_CONVERTER, type(kc).__name__,
                                           lambda: kc.from_connect_data(topic, record.key_schema, record.key))
                    if key is SKIPPED:
                        continue
                try:
                    value = vc.from_connect_data(topic, record.value_schema, record.value)
                except Exception:
                    value = self.ops.execute(VALUE_CONVERTER, type(vc).__name__,
                                             lambda: vc.from_connect_data(topic, record.value_schema, record.value))
                    if value is SKIPPED:
                        continue
                producer.send(topic, value=value, key=key, partition=record.kafka_partition,
                              timestamp_ms=record.timestamp, headers=record.headers or None
                              ).add_errback(self._on_send_error)
                self.records_sent += 1
            part = original.source_partition
            if part is not None and original.source_offset is not None:
                if part is not self._last_partition:  # sources usually reuse one partition dict
                    self._last_partition, self._last_key = part, _freeze(part)
                self.pending_offsets[self._last_key] = (part, original.source_offset)

    def _on_send_error(self, error: BaseException) -> None:
        self.send_errors.append(error)

    def commit_offsets(self) -> bool:
        """Flush the producer, then store the offsets of everything sent before the flush."""
        if self.producer is None:
            return False
        snapshot, self.pending_offsets = self.pending_offsets, {}
        try:
            self.producer.flush(self.wc.offset_flush_timeout_ms / 1000.0 + 30)
        except Exception as exc:
            log.error("task %s: failed to flush, timed out while waiting for producer to flush outstanding "
                      "messages: %s", self.label, exc)
            self.pending_offsets = {**snapshot, **self.pending_offsets}
            return False
        if self.send_errors:
            return False  # never store offsets past a record that was not written
        if snapshot:
            self.offset_store.set({offset_key(self.cc.name, part): offset_value(off)
                                   for part, off in snapshot.values()})
        if self.task is not None:
            try:
                self.task.commit()
            except Exception:
                log.exception("task %s: commit() failed", self.label)
        return True

    def close(self) -> None:
        if self.task is not None:
            try:
                self.task.stop()
            except Exception:
                log.exception("task %s: stop() failed", self.label)
        if self.producer is not None and not self.failed:
            self.commit_offsets()
        if self.producer is not None:
            self.producer.close(5)


class _SinkRebalanceListener(ConsumerRebalanceListener):
    def __init__(self, wt: "WorkerSinkTask") -> None:
        self.wt = wt

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.wt.on_revoked(revoked)

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.wt.on_assigned(assigned)

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.wt.on_lost(lost)


class WorkerSinkTask(WorkerTask):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.consumer: Consumer | None = None
        self.task: SinkTask | None = None
        self.dlq: DeadLetterQueueReporter | None = None
        self.current: dict[TopicPartition, int] = {}    # next offset per partition, of records put
        self.committed: dict[TopicPartition, int] = {}
        self.records_put = 0
        self.callback_error: BaseException | None = None

    def initialize_and_start(self) -> None:
        self.key_converter = make_converter(self.wc, self.cc, "key.converter")
        self.value_converter = make_converter(self.wc, self.cc, "value.converter")
        self.transforms = make_transforms(self.cc)
        if self.cc.dlq_topic:
            self.dlq = DeadLetterQueueReporter(self.cc, self.task_id, self.wc.producer_props(),
                                               self.wc.admin_props())
        self.ops = RetryWithToleranceOperator(self.cc, self.label, self.dlq)
        props = {**self.wc.consumer_props(), "group.id": f"connect-{self.cc.name}",
                 "client.id": f"connector-consumer-{self.label}"}
        self.consumer = Consumer(props)
        cls = resolve("connector", self.cc.connector_class)().task_class()
        self.task = cls()
        self.context = SinkTaskContext(self.task_props, self.consumer)
        self.task.initialize(self.context)
        self.task.start(self.task_props)
        topics = [t.strip() for t in self.task_props.get("topics", "").split(",") if t.strip()]
        regex = self.task_props.get("topics.regex")
        if regex:
            self.consumer.subscribe(pattern=regex, listener=_SinkRebalanceListener(self))
        elif topics:
            self.consumer.subscribe(topics, listener=_SinkRebalanceListener(self))
        else:
            raise ConnectException("Must configure one of topics or topics.regex")

    # -- rebalance callbacks (inside consumer.poll, on this thread) -------------------------------

    def on_assigned(self, tps: list[TopicPartition]) -> None:
        assert self.consumer is not None and self.task is not None
        for tp in tps:
            self.current.pop(tp, None)
        try:
            self.task.open([(tp.topic, tp.partition) for tp in tps])
        except Exception as exc:
            self.callback_error = exc

    def on_revoked(self, tps: list[TopicPartition]) -> None:
        try:
            self.commit_offsets(only=set(tps))
            assert self.task is not None
            self.task.close([(tp.topic, tp.partition) for tp in tps])
        except Exception as exc:
            self.callback_error = exc
        for tp in tps:
            self.current.pop(tp, None)
            self.committed.pop(tp, None)

    def on_lost(self, tps: list[TopicPartition]) -> None:
        try:
            assert self.task is not None
            self.task.close([(tp.topic, tp.partition) for tp in tps])
        except Exception as exc:
            self.callback_error = exc
        for tp in tps:
            self.current.pop(tp, None)
            self.committed.pop(tp, None)

    # -- the loop --------------------------------------------------------------------------------

    def execute(self) -> None:
        consumer = self.consumer
        assert consumer is not None and self.task is not None
        flush_every = self.wc.offset_flush_interval_ms / 1000.0
        next_commit = time.monotonic() + flush_every
        retry_batch: list[SinkRecord] | None = None
        while not self.stopping.is_set():
            if self.callback_error is not None:
                raise ConnectException("sink task rebalance callback failed") from self.callback_error
            if time.monotonic() >= next_commit or self.context.commit_requested:
                self.context.commit_requested = False
                self.commit_offsets()
                next_commit = time.monotonic() + flush_every
            if self.paused:
                if consumer.assignment() - consumer.paused():
                    consumer.pause(*consumer.assignment())
            elif consumer.paused() and retry_batch is None:
                consumer.resume(*consumer.paused())
            if self.context.requested_offsets:
                for (t, p), off in self.context.requested_offsets.items():
                    tp = TopicPartition(t, p)
                    if tp in consumer.assignment():
                        consumer.seek(tp, off)
                self.context.requested_offsets.clear()
            batch = consumer.poll(timeout_ms=200)
            if self.paused and retry_batch is None:
                continue
            if retry_batch is not None:
                records = retry_batch
            else:
                records = self._convert(batch)
            try:
                if records or retry_batch is not None:
                    self.task.put(records)
                retry_batch = None
                self.records_put += len(records)
                if retry_batch is None and consumer.paused() and not self.paused:
                    consumer.resume(*consumer.paused())
            except RetriableException as exc:
                log.warning("task %s: put failed, retrying the batch: %s", self.label, exc)
                retry_batch = records
                consumer.pause(*consumer.assignment())
                self.stopping.wait(0.5)
                continue
            for tp, recs in batch.items():
                if recs and tp in consumer.assignment():
                    self.current[tp] = recs[-1].offset + 1

    def _convert(self, batch: dict) -> list[SinkRecord]:
        out: list[SinkRecord] = []
        ops = self.ops
        kc, vc = self.key_converter, self.value_converter
        kname, vname = type(kc).__name__, type(vc).__name__
        for tp, records in batch.items():
            for raw in records:
                try:  # fast path; on failure the operator retries/tolerates the same pure call
                    ks = kc.to_connect_data(raw.topic, raw.key)
                except Exception:
                    ks = ops.execute(KEY_CONVERTER, kname, lambda: kc.to_connect_data(raw.topic, raw.key), raw)
                    if ks is SKIPPED:
                        continue
                try:
                    vs = vc.to_connect_data(raw.topic, raw.value)
                except Exception:
                    vs = ops.execute(VALUE_CONVERTER, vname, lambda: vc.to_connect_data(raw.topic, raw.value), raw)
                    if vs is SKIPPED:
                        continue
                rec: Any = SinkRecord(raw.topic, raw.partition, ks[0], ks[1], vs[0], vs[1], raw.timestamp,
                                      list(raw.headers or []), raw.offset, raw.timestamp_type)
                for alias, t in self.transforms:
                    rec = ops.execute(TRANSFORMATION, type(t).__name__, functools.partial(t.apply, rec), raw)
                    if rec is None or rec is SKIPPED:
                        break
                if rec is not None and rec is not SKIPPED:
                    out.append(rec)
        return out

    def commit_offsets(self, only: set[TopicPartition] | None = None) -> None:
        """pre_commit (flush) the sink, flush the DLQ, then commit the consumer offsets that changed."""
        if self.task is None or self.consumer is None:
            return
        current = {tp: o for tp, o in self.current.items() if only is None or tp in only}
        if not current:
            return
        offsets = self.task.pre_commit({(tp.topic, tp.partition): o for tp, o in current.items()})
        if self.dlq is not None:
            self.dlq.flush()
        todo = {TopicPartition(t, p): o for (t, p), o in (offsets or {}).items()}
        todo = {tp: o for tp, o in todo.items() if self.committed.get(tp) != o}
        if todo:
            self.consumer.commit(todo)
            self.committed.update(todo)

    def close(self) -> None:
        try:
            if self.consumer is not None and self.task is not None and not self.failed:
                try:
                    self.commit_offsets()
                except Exception:
                    log.exception("task %s: final commit failed", self.label)
        finally:
            if self.task is not None:
                try:
                    self.task.stop()
                except Exception:
                    log.exception("task %s: stop() failed", self.label)
            if self.consumer is not None:
                self.consumer.close(autocommit=False)
            if self.dlq is not None:
                self.dlq.close()
