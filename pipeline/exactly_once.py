"""Exactly-once streaming sink: each write task of a micro-batch is one Kafka transaction that records its batch id.

Invariant: write task ``p`` of micro-batch ``b`` produces through the transactional id
``f"{prefix}-{p}"`` and, inside the same transaction, commits offset ``b + 1`` for the
group ``f"{prefix}-{p}"`` (metadata: query id, batch, task), so the rows and the
"batch b done for task p" record become visible together or not at all. Before
writing, the task fences every earlier producer of its id (``init_transactions``,
which also completes or aborts their open transaction) and only then reads that
group's committed offset: when it is above ``b`` for this query, the transaction of
``(b, p)`` already committed and the task writes nothing. Hence a task's rows reach
``read_committed`` consumers exactly once, provided that a replayed micro-batch gives
task ``p`` the same rows (true for the odradek source, which replays the offset ranges
kept in the checkpoint, and a deterministic query).
"""
from __future__ import annotations

import itertools
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter

from odradek.client import AdminClient, KafkaError, OffsetAndMetadata, Producer, TopicPartition
from odradek.client.config import COMMON
from odradek.protocol.errors import ErrorCode

from .options import WriteOptions
from .writer import ProducedMessage, _column, _total, send_rows

log = logging.getLogger("odradek.pipeline")

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # local properties Spark's MicroBatchExecution sets
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # kept in the checkpoint: the same after a restart
_FENCED = {ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH}


class FencedTaskError(RuntimeError):
    """A newer attempt of the same write task took over its transactional id; this attempt gave up."""


@dataclass
class TransactionMessage(ProducedMessage):
    """What one exactly-once task did: its transaction, or ``skipped`` when (batch, task) had committed before."""
    batch_id: int = -1
    task: int = -1
    transactional_id: str = ""
    skipped: bool = False


def default_prefix(query_id: str) -> str:
    """The transactional id prefix of a query with no ``transactionalIdPrefix`` option."""
    return f"odradek-spark-{query_id}"


def transactional_id(prefix: str, task: int) -> str:
    """Transactional id of write task ``task``; also the group id of its batch marker."""
    return f"{prefix}-{task}"


def marker_metadata(query_id: str, batch_id: int, task: int) -> str:
    return json.dumps({"query": query_id, "batch": batch_id, "task": task}, separators=(",", ":"))


def committed_batches(offsets: dict[TopicPartition, OffsetAndMetadata], query_id: str) -> int:
    """Batches of ``query_id`` the marker group has committed, i.e. the next batch id to write (0: none).

    Offsets whose metadata names another query (an earlier checkpoint reusing the prefix) are ignored.
    """
    done = 0
    for om in offsets.values():
        try:
            meta = json.loads(om.metadata or "")
        except ValueError:
            continue
        if isinstance(meta, dict) and meta.get("query") == query_id:
            done = max(done, int(om.offset))
    return done


def is_fenced(exc: BaseException) -> bool:
    return type(exc).__name__ == "ProducerFencedError" or (
        isinstance(exc, KafkaError) and getattr(exc, "code", None) in _FENCED)


def fetch_committed_batches(opts: WriteOptions, group_id: str, query_id: str) -> int:
    """``committed_batches`` of ``group_id`` read with OffsetFetch (waits out an unstable offset)."""
    settings = {k: v for k, v in opts.producer.items() if k in COMMON}
    timeout = int(settings.get("request.timeout.ms", 30000)) / 1000.0
    deadline = time.monotonic() + timeout
    with AdminClient(**settings) as admin:
        while True:
            try:
                return committed_batches(admin.list_consumer_group_offsets(group_id), query_id)
            except KafkaError as exc:
                if exc.code != ErrorCode.UNSTABLE_OFFSET_COMMIT or time.monotonic() > deadline:
                    raise
            time.sleep(0.1)  # a transaction of this group is being completed: ask again


def _first_rows(batches: Iterator[pa.RecordBatch]) -> tuple[pa.RecordBatch | None, Iterator[pa.RecordBatch]]:
    for batch in batches:
        if batch.num_rows:
            return batch, batches
    return None, batches


