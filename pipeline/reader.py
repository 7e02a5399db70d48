"""Executor-side reading of one offset range ``[start, end)`` of one partition into Arrow batches.

Invariant: a range is read by a fresh Consumer of its own (nothing from the
driver but the picklable ``RangePartition`` and ``ReadOptions``), every record
with ``start <= offset < end`` that the log still holds is returned once, in
offset order, and a hole below the log start offset is never passed over
silently: it fails the task (failOnDataLoss=true) or is logged and skipped.
"""
from __future__ import annotations

import time
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from odradek.client import Consumer, KafkaError, TopicPartition
from odradek.protocol.errors import ErrorCode

from .offsets import EARLIEST, data_loss
from .options import ReadOptions

BATCH_ROWS = 8192

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [
        pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")), pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADER_TYPE))
    return pa.schema(fields)


class RangePartition(InputPartition):
    """One Spark input partition: records ``[start, end)`` of ``topic``-``partition`` (start -2 = earliest)."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"RangePartition({self.topic}-{self.partition} [{self.start}, {self.end}))"


class _Columns:
    """Column buffers of the records read so far, flushed as one RecordBatch."""

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self.topic, self.partition, self.headers_on = topic, partition, include_headers
        self.schema = arrow_schema(include_headers)
        self.reset()

    def reset(self) -> None:
        self.keys: list = []
        self.values: list = []
        self.offsets: list[int] = []
        self.ts: list[int] = []
        self.ts_types: list[int] = []
        self.headers: list = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, r) -> None:
        self.keys.append(r.key)
        self.values.append(r.value)
        self.offsets.append(r.offset)
        self.ts.append(r.timestamp * 1000)
        self.ts_types.append(r.timestamp_type)
        if self.headers_on:
            self.headers.append([{"key": k, "value": v} for k, v in r.headers] if r.headers else [])

    def batch(self) -> pa.RecordBatch:
        n = len(self.offsets)
        cols = [
            pa.array(self.keys, pa.binary()), pa.array(self.values, pa.binary()),
            pa.array([self.topic] * n, pa.string()), pa.array([self.partition] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()), pa.array(self.ts, pa.timestamp("us", tz="UTC")),
            pa.array(self.ts_types, pa.int32()),
        ]
        if self.headers_on:
            cols.append(pa.array(self.headers, HEADER_TYPE))
        out = pa.RecordBatch.from_arrays(cols, schema=self.schema)
        self.reset()
        return out


def _log_start(consumer: Consumer, tp: TopicPartition) -> int:
    return consumer.beginning_offsets([tp])[tp]


def _check_start(opts: ReadOptions, consumer: Consumer, tp: TopicPartition, wanted: int, end: int) -> int:
    """Where reading can begin: ``wanted``, or past a hole left by retention (per failOnDataLoss)."""
    first = _log_start(consumer, tp)
    if wanted == EARLIEST:
        return first
    if wanted < first:
        lost_to = min(first, end)
        data_loss(opts, f"records of {tp.topic}-{tp.partition} at offsets [{wanted}, {lost_to}) were "
                        f"deleted (log start offset is now {first}) before they were read")
        return first
    return wanted


def read_range(opts: ReadOptions, part: RangePartition) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records of ``part`` (see the module invariant)."""
    tp = TopicPartition(part.topic, part.partition)
    end = part.end
    consumer = Consumer(**opts.consumer, auto_offset_reset="none", enable_auto_commit=False)
    try:
        consumer.assign([tp])
        pos = _check_start(opts, consumer, tp, part.start, end)
        if pos >= end:
            return
        consumer.seek(tp, pos)
        cols = _Columns(part.topic, part.partition, opts.include_headers)
        last_progress = time.monotonic()
        while pos < end:
            try:
                fetched = consumer.poll(timeout_ms=1000, max_records=BATCH_ROWS)
            except KafkaError as exc:
                if exc.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise
                pos = _check_start(opts, consumer, tp, pos, end)  # retention overtook the reader
                consumer.seek(tp, min(pos, end))
                continue
            records = fetched.get(tp, ())
            for r in records:
                if r.offset >= end:
                    break
                if r.offset >= pos:
                    cols.add(r)
            if records:
                pos = max(pos, min(records[-1].offset + 1, end))
            try:
                pos = max(pos, min(consumer.position(tp), end))  # compacted gaps and batch ends
            except KafkaError:
                pass
            if records or len(cols) >= BATCH_ROWS:
                last_progress = time.monotonic()
            if len(cols) >= BATCH_ROWS:
                yield cols.batch()
            elif not records and time.monotonic() - last_progress > opts.poll_timeout_ms / 1000.0:
                raise TimeoutError(
                    f"no records from {tp.topic}-{tp.partition} for {opts.poll_timeout_ms} ms at offset {pos} "
                    f"(reading up to {end}); is its leader down? (kafkaConsumer.pollTimeoutMs)")
        if len(cols):
            yield cols.batch()
    finally:
        consumer.close()
