"""Website activity tracking: page-view events -> views per page per one-minute window -> top pages.

Invariant: an event is ``{"user", "page", "timestamp"}`` (epoch ms) JSON keyed by
user; the count for (page, window) is written to the counts topic under the
deterministic key ``page|window-start`` (UTC, ``2024-05-01T12:34:00Z``) with the
JSON value ``{page, window_start, window_end, views}`` (ms), output mode update,
so the latest record per key is the current count and the topic can be compacted.
"""
from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from odradek.client import Consumer, Producer, TopicPartition

SOURCE_TOPIC = "page-views"
SINK_TOPIC = "page-view-counts"
PAGES = ["/", "/pricing", "/docs", "/blog", "/signup", "/login", "/about", "/careers", "/docs/api", "/search"]
EVENT_SCHEMA = "user string, page string, timestamp long"


# -- events ------------------------------------------------------------------------------

def event(user: str, page: str, ts_ms: int) -> bytes:
    return json.dumps({"user": user, "page": page, "timestamp": int(ts_ms)}, separators=(",", ":")).encode()


def random_events(n: int, start_ms: int, span_ms: int, seed: int = 1, users: int = 50
                  ) -> list[tuple[str, str, int]]:
    """``n`` (user, page, ts) events spread over ``[start_ms, start_ms + span_ms)``; pages Zipf-ish."""
    rnd = random.Random(seed)
    weights = [1.0 / (i + 1) for i in range(len(PAGES))]
    out = []
    for _ in range(n):
        out.append((f"user-{rnd.randrange(users)}", rnd.choices(PAGES, weights)[0],
                    start_ms + rnd.randrange(span_ms)))
    return out


def window_start(ts_ms: int, minutes: int = 1) -> int:
    size = minutes * 60_000
    return ts_ms - ts_ms % size


def expected_counts(events: Iterable[tuple[str, str, int]]) -> dict[tuple[str, int], int]:
    """{(page, window_start_ms): views} — what the streaming job must produce."""
    out: dict[tuple[str, int], int] = {}
    for _, page, ts in events:
        k = (page, window_start(ts))
        out[k] = out.get(k, 0) + 1
    return out


def produce(bootstrap: str, events: Iterable[tuple[str, str, int]], topic: str = SOURCE_TOPIC) -> int:
    n = 0
    with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
        for user, page, ts in events:
            p.send(topic, value=event(user, page, ts), key=user.encode(), timestamp_ms=ts)
            n += 1
        p.flush()
    return n


class Generator(threading.Thread):
    """Produces live page views at ``rate`` events/s until ``stop()``; ``sent`` counts them."""

    def __init__(self, bootstrap: str, rate: float, topic: str = SOURCE_TOPIC, users: int = 200,
                 max_lateness_ms: int = 5000) -> None:
        super().__init__(name="page-view-generator", daemon=True)
        self.bootstrap, self.rate, self.topic = bootstrap, rate, topic
        self.users, self.lateness = users, max_lateness_ms
        self.sent = 0
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        rnd = random.Random()
        weights = [1.0 / (i + 1) for i in range(len(PAGES))]
        try:
            with Producer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=20) as p:
                t0 = time.monotonic()
                while not self._halt.is_set():
                    due = int((time.monotonic() - t0) * self.rate) - self.sent
                    for _ in range(min(due, 5000)):
                        now = int(time.time() * 1000) - rnd.randrange(self.lateness + 1)
                        user = f"user-{rnd.randrange(self.users)}"
                        p.send(self.topic, value=event(user, rnd.choices(PAGES, weights)[0], now),
                               key=user.encode())
                        self.sent += 1
                    self._halt.wait(0.05)
                p.flush()
        except BaseException as exc:  # reported by the caller
            self.error = exc


# -- the streaming job ---------------------------------------------------------------------

def window_counts(events_df: Any, watermark: str = "1 minute") -> Any:
    """Raw source rows -> (key, value) rows of per-page one-minute window counts."""
    from pyspark.sql import functions as F

    parsed = (events_df
              .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
              .select("e.*")
              .where(F.col("page").isNotNull() & F.col("timestamp").isNotNull())
              .withColumn("event_time", F.timestamp_millis(F.col("timestamp"))))
    counts = (parsed.withWatermark("event_time", watermark)
              .groupBy(F.window("event_time", "1 minute"), F.col("page"))
              .agg(F.count(F.lit(1)).alias("views")))
    start = F.col("window.start")
    return counts.select(
        F.concat_ws("|", F.col("page"), F.date_format(start, "yyyy-MM-dd'T'HH:mm:ss'Z'")).alias("key"),
        F.to_json(F.struct(
            F.col("page"),
            F.unix_millis(start).alias("window_start"),
            F.unix_millis(F.col("window.end")).alias("window_end"),
            F.col("views"),
        )).alias("value"),
    )


