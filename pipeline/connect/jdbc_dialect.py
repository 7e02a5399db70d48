"""Database dialects for the JDBC-style connectors: SQLite (stdlib ``sqlite3``) and PostgreSQL
(psycopg 3), chosen by ``connection.url`` (``sqlite:///path``, ``postgresql://...``, or the
same with Kafka's ``jdbc:`` prefix).

Invariant: every value crossing this module is converted between the
database's Python types and Connect values in one place (``to_connect`` /
``to_db``): timestamps are Connect ``Timestamp`` (int64 epoch ms, UTC) and
PostgreSQL sessions run with ``TimeZone=UTC``; SQLite timestamps are ISO-8601
UTC text (SQLite's ``CURRENT_TIMESTAMP`` format). Identifiers are always
double-quoted, values always bound as parameters, never spliced into SQL.
"""
from __future__ import annotations

import datetime as _dt
import decimal
import re
import sqlite3
from typing import Any

from .api import ConfigException, ConnectException, Schema

TIMESTAMP_NAME = "org.apache.kafka.connect.data.Timestamp"
EPOCH = _dt.datetime(1970, 1, 1)


def _ts_schema(optional: bool) -> Schema:
    return {"type": "int64", "optional": optional, "name": TIMESTAMP_NAME, "version": 1}


def dt_to_ms(value: _dt.datetime) -> int:
    if value.tzinfo is not None:
        value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return (value - EPOCH) // _dt.timedelta(milliseconds=1)


def ms_to_dt(ms: int, nanos: int | None = None) -> _dt.datetime:
    """Naive UTC datetime; ``nanos`` (nanoseconds within the second) restores sub-ms precision."""
    seconds, rest = divmod(int(ms), 1000)
    micros = rest * 1000 if nanos is None else int(nanos) // 1000
    return EPOCH + _dt.timedelta(seconds=seconds, microseconds=micros)


def parse_ts(value: Any) -> _dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        return value.astimezone(_dt.timezone.utc).replace(tzinfo=None) if value.tzinfo else value
    if isinstance(value, str):
        return parse_ts(_dt.datetime.fromisoformat(value.replace("Z", "+00:00")))
    raise ConnectException(f"not a timestamp: {value!r}")


class Dialect:
    name = ""
    placeholder = "?"

    def __init__(self, url: str, user: str | None = None, password: str | None = None) -> None:
        self.url, self.user, self.password = url, user, password

    @staticmethod
    def quote(ident: str) -> str:
        return '"' + ident.replace('"', '""') + '"'

    def qualified(self, table: str) -> str:
        return ".".join(self.quote(p) for p in table.split("."))

    def connect(self, autocommit: bool = False) -> Any:
        raise NotImplementedError

    def tables(self, conn: Any) -> list[str]:
        raise NotImplementedError

    def table_exists(self, conn: Any, table: str) -> bool:
        return table in self.tables(conn)

    def columns(self, conn: Any, table: str) -> list[tuple[str, Schema]]:
        """[(column, Connect schema)] in table order."""
        raise NotImplementedError

    def now(self, conn: Any) -> _dt.datetime:
        raise NotImplementedError

    def ts_expr(self, column: str) -> str:
        return self.quote(column)

    def ts_param(self, value: _dt.datetime) -> Any:
        return value

    def sql_type(self, schema: Schema) -> str:
        raise NotImplementedError

    def upsert(self, table: str, cols: list[str], pks: list[str]) -> str:
        q = self.quote
        sql = (f"INSERT INTO {self.qualified(table)} ({', '.join(q(c) for c in cols)}) "
               f"VALUES ({', '.join([self.placeholder] * len(cols))})")
        rest = [c for c in cols if c not in pks]
        if not rest:
            return sql + f" ON CONFLICT ({', '.join(q(c) for c in pks)}) DO NOTHING"
        return sql + (f" ON CONFLICT ({', '.join(q(c) for c in pks)}) DO UPDATE SET "
                      + ", ".join(f"{q(c)} = EXCLUDED.{q(c)}" for c in rest))

    def insert(self, table: str, cols: list[str]) -> str:
        return (f"INSERT INTO {self.qualified(table)} ({', '.join(self.quote(c) for c in cols)}) "
                f"VALUES ({', '.join([self.placeholder] * len(cols))})")

    def create_table(self, table: str, fields: list[tuple[str, Schema]], pks: list[str]) -> str:
        cols = []
        for name, schema in fields:
            null = "" if schema.get("optional", True) and name not in pks else " NOT NULL"
            cols.append(f"{self.quote(name)} {self.sql_type(schema)}{null}")
        if pks:
            cols.append(f"PRIMARY KEY({', '.join(self.quote(p) for p in pks)})")
        return f"CREATE TABLE {self.qualified(table)} (\n" + ",\n".join(cols) + ")"

    def add_column(self, table: str, name: str, schema: Schema) -> str:
        return f"ALTER TABLE {self.qualified(table)} ADD COLUMN {self.quote(name)} {self.sql_type(schema)}"

    def to_connect(self, schema: Schema, value: Any) -> Any:
        if value is None:
            return None
        if schema.get("name") == TIMESTAMP_NAME:
            return dt_to_ms(parse_ts(value))  # type: ignore[arg-type]
        t = schema["type"]
        if t in ("int8", "int16", "int32", "int64"):
            return int(value)
        if t in ("float32", "float64"):
            return float(value)
        if t == "boolean":
            return bool(value)
        if t == "bytes":
            return bytes(value)
        if t == "string":
            if isinstance(value, (_dt.date, _dt.time)):
                return value.isoformat()
            return str(value)
        return value

    def to_db(self, schema: Schema | None, value: Any) -> Any:
        if value is None:
            return None
        if schema is not None and schema.get("name") == TIMESTAMP_NAME and isinstance(value, int):
            return ms_to_dt(value)
        if isinstance(value, (dict, list)):
            import json
            return json.dumps(value)
        return value


