"""Connect throughput: lines/s of FileStreamSource/Sink and rows/s of the JDBC source/sink
(SQLite, and PostgreSQL with ``--postgres-url``), each through an in-process standalone worker
against a running cluster.

    odradek cluster up
    python -m odradek.pipeline.connect.bench --bootstrap-server 127.0.0.1:9092 \\
        [--lines 200000] [--rows 100000] [--postgres-url postgresql://user@127.0.0.1:5432/db]

Invariant: every measurement starts its clock when the connector is created and stops
when the last record is visible where it goes (end offset of the topic, line
count of the file, row count of the table), so the numbers include worker start,
conversion, the producer/consumer and the commit path.
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
import uuid
from typing import Any, Callable

from odradek.client import AdminClient, Consumer, NewTopic, TopicPartition

from .config import WorkerConfig
from .herder import StandaloneHerder

STRING = "org.apache.kafka.connect.storage.StringConverter"
JSON = "org.apache.kafka.connect.json.JsonConverter"


def _wait(cond: Callable[[], bool], timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step did not finish")
        time.sleep(0.02)


def _create_topic(bs: str, topic: str) -> None:
    admin = AdminClient(bootstrap_servers=bs)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()


def _end_offset(bs: str, topic: str) -> Callable[[], int]:
    c = Consumer(bootstrap_servers=bs)
    tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or [0])]
    return lambda: sum(c.end_offsets(tps).values())


def _herder(bs: str, tmp: str, converter: str) -> StandaloneHerder:
    wc = WorkerConfig({"bootstrap.servers": bs, "key.converter": converter, "value.converter": converter,
                       "offset.storage.file.filename": os.path.join(tmp, f"offsets-{uuid.uuid4().hex}"),
                       "offset.flush.interval.ms": "1000", "rest.port": "0"}, distributed=False)
    h = StandaloneHerder(wc)
    h.start()
    return h


def _timed(bs: str, tmp: str, converter: str, name: str, config: dict[str, str], done: Callable[[], bool]) -> float:
    h = _herder(bs, tmp, converter)
    try:
        t0 = time.perf_counter()
        h.put_connector_config(name, {"name": name, **config}, allow_replace=False)
        _wait(done)
        return time.perf_counter() - t0
    finally:
        h.stop()


def _report(label: str, n: int, seconds: float, unit: str) -> dict[str, Any]:
    rate = n / seconds
    print(f"{label:<34} {n:>9,} {unit} in {seconds:7.2f} s = {rate:>10,.0f} {unit}/s", flush=True)
    return {"what": label, "n": n, "seconds": seconds, "rate": rate}


def bench_file(bs: str, tmp: str, lines: int) -> list[dict]:
    topic = f"bench-file-{uuid.uuid4().hex[:6]}"
    _create_topic(bs, topic)
    src = os.path.join(tmp, "in.txt")
    with open(src, "w") as f:
        for i in range(lines):
            f.write(f"line {i:09d} " + "x" * 80 + "\n")
    end = _end_offset(bs, topic)
    out = [_report("file source (StringConverter)", lines,
                   _timed(bs, tmp, STRING, "bench-fsrc", {"connector.class": "FileStreamSource", "file": src,
                                                          "topic": topic}, lambda: end() >= lines), "lines")]
    dst = os.path.join(tmp, "out.txt")

    def count() -> int:
        try:
            with open(dst, "rb") as f:
                return f.read().count(b"\n")
        except FileNotFoundError:
            return 0

    out.append(_report("file sink (StringConverter)", lines,
                       _timed(bs, tmp, STRING, "bench-fsink", {"connector.class": "FileStreamSink", "file": dst,
                                                               "topics": topic}, lambda: count() >= lines), "lines"))
    return out


def bench_jdbc(bs: str, tmp: str, rows: int, url: str, label: str, make_table: Callable[[], None],
               count: Callable[[str], int]) -> list[dict]:
    prefix = f"bj{uuid.uuid4().hex[:6]}-"
    topic = prefix + "bench_rows"
    _create_topic(bs, topic)
    make_table()
    end = _end_offset(bs, topic)
    src = {"connector.class": "JdbcSourceConnector", "connection.url": url, "mode": "incrementing",
           "incrementing.column.name": "id", "table.whitelist": "bench_rows", "topic.prefix": prefix,
           "batch.max.rows": "2000", "poll.interval.ms": "100"}
    out = [_report(f"JDBC source {label} (JSON+schema)", rows,
                   _timed(bs, tmp, JSON, "bench-jsrc", src, lambda: end() >= rows), "rows")]
    target = "bench_copy_" + uuid.uuid4().hex[:6]
    sink = {"connector.class": "JdbcSinkConnector", "connection.url": url, "topics": topic,
            "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id", "auto.create": "true",
            "table.name.format": target}
    out.append(_report(f"JDBC sink {label} (upsert)", rows,
                       _timed(bs, tmp, JSON, "bench-jsink", sink, lambda: count(target) >= rows), "rows"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--postgres-url")
    args = ap.parse_args(argv)
    bs = args.bootstrap_server
    with tempfile.TemporaryDirectory(prefix="connect-bench-") as tmp:
        bench_file(bs, tmp, args.lines)
        db = os.path.join(tmp, "bench.db")

        def sqlite_table() -> None:
            c = sqlite3.connect(db)
            c.execute("CREATE TABLE bench_rows (id INTEGER PRIMARY KEY, name TEXT, amount REAL, note TEXT)")
            c.executemany("INSERT INTO bench_rows VALUES (?, ?, ?, ?)",
                          [(i, f"name-{i}", i * 1.5, "n" * 40) for i in range(1, args.rows + 1)])
            c.commit()
            c.close()

        def sqlite_count(table: str) -> int:
            c = sqlite3.connect(db)
            try:
                return c.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            except sqlite3.OperationalError:
                return 0
            finally:
                c.close()

        bench_jdbc(bs, tmp, args.rows, f"sqlite:///{db}", "SQLite", sqlite_table, sqlite_count)
        if args.postgres_url:
            import psycopg
            pg = psycopg.connect(args.postgres_url, autocommit=True)

            def pg_table() -> None:
                pg.execute("DROP TABLE IF EXISTS bench_rows")
                pg.execute("CREATE TABLE bench_rows (id BIGINT PRIMARY KEY, name TEXT, amount DOUBLE PRECISION, "
                           "note TEXT)")
                with pg.cursor() as cur:
                    cur.execute("INSERT INTO bench_rows SELECT g, 'name-' || g, g * 1.5, repeat('n', 40) "
                                "FROM generate_series(1, %s) g", (args.rows,))

            def pg_count(table: str) -> int:
                try:
                    row = pg.execute(f'SELECT count(*) FROM "{table}"').fetchone()
                    return row[0] if row else 0
                except psycopg.Error:
                    return 0

            bench_jdbc(bs, tmp, args.rows, args.postgres_url, "PostgreSQL", pg_table, pg_count)
            pg.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