@dataclass
class JobConfig:
    bootstrap: str
    checkpoint: str
    source_topic: str = SOURCE_TOPIC
    sink_topic: str = SINK_TOPIC
    starting_offsets: str = "earliest"
    trigger: str = "2 seconds"  # or "available-now"
    watermark: str = "1 minute"
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True


def start_query(spark: Any, cfg: JobConfig) -> Any:
    """Start the page-view counting query; returns the StreamingQuery."""
    reader = (spark.readStream.format("odradek")
              .option("kafka.bootstrap.servers", cfg.bootstrap)
              .option("subscribe", cfg.source_topic)
              .option("startingOffsets", cfg.starting_offsets)
              .option("failOnDataLoss", str(cfg.fail_on_data_loss).lower()))
    if cfg.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
    from ..writer import foreach_batch_writer

    out = window_counts(reader.load(), cfg.watermark)
    # Spark's Python sinks take append mode only: update mode goes through foreachBatch
    # and the batch sink (same at-least-once guarantee, see docs/pipeline.md).
    sink = foreach_batch_writer({"kafka.bootstrap.servers": cfg.bootstrap, "topic": cfg.sink_topic})
    writer = (out.writeStream.foreachBatch(sink)
              .queryName("page_view_counts")
              .outputMode("update")
              .option("checkpointLocation", cfg.checkpoint))
    if cfg.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=cfg.trigger)
    return writer.start()


# -- reading the counts back ---------------------------------------------------------------------

class CountsView:
    """Latest count per (page, window) read from the counts topic (latest record per key wins)."""

    def __init__(self, bootstrap: str, topic: str = SINK_TOPIC) -> None:
        self.topic = topic
        self.consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        self._assign()
        self.latest: dict[str, dict] = {}
        self.records = 0

    def poll(self, timeout_ms: int = 500) -> bool:
        """Apply newly written counts; True when something changed."""
        changed = False
        if not self.consumer.assignment() and not self._assign():
            time.sleep(timeout_ms / 1000.0)
            return False
        for records in self.consumer.poll(timeout_ms=timeout_ms).values():
            for r in records:
                self.records += 1
                if r.value is None:
                    self.latest.pop(r.key.decode(), None)
                else:
                    self.latest[r.key.decode()] = json.loads(r.value)
                changed = True
        return changed

    def _assign(self) -> bool:
        parts = self.consumer.partitions_for_topic(self.topic) or set()
        self.consumer.assign([TopicPartition(self.topic, p) for p in sorted(parts)])
        return bool(parts)

    def counts(self) -> dict[tuple[str, int], int]:
        return {(v["page"], v["window_start"]): v["views"] for v in self.latest.values()}

    def top(self, n: int = 5) -> tuple[int | None, list[tuple[str, int]]]:
        """(latest window start, its top ``n`` pages by views)."""
        if not self.latest:
            return None, []
        last = max(v["window_start"] for v in self.latest.values())
        rows = sorted(((v["page"], v["views"]) for v in self.latest.values() if v["window_start"] == last),
                      key=lambda pv: (-pv[1], pv[0]))
        return last, rows[:n]

    def close(self) -> None:
        self.consumer.close()


def format_top(window: int | None, rows: list[tuple[str, int]]) -> str:
    if window is None:
        return "no counts yet"
    w = time.strftime("%H:%M", time.gmtime(window / 1000))
    return f"window {w} UTC: " + "  ".join(f"{page} {views}" for page, views in rows)


def follow_top(bootstrap: str, n: int, should_stop: Callable[[], bool], emit: Callable[[str], None],
               topic: str = SINK_TOPIC) -> None:
    """Print the top pages of the latest window whenever they change, until ``should_stop()``."""
    view = CountsView(bootstrap, topic)
    try:
        shown = None
        while not should_stop():
            if view.poll(500):
                line = format_top(*view.top(n))
                if line != shown:
                    emit(line)
                    shown = line
    finally:
        view.close()