# -- SQLite ---------------------------------------------------------------------------------------

def _sqlite_schema(decl: str, optional: bool) -> Schema:
    d = (decl or "").upper()
    if "TIMESTAMP" in d or "DATETIME" in d:
        return _ts_schema(optional)
    if "BOOL" in d:
        t = "boolean"
    elif "INT" in d:
        t = "int64"
    elif "CHAR" in d or "CLOB" in d or "TEXT" in d:
        t = "string"
    elif "BLOB" in d or not d:
        t = "bytes" if "BLOB" in d else "string"
    elif "REAL" in d or "FLOA" in d or "DOUB" in d or "NUMERIC" in d or "DECIMAL" in d:
        t = "float64"
    else:
        t = "string"
    return {"type": t, "optional": optional}


class SqliteDialect(Dialect):
    name = "sqlite"
    placeholder = "?"

    def __init__(self, url: str, user: str | None = None, password: str | None = None) -> None:
        super().__init__(url, user, password)
        m = re.fullmatch(r"(?:jdbc:)?sqlite:(?://)?(.*)", url)
        if not m or not m.group(1):
            raise ConfigException(f"bad SQLite connection.url {url!r} (expected sqlite:///path/to/db)")
        self.path = m.group(1)

    def connect(self, autocommit: bool = False) -> Any:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None if autocommit else "DEFERRED",
                               check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 30000")
        return conn

    def tables(self, conn: Any) -> list[str]:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
                            "ORDER BY name").fetchall()
        return [r[0] for r in rows]

    def columns(self, conn: Any, table: str) -> list[tuple[str, Schema]]:
        rows = conn.execute(f"PRAGMA table_info({self.quote(table)})").fetchall()
        return [(r[1], _sqlite_schema(r[2], not (r[3] or r[5]))) for r in rows]

    def now(self, conn: Any) -> _dt.datetime:
        (text,) = conn.execute("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')").fetchone()
        return _dt.datetime.fromisoformat(text)

    def ts_expr(self, column: str) -> str:
        return f"CAST(ROUND((julianday({self.quote(column)}) - 2440587.5) * 86400000000.0) AS INTEGER)"

    def ts_param(self, value: _dt.datetime) -> Any:
        return (value - EPOCH) // _dt.timedelta(microseconds=1)

    def sql_type(self, schema: Schema) -> str:
        if schema.get("name") == TIMESTAMP_NAME:
            return "TIMESTAMP"
        return {"int8": "INTEGER", "int16": "INTEGER", "int32": "INTEGER", "int64": "INTEGER",
                "float32": "REAL", "float64": "REAL", "boolean": "BOOLEAN", "string": "TEXT",
                "bytes": "BLOB"}.get(schema.get("type", "string"), "TEXT")

    def to_db(self, schema: Schema | None, value: Any) -> Any:
        if value is not None and schema is not None and schema.get("name") == TIMESTAMP_NAME \
                and isinstance(value, int):
            return ms_to_dt(value).isoformat(sep=" ", timespec="milliseconds")
        return super().to_db(schema, value)


