"""JdbcSinkConnector: records with struct values into SQLite/PostgreSQL tables (the settings of
Confluent's JDBC sink: ``insert.mode``, ``pk.mode``, ``pk.fields``, ``auto.create``,
``auto.evolve``, ``table.name.format``, ``batch.size``).

Invariant: ``put`` writes its records in order inside one database
transaction and commits before returning, so everything put is durable when
``flush`` is called and the worker commits the consumer offsets (at least
once; with ``insert.mode=upsert`` a replay rewrites the same rows, so the
table ends up exactly as if each record had been applied once in order). A
table is created from the first record's schema only with ``auto.create=true``.
"""
from __future__ import annotations

import logging
from typing import Any

from .api import ConfigDef, ConnectException, SinkConnector, SinkRecord, SinkTask
from .converters import infer_schema
from .jdbc_dialect import Dialect, dialect_for

log = logging.getLogger(__name__)


def _choice(*options: str):
    return lambda v: None if v in options else f"must be one of {', '.join(options)}"


class JdbcSinkConnector(SinkConnector):
    def config_def(self) -> ConfigDef:
        return (ConfigDef()
                .define("connection.url", required=True).define("connection.user")
                .define("connection.password", "password")
                .define("insert.mode", default="insert", validator=_choice("insert", "upsert"))
                .define("pk.mode", default="none", validator=_choice("none", "record_key", "record_value", "kafka"))
                .define("pk.fields", "list", default=[])
                .define("auto.create", "boolean", False)
                .define("auto.evolve", "boolean", False)
                .define("table.name.format", default="${topic}")
                .define("batch.size", "int", 3000))

    def start(self, props: dict[str, str]) -> None:
        self.props = dict(props)
        self.config_def().parse(props)

    def task_class(self) -> type:
        return JdbcSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]


class JdbcSinkTask(SinkTask):
    def start(self, props: dict[str, str]) -> None:
        cfg = JdbcSinkConnector().config_def().parse(props)
        self.cfg = cfg
        self.dialect: Dialect = dialect_for(cfg["connection.url"], cfg["connection.user"], cfg["connection.password"])
        self.conn = self.dialect.connect(autocommit=False)
        self.known: dict[str, set[str]] = {}  # table -> columns
        if cfg["insert.mode"] == "upsert" and cfg["pk.mode"] == "none":
            raise ConnectException("insert.mode=upsert needs a pk.mode other than none")

    # -- record -> row -----------------------------------------------------------------------------

    def _row(self, r: SinkRecord) -> tuple[list[tuple[str, dict]], dict[str, Any], list[str]]:
        """(fields with schemas, values, primary key columns) for one record."""
        value, vschema = r.value, r.value_schema
        if not isinstance(value, dict):
            raise ConnectException(f"JDBC sink needs struct (or map) values, got {type(value).__name__} at "
                                   f"{r.topic}-{r.kafka_partition}@{r.kafka_offset}")
        if vschema is None:
            vschema = infer_schema(value) or {"type": "struct", "fields": []}
        fields = [(f["field"], f) for f in vschema.get("fields", [])]
        values = dict(value)
        mode, pk_fields = self.cfg["pk.mode"], list(self.cfg["pk.fields"])
        pks: list[str] = []
        if mode == "record_value":
            pks = pk_fields or [n for n, _ in fields]
        elif mode == "record_key":
            if isinstance(r.key, dict):
                kschema = r.key_schema or infer_schema(r.key) or {"fields": []}
                kfields = {f["field"]: f for f in kschema.get("fields", [])}
                pks = pk_fields or list(kfields)
                for p in pks:
                    if p not in values:
                        fields.append((p, {**kfields.get(p, {"type": "string"}), "optional": False}))
                    values[p] = r.key.get(p)
            else:
                if r.key is None:
                    raise ConnectException(f"pk.mode=record_key but the record at {r.topic}-{r.kafka_partition}@"
                                           f"{r.kafka_offset} has no key")
                name = pk_fields[0] if pk_fields else "__connect_key"
                kschema = r.key_schema or infer_schema(r.key) or {"type": "string"}
                fields = [(name, {**kschema, "optional": False})] + [(n, s) for n, s in fields if n != name]
                values[name] = r.key
                pks = [name]
        elif mode == "kafka":
            names = pk_fields or ["__connect_topic", "__connect_partition", "__connect_offset"]
            for n, v, t in zip(names, (r.topic, r.kafka_partition, r.kafka_offset), ("string", "int32", "int64")):
                fields.append((n, {"type": t, "optional": False}))
                values[n] = v
            pks = names
        missing = [p for p in pks if p not in values]
        if missing:
            raise ConnectException(f"primary key fields {missing} are not in the record")
        return fields, values, pks

    def _table(self, r: SinkRecord) -> str:
        return self.cfg["table.name.format"].replace("${topic}", r.topic)

    def _ensure_table(self, table: str, fields: list[tuple[str, dict]], pks: list[str]) -> None:
        cols = self.known.get(table)
        d = self.dialect
        if cols is None:
            if not d.table_exists(self.conn, table):
                if not self.cfg["auto.create"]:
                    raise ConnectException(f"Table {table!r} is missing and auto-creation is disabled")
                self.conn.execute(d.create_table(table, fields, pks))
                log.info("created table %s", table)
            cols = {c for c, _ in d.columns(self.conn, table)}
            self.known[table] = cols
        new = [(n, s) for n, s in fields if n not in cols]
        if new:
            if not self.cfg["auto.evolve"]:
                raise ConnectException(f"Table {table!r} is missing fields {[n for n, _ in new]} and auto-evolution "
                                       "is disabled")
            for n, s in new:
                self.conn.execute(d.add_column(table, n, {**s, "optional": True}))
                cols.add(n)

    # -- SinkTask ----------------------------------------------------------------------------------

    def put(self, records: list[SinkRecord]) -> None:
        if not records:
            return
        d = self.dialect
        upsert = self.cfg["insert.mode"] == "upsert"
        try:
            run_key: tuple | None = None
            run: list[list[Any]] = []
            sql = ""
            cur = self.conn.cursor()

            def flush_run() -> None:
                if run:
                    cur.executemany(sql, run)
                    run.clear()

            for r in records:
                if r.value is None:
                    continue  # tombstones: delete.enabled is not supported
                table = self._table(r)
                fields, values, pks = self._row(r)
                self._ensure_table(table, fields, pks)
                names = [n for n, _ in fields]
                key = (table, tuple(names), tuple(pks))
                if key != run_key:
                    flush_run()
                    run_key = key
                    sql = d.upsert(table, names, pks) if upsert else d.insert(table, names)
                    schemas = dict(fields)
                run.append([d.to_db(schemas.get(n), values.get(n)) for n in names])
                if len(run) >= self.cfg["batch.size"]:
                    flush_run()
            flush_run()
            self.conn.commit()
        except ConnectException:
            self.conn.rollback()
            raise
        except Exception as exc:
            try:
                self.conn.rollback()
            except Exception:
                pass
            self.known.clear()
            raise ConnectException(f"writing to the database failed: {exc}") from exc

    def flush(self, current_offsets: dict) -> None:
        pass  # put commits its transaction

    def stop(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
