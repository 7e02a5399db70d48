"""JdbcSourceConnector: rows of SQLite/PostgreSQL tables (or a query) to topics, incrementally
(the settings of Confluent's JDBC source: ``mode``, ``incrementing.column.name``,
``timestamp.column.name``, ``table.whitelist``/``query``, ``poll.interval.ms``, ``topic.prefix``).

Invariant: a table is read in the order of its offset columns and a row's
source offset ``{"incrementing": id}`` / ``{"timestamp": ms, "timestamp_nanos":
ns}`` (both in timestamp+incrementing mode) is the position just past it, so
restarting from any committed offset re-reads only rows at or after it
(never loses one). Timestamp modes only read rows older than the database's
current time minus ``timestamp.delay.interval.ms``, so rows committed later
with an earlier timestamp are not skipped. Records: topic ``topic.prefix`` +
table, value a struct with the table's columns, key null.
"""
from __future__ import annotations

import datetime as _dt
import time
from typing import Any, Mapping

from .api import ConfigDef, ConfigException, SourceConnector, SourceRecord, SourceTask
from .jdbc_dialect import Dialect, dialect_for, ms_to_dt, parse_ts

MODES = ("bulk", "incrementing", "timestamp", "timestamp+incrementing")


def _mode(v: Any) -> str | None:
    return None if v in MODES else f"mode must be one of {', '.join(MODES)}"


class JdbcSourceConnector(SourceConnector):
    def config_def(self) -> ConfigDef:
        return (ConfigDef()
                .define("connection.url", required=True, doc="sqlite:///path or postgresql://user@host:port/db")
                .define("connection.user").define("connection.password", "password")
                .define("mode", "string", required=True, validator=_mode)
                .define("incrementing.column.name", default="")
                .define("timestamp.column.name", default="")
                .define("table.whitelist", "list", default=[])
                .define("table.blacklist", "list", default=[])
                .define("query", default="")
                .define("poll.interval.ms", "int", 5000)
                .define("batch.max.rows", "int", 100)
                .define("timestamp.delay.interval.ms", "long", 0)
                .define("topic.prefix", required=True))

    def validate(self, props: Mapping[str, str]) -> dict[str, list[str]]:
        errors = super().validate(props)
        mode = props.get("mode")
        if mode in ("incrementing", "timestamp+incrementing") and not props.get("incrementing.column.name"):
            errors["incrementing.column.name"].append(f"incrementing.column.name is required in mode {mode}")
        if mode in ("timestamp", "timestamp+incrementing") and not props.get("timestamp.column.name"):
            errors["timestamp.column.name"].append(f"timestamp.column.name is required in mode {mode}")
        if props.get("query") and props.get("table.whitelist"):
            errors["query"].append("Do not specify table filtering configs with 'query'")
        return errors

    def start(self, props: dict[str, str]) -> None:
        self.props = dict(props)
        self.cfg = self.config_def().parse(props)
        for name, errs in self.validate(props).items():
            if errs:
                raise ConfigException(errs[0])
        self.dialect = dialect_for(self.cfg["connection.url"], self.cfg["connection.user"],
                                   self.cfg["connection.password"])

    def _tables(self) -> list[str]:
        if self.cfg["table.whitelist"]:
            return list(self.cfg["table.whitelist"])
        conn = self.dialect.connect(autocommit=True)
        try:
            return [t for t in self.dialect.tables(conn) if t not in self.cfg["table.blacklist"]]
        finally:
            conn.close()

    def task_class(self) -> type:
        return JdbcSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        if self.cfg["query"]:
            return [{**self.props, "tables": ""}]
        tables = self._tables()
        n = max(1, min(max_tasks, len(tables)))
        groups = [tables[i::n] for i in range(n)]
        return [{**self.props, "tables": ",".join(g)} for g in groups if g]