def write_task(opts: WriteOptions, batches: Iterator[pa.RecordBatch], batch_id: int, task: int,
               query_id: str) -> TransactionMessage:
    """Write task ``task`` of micro-batch ``batch_id`` in one transaction (see the module invariant)."""
    prefix = opts.transactional_id_prefix or default_prefix(query_id)
    txn_id = transactional_id(prefix, task)
    msg = TransactionMessage(batch_id=batch_id, task=task, transactional_id=txn_id)
    errors: list[BaseException] = []

    def on_done(md: Any, exc: BaseException | None) -> None:
        if exc is not None and not errors:
            errors.append(exc)

    producer = Producer(**{**opts.producer, "transactional.id": txn_id, "enable.idempotence": True})
    in_txn = False
    try:
        producer.init_transactions()  # fences earlier attempts; their open transaction is aborted
        if fetch_committed_batches(opts, txn_id, query_id) > batch_id:
            msg.skipped = True
            msg.records = sum(b.num_rows for b in batches)
            log.info("odradek sink: batch %d task %d committed before; %d rows not written again",
                     batch_id, task, msg.records)
            return msg
        first, rest = _first_rows(batches)
        if first is None:
            return msg  # nothing to write: a replay has nothing either
        marker_topic = opts.topic or (_column(first, "topic") or [None])[0]
        producer.begin_transaction()
        in_txn = True
        send_rows(producer, opts, itertools.chain([first], rest), msg, on_done, errors)
        producer.flush()
        if errors:
            raise errors[0]
        if not marker_topic:
            raise ValueError("a row has a null topic and no 'topic' option is set")
        marker = OffsetAndMetadata(batch_id + 1, marker_metadata(query_id, batch_id, task))
        producer.send_offsets_to_transaction({TopicPartition(marker_topic, 0): marker}, txn_id)
        producer.commit_transaction()
        in_txn = False
        return msg
    except BaseException as exc:
        if is_fenced(exc):
            raise FencedTaskError(f"write task {task} of batch {batch_id} ({txn_id}) was fenced by a newer "
                                  f"attempt of the same task; this attempt wrote nothing") from exc
        if in_txn:
            try:
                producer.abort_transaction()
            except Exception as abort_exc:  # the coordinator aborts it on timeout or on the next attempt
                log.warning("odradek sink: abort of %s failed: %s", txn_id, abort_exc)
        raise
    finally:
        producer.close()


def task_context() -> tuple[int, int, str]:
    """(batch id, write task index, query id) of the running Spark task."""
    from pyspark import TaskContext
    tc = TaskContext.get()
    batch = tc.getLocalProperty(BATCH_ID_PROPERTY) if tc is not None else None
    query = tc.getLocalProperty(QUERY_ID_PROPERTY) if tc is not None else None
    if tc is None or batch is None or not query:
        raise RuntimeError("exactlyOnce=true: no micro-batch id in this task (the option is for writeStream)")
    return int(batch), tc.partitionId(), query


class ExactlyOnceStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("odradek").option("exactlyOnce", "true")``: one transaction per task per micro-batch."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TransactionMessage:
        batch_id, task, query_id = task_context()
        return write_task(self.opts, iterator, batch_id, task, query_id)

    def commit(self, messages: list, batchId: int) -> None:
        done = [m for m in messages if isinstance(m, TransactionMessage)]
        skipped = [m for m in done if m.skipped]
        log.info("odradek sink: batch %d committed: %d records in %d transactions, %d tasks found their "
                 "transaction committed before (not written again)", batchId,
                 _total([m for m in done if not m.skipped]), len(done) - len(skipped), len(skipped))

    def abort(self, messages: list, batchId: int) -> None:
        log.warning("odradek sink: batch %d failed; tasks that committed their transaction (%d records) "
                    "will skip their rows when the batch is retried, the others were aborted",
                    batchId, _total([m for m in messages if isinstance(m, TransactionMessage) and not m.skipped]))
