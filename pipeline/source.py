"""The ``odradek`` PySpark data source: batch and streaming reads and writes of odradek topics.

Invariant: the schema and options are Spark's Kafka source's; the driver side
(``partitions``/``latestOffset``/``commit``) plans half-open offset ranges with
an ``OffsetPlanner``, one Spark input partition per topic partition; executors
read a range through ``reader.read_range`` with nothing but the pickled options
and partition, so it runs the same on ``local[*]`` and on a Spark cluster.
Streaming offsets are JSON ``{"topic": {"partition": next_offset}}`` in Spark's
checkpoint. Importing this module registers nothing by itself; ``register(spark)``
does (``spark.dataSource.register``), and the session helper calls it.
"""
from __future__ import annotations

import logging
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from odradek.client import TopicPartition

from .exactly_once import ExactlyOnceStreamWriter
from .offsets import EARLIEST, LATEST, OffsetPlanner, data_loss, limit_offsets, to_map, to_tps
from .options import parse_read_options, parse_write_options, ReadOptions
from .reader import RangePartition, read_range
from .writer import BatchWriter, StreamWriter, check_schema

log = logging.getLogger("odradek.pipeline")

NAME = "odradek"

BASE_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
               "timestamp timestamp, timestampType int")
HEADERS_SCHEMA = BASE_SCHEMA + ", headers array<struct<key:string,value:binary>>"


def _ranges(start: dict[TopicPartition, int], end: dict[TopicPartition, int]) -> list[RangePartition]:
    """One input partition per topic partition with something to read (start -2: earliest)."""
    out = []
    for tp in sorted(end):
        s = start.get(tp, EARLIEST)
        if end[tp] > s or (s == EARLIEST and end[tp] > 0):
            out.append(RangePartition(tp.topic, tp.partition, s, end[tp]))
    return out


class OdradekDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("odradek")``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return HEADERS_SCHEMA if str(self.options.get("includeHeaders", "false")).lower() == "true" else BASE_SCHEMA

    def reader(self, schema: StructType) -> "BatchReader":
        return BatchReader(parse_read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> "StreamReader":
        return StreamReader(parse_read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        opts = parse_write_options(self.options)
        check_schema(schema, opts)
        return BatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter | ExactlyOnceStreamWriter:
        opts = parse_write_options(self.options, streaming=True)
        check_schema(schema, opts)
        return ExactlyOnceStreamWriter(opts) if opts.exactly_once else StreamWriter(opts)


class BatchReader(DataSourceReader):
    """Reads ``[startingOffsets, endingOffsets)`` of every partition once."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[RangePartition]:
        planner = OffsetPlanner(self.opts)
        try:
            every, live, _ = planner.partitions()
            if every - live:
                raise RuntimeError("partitions without a leader: " + ", ".join(
                    f"{t}-{p}" for t, p in sorted(every - live)))
            start = planner.resolve(self.opts.starting, live, EARLIEST, "startingOffsets")
            end = planner.resolve(self.opts.ending, live, LATEST, "endingOffsets")
        finally:
            planner.close()
        missing = live - set(start) - set(end)
        if missing:
            raise RuntimeError(f"could not list offsets of {sorted(missing)}")
        return _ranges(start, end)

    def read(self, partition: RangePartition) -> Iterator:  # type: ignore[override]  # Spark hands back our own partitions
        return read_range(self.opts, partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader; see the module invariant. Driver clients are not pickled to executors."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._planner: OffsetPlanner | None = None
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow end

    def __getstate__(self) -> dict:
        return {"opts": self.opts, "_planner": None, "_target": None}

    @property
    def planner(self) -> OffsetPlanner:
        if self._planner is None:
            self._planner = OffsetPlanner(self.opts)
        return self._planner

    def initialOffset(self) -> dict:
        _, live, _ = self.planner.partitions()
        start = self.planner.resolve(self.opts.starting, live, LATEST, "startingOffsets")
        return to_map(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        mpt = self.opts.max_offsets_per_trigger
        return ReadMaxRows(mpt) if mpt else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        _, live, _ = self.planner.partitions()
        self._target = self.planner.list_offsets(live, LATEST)
        log.info("odradek source: Trigger.AvailableNow reads up to %s", to_map(self._target))

    def _available(self, start: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Latest offsets of every partition to read: those of ``start`` plus new ones (from earliest)."""
        every, live, existing = self.planner.partitions()
        for tp in sorted(set(start) - every):
            if tp.topic not in existing:
                data_loss(self.opts, f"topic {tp.topic!r} was deleted; offsets from {start[tp]} of partition "
                                     f"{tp.partition} were not read")
            else:
                data_loss(self.opts, f"partition {tp.topic}-{tp.partition} disappeared")
        if self._target is not None:
            latest = dict(self._target)
        else:
            latest = self.planner.list_offsets(live, LATEST)
        out: dict[TopicPartition, int] = {}
        for tp in every:
            if tp in start:
                now = latest.get(tp, start[tp])
                if now < start[tp]:  # the log was truncated or recreated under us
                    data_loss(self.opts, f"the end offset of {tp.topic}-{tp.partition} went back from "
                                         f"{start[tp]} to {now} (topic recreated or log truncated)")
                    out[tp] = now
                else:
                    out[tp] = now
            elif tp in latest:
                out[tp] = latest[tp]
        return out

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        start_tps = to_tps(start)
        latest = self._available(start_tps)
        new = {tp for tp in latest if tp not in start_tps}
        if new:
            log.info("odradek source: new partitions %s, read from their earliest offset",
                     ", ".join(f"{t}-{p}" for t, p in sorted(new)))
        concrete = {**{tp: o for tp, o in start_tps.items() if tp in latest},
                    **self.planner.list_offsets(new, EARLIEST)}
        latest = {tp: o for tp, o in latest.items() if tp in concrete}  # new ones whose start is known
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = limit_offsets(concrete, latest, max_rows)
        return to_map(end)

    def reportLatestOffset(self) -> dict | None:
        return None

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        return _ranges(to_tps(start), to_tps(end))

    def read(self, partition: RangePartition) -> Iterator:  # type: ignore[override]  # Spark hands back our own partitions
        return read_range(self.opts, partition)

    def commit(self, end: dict) -> None:
        pass

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None


def register(spark) -> None:
    """Make ``format("odradek")`` available in ``spark`` (a SparkSession)."""
    spark.dataSource.register(OdradekDataSource)
