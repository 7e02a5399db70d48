"""Batch and streaming writers of the ``odradek`` sink: each Spark task produces its rows with its own Producer.

Invariant: a task returns its commit message only after ``Producer.flush()``
saw every one of its records acknowledged (acks=all by default); any failed
send fails the task. So when Spark commits a batch every row is in the topic
(nothing lost), and rows are written once unless a task or micro-batch is
retried: Kafka has no way to take records back, so ``abort`` cannot undo a
partial write and a retry may duplicate (at-least-once delivery). The
transactional sink (``exactlyOnce=true``) is ``exactly_once.ExactlyOnceStreamWriter``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from odradek.client import Producer

from .options import OptionError, WriteOptions

log = logging.getLogger("odradek.pipeline")


@dataclass
class ProducedMessage(WriterCommitMessage):
    """What one task wrote: record count per (topic, partition)."""
    records: int = 0
    per_partition: dict[tuple[str, int], int] = field(default_factory=dict)


def check_schema(schema: StructType, opts: WriteOptions) -> None:
    """Spark's Kafka sink rules: value required; key, topic, partition, headers optional and typed."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in types:
        raise OptionError("the odradek sink needs a 'value' column (string or binary)")
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], (StringType, BinaryType)):
            raise OptionError(f"column {name!r} must be string or binary, not {types[name].simpleString()}")
    if opts.topic is None and "topic" not in types:
        raise OptionError("the odradek sink needs a 'topic' option or a 'topic' column")
    if "topic" in types and not isinstance(types["topic"], StringType):
        raise OptionError("column 'topic' must be a string")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise OptionError("column 'partition' must be an int")
    if "headers" in types:
        h = types["headers"]
        ok = (isinstance(h, ArrayType) and isinstance(h.elementType, StructType)
              and [f.name for f in h.elementType.fields] == ["key", "value"])
        if not ok:
            raise OptionError("column 'headers' must be array<struct<key:string,value:binary>>")


def _column(batch: pa.RecordBatch, name: str) -> list | None:
    for i, f in enumerate(batch.schema):
        if f.name.lower() == name:
            return batch.column(i).to_pylist()
    return None


def send_rows(producer: Producer, opts: WriteOptions, batches: Iterator[pa.RecordBatch], msg: ProducedMessage,
              callback: Callable[[Any, BaseException | None], None], errors: list[BaseException]) -> None:
    """``producer.send`` every row of ``batches`` (counted in ``msg``); stops early once ``errors`` is set."""
    for batch in batches:
        n = batch.num_rows
        values = _column(batch, "value")
        keys = _column(batch, "key") or [None] * n
        topics = [opts.topic] * n if opts.topic else _column(batch, "topic")
        parts = _column(batch, "partition") or [None] * n
        headers = _column(batch, "headers") or [None] * n
        for i in range(n):
            topic = topics[i]  # type: ignore[index]
            if not topic:
                raise ValueError("a row has a null topic and no 'topic' option is set")
            hdrs = [(h["key"], h["value"]) for h in headers[i]] if headers[i] else None
            producer.send(topic, value=values[i], key=keys[i], partition=parts[i],  # type: ignore[index]
                          headers=hdrs, callback=callback)
            key = (topic, -1 if parts[i] is None else parts[i])
            msg.per_partition[key] = msg.per_partition.get(key, 0) + 1
        msg.records += n
        if errors:
            break


def produce_batches(opts: WriteOptions, batches: Iterator[pa.RecordBatch]) -> ProducedMessage:
    """Send every row, flush, raise on the first failed record (see the module invariant)."""
    errors: list[BaseException] = []

    def on_done(md: Any, exc: BaseException | None) -> None:
        if exc is not None and not errors:
            errors.append(exc)

    msg = ProducedMessage()
    producer = Producer(**opts.producer)
    try:
        send_rows(producer, opts, batches, msg, on_done, errors)
        producer.flush()
    finally:
        producer.close()
    if errors:
        raise errors[0]
    return msg


def foreach_batch_writer(options: dict[str, str]) -> Callable[[Any, int], None]:
    """A ``foreachBatch`` function writing each micro-batch through the batch sink.

    Spark's Python data source sinks accept output mode append only; this is how an
    update-mode query (an aggregation) writes to odradek. A micro-batch that is
    re-run after a failure is written again (at-least-once, as the streaming sink).
    """
    opts = dict(options)

    def write(batch_df: Any, batch_id: int) -> None:
        batch_df.write.format("odradek").mode("append").options(**opts).save()

    return write


def _total(messages: list) -> int:
    return sum(m.records for m in messages if isinstance(m, ProducedMessage))


class BatchWriter(DataSourceArrowWriter):
    """``df.write.format("odradek")``."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedMessage:
        return produce_batches(self.opts, iterator)

    def commit(self, messages: list) -> None:
        log.info("odradek sink: wrote %d records", _total(messages))

    def abort(self, messages: list) -> None:
        log.warning("odradek sink: write failed; %d records of successful tasks stay in the topics "
                    "(Kafka cannot take records back)", _total(messages))


class StreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("odradek")``: one producer per task per micro-batch."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedMessage:
        return produce_batches(self.opts, iterator)

    def commit(self, messages: list, batchId: int) -> None:
        log.info("odradek sink: batch %d wrote %d records", batchId, _total(messages))

    def abort(self, messages: list, batchId: int) -> None:
        log.warning("odradek sink: batch %d failed; %d records already written stay and will be "
                    "written again when the batch is retried (at-least-once)", batchId, _total(messages))