# -- PostgreSQL -----------------------------------------------------------------------------------

_PG_TYPES = {"smallint": "int16", "integer": "int32", "bigint": "int64", "real": "float32",
             "double precision": "float64", "numeric": "float64", "boolean": "boolean", "bytea": "bytes"}


class PostgresDialect(Dialect):
    name = "postgresql"
    placeholder = "%s"

    def __init__(self, url: str, user: str | None = None, password: str | None = None) -> None:
        super().__init__(url[5:] if url.startswith("jdbc:") else url, user, password)

    def connect(self, autocommit: bool = False) -> Any:
        try:
            import psycopg
        except ImportError:
            raise ConnectException("PostgreSQL needs psycopg: pip install 'psycopg[binary]'") from None
        kwargs: dict[str, Any] = {"autocommit": autocommit, "options": "-c TimeZone=UTC"}
        if self.user:
            kwargs["user"] = self.user
        if self.password:
            kwargs["password"] = self.password
        try:
            return psycopg.connect(self.url, **kwargs)
        except psycopg.Error as exc:
            raise ConnectException(f"cannot connect to {self.url}: {exc}") from exc

    def tables(self, conn: Any) -> list[str]:
        rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                            "AND table_type = 'BASE TABLE' ORDER BY table_name").fetchall()
        return [r[0] for r in rows]

    def table_exists(self, conn: Any, table: str) -> bool:
        schema, _, name = table.rpartition(".")
        row = conn.execute("SELECT 1 FROM information_schema.tables WHERE table_name = %s AND table_schema = "
                           + ("%s" if schema else "current_schema()"), (name, schema) if schema else (name,)
                           ).fetchone()
        return row is not None

    def columns(self, conn: Any, table: str) -> list[tuple[str, Schema]]:
        schema, _, name = table.rpartition(".")
        rows = conn.execute("SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                            "WHERE table_name = %s AND table_schema = "
                            + ("%s" if schema else "current_schema()") + " ORDER BY ordinal_position",
                            (name, schema) if schema else (name,)).fetchall()
        out = []
        for col, dtype, nullable in rows:
            optional = nullable == "YES"
            if dtype.startswith("timestamp"):
                out.append((col, _ts_schema(optional)))
            else:
                out.append((col, {"type": _PG_TYPES.get(dtype, "string"), "optional": optional}))
        return out

    def now(self, conn: Any) -> _dt.datetime:
        (value,) = conn.execute("SELECT LOCALTIMESTAMP").fetchone()
        return value

    def sql_type(self, schema: Schema) -> str:
        if schema.get("name") == TIMESTAMP_NAME:
            return "TIMESTAMP"
        return {"int8": "SMALLINT", "int16": "SMALLINT", "int32": "INTEGER", "int64": "BIGINT",
                "float32": "REAL", "float64": "DOUBLE PRECISION", "boolean": "BOOLEAN", "string": "TEXT",
                "bytes": "BYTEA"}.get(schema.get("type", "string"), "TEXT")

    def to_connect(self, schema: Schema, value: Any) -> Any:
        if isinstance(value, decimal.Decimal) and schema["type"] in ("float32", "float64"):
            return float(value)
        return super().to_connect(schema, value)


def dialect_for(url: str, user: str | None = None, password: str | None = None) -> Dialect:
    u = url[5:] if url.startswith("jdbc:") else url
    if u.startswith("sqlite:"):
        return SqliteDialect(url, user, password)
    if u.startswith("postgresql:") or u.startswith("postgres:"):
        return PostgresDialect(url, user, password)
    raise ConfigException(f"unsupported connection.url {url!r}: use sqlite:///path or postgresql://host/db")