class _TableQuerier:
    """Polls one table (or the query) from its current offset."""

    def __init__(self, task: "JdbcSourceTask", table: str | None) -> None:
        self.task, self.table = task, table
        self.partition = {"table": table} if table else {"query": "query"}
        self.topic = task.prefix + (table or "")
        self.inc: int | None = None
        self.ts: _dt.datetime | None = None
        self.next_poll = 0.0
        self.rows: list[tuple] = []
        self.columns: list[tuple[str, dict]] = []
        self.schema: dict = {}
        off = task.context.offset_storage_reader.offset(self.partition)
        if off:
            if off.get("incrementing") is not None:
                self.inc = int(off["incrementing"])
            if off.get("timestamp") is not None:
                self.ts = ms_to_dt(off["timestamp"], off.get("timestamp_nanos"))

    def _sql(self, now: _dt.datetime) -> tuple[str, list[Any]]:
        d: Dialect = self.task.dialect
        mode, q = self.task.mode, d.quote
        src = d.qualified(self.table) if self.table else f"({self.task.query}) AS odradek_q"
        inc_col, ts_col = self.task.inc_col, self.task.ts_col
        upper = now - _dt.timedelta(milliseconds=self.task.delay_ms)
        if mode == "bulk":
            return f"SELECT * FROM {src}", []
        if mode == "incrementing":
            return (f"SELECT * FROM {src} WHERE {q(inc_col)} > {d.placeholder} ORDER BY {q(inc_col)} ASC",
                    [-1 if self.inc is None else self.inc])
        ts = self.ts or _dt.datetime(1970, 1, 1)
        te = d.ts_expr(ts_col)
        p = d.placeholder
        if mode == "timestamp":
            return (f"SELECT * FROM {src} WHERE {te} > {p} AND {te} < {p} ORDER BY {q(ts_col)} ASC",
                    [d.ts_param(ts), d.ts_param(upper)])
        return (f"SELECT * FROM {src} WHERE {te} < {p} AND (({te} = {p} AND {q(inc_col)} > {p}) OR {te} > {p}) "
                f"ORDER BY {q(ts_col)}, {q(inc_col)} ASC",
                [d.ts_param(upper), d.ts_param(ts), -1 if self.inc is None else self.inc, d.ts_param(ts)])

    def _fetch(self) -> None:
        task = self.task
        conn = task.conn
        now = task.dialect.now(conn)
        sql, params = self._sql(now)
        cur = conn.execute(sql, params)
        names = [c[0] for c in cur.description]
        declared = dict(task.dialect.columns(conn, self.table)) if self.table else {}
        rows = cur.fetchall()
        self.columns = [(n, declared.get(n) or _infer(rows, i)) for i, n in enumerate(names)]
        self.schema = {"type": "struct", "optional": False, "name": self.table or "query",
                       "fields": [{**s, "field": n} for n, s in self.columns]}
        self.rows = rows

    def poll(self, max_rows: int) -> list[SourceRecord]:
        task = self.task
        if not self.rows:
            self._fetch()
            if not self.rows:
                self.next_poll = time.monotonic() + task.poll_interval
                return []
        batch, self.rows = self.rows[:max_rows], self.rows[max_rows:]
        d = task.dialect
        names = [n for n, _ in self.columns]
        inc_i = names.index(task.inc_col) if task.inc_col in names else -1
        ts_i = names.index(task.ts_col) if task.ts_col in names else -1
        out = []
        for row in batch:
            value = {n: d.to_connect(s, v) for (n, s), v in zip(self.columns, row)}
            offset: dict[str, Any] = {}
            if task.mode in ("incrementing", "timestamp+incrementing"):
                if inc_i < 0:
                    raise ConfigException(f"incrementing column {task.inc_col!r} not found in {self.topic}")
                self.inc = int(row[inc_i])
                offset["incrementing"] = self.inc
            if task.mode in ("timestamp", "timestamp+incrementing"):
                if ts_i < 0:
                    raise ConfigException(f"timestamp column {task.ts_col!r} not found in {self.topic}")
                self.ts = parse_ts(row[ts_i])
                assert self.ts is not None
                offset["timestamp"] = (self.ts - _dt.datetime(1970, 1, 1)) // _dt.timedelta(milliseconds=1)
                offset["timestamp_nanos"] = self.ts.microsecond * 1000
            out.append(SourceRecord(self.partition, offset or None, self.topic, None, None, None, self.schema, value,
                                    int(time.time() * 1000)))
        if not self.rows:
            self.next_poll = time.monotonic() + (0 if len(batch) >= max_rows else task.poll_interval)
        return out


def _infer(rows: list[tuple], i: int) -> dict:
    for r in rows:
        v = r[i]
        if v is None:
            continue
        if isinstance(v, bool):
            return {"type": "boolean", "optional": True}
        if isinstance(v, int):
            return {"type": "int64", "optional": True}
        if isinstance(v, float):
            return {"type": "float64", "optional": True}
        if isinstance(v, (bytes, memoryview)):
            return {"type": "bytes", "optional": True}
        if isinstance(v, _dt.datetime):
            return {"type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp",
                    "version": 1}
        break
    return {"type": "string", "optional": True}


class JdbcSourceTask(SourceTask):
    def start(self, props: dict[str, str]) -> None:
        cfg = JdbcSourceConnector().config_def().parse(props)
        self.mode = cfg["mode"]
        self.inc_col, self.ts_col = cfg["incrementing.column.name"], cfg["timestamp.column.name"]
        self.query = cfg["query"]
        self.prefix = cfg["topic.prefix"]
        self.poll_interval = cfg["poll.interval.ms"] / 1000.0
        self.max_rows = cfg["batch.max.rows"]
        self.delay_ms = cfg["timestamp.delay.interval.ms"]
        self.dialect = dialect_for(cfg["connection.url"], cfg["connection.user"], cfg["connection.password"])
        self.conn = self.dialect.connect(autocommit=True)
        tables = [t for t in props.get("tables", "").split(",") if t]
        self.queriers = [_TableQuerier(self, None)] if self.query else [_TableQuerier(self, t) for t in tables]

    def poll(self) -> list[SourceRecord] | None:
        now = time.monotonic()
        due = [q for q in self.queriers if q.next_poll <= now]
        if not due:
            wait = min(q.next_poll for q in self.queriers) - now if self.queriers else 0.1
            time.sleep(max(0.0, min(wait, 0.1)))
            return None
        out: list[SourceRecord] = []
        for q in due:
            out += q.poll(self.max_rows)
        return out

    def stop(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
