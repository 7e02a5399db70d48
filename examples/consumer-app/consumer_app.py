"""A small Kafka consumer application: it copies every record of a topic into a sqlite table.

Invariant (at-least-once): a record's offset is committed to Kafka only after the row for it
is committed to sqlite, so a crash or a rebalance can make the application see a record again
(a duplicate row, keyed by topic/partition/offset it can be told apart) but never skip one.
"""
from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from odradek.client import Consumer, OffsetAndMetadata

SCHEMA = """CREATE TABLE IF NOT EXISTS processed (
    id INTEGER PRIMARY KEY AUTOINCREMENT, topic TEXT, partition INTEGER, "offset" INTEGER,
    key BLOB, value BLOB)"""


def rows(db_path: str | Path) -> list[tuple[str, int, int, bytes | None, bytes | None]]:
    """Every processed record, in processing order."""
    with sqlite3.connect(db_path) as db:
        db.execute(SCHEMA)
        return list(db.execute('SELECT topic, partition, "offset", key, value FROM processed ORDER BY id'))


def run(bootstrap_servers: str, topic: str, group_id: str, db_path: str | Path,
        stop: threading.Event) -> None:
    """Consume ``topic`` in ``group_id`` into ``db_path`` until ``stop`` is set."""
    db = sqlite3.connect(db_path)
    db.execute(SCHEMA)
    consumer = Consumer(topic, bootstrap_servers=bootstrap_servers, group_id=group_id,
                        auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        while not stop.is_set():
            batches = consumer.poll(timeout_ms=200)
            if not batches:
                continue
            with db:  # one sqlite transaction per poll
                for records in batches.values():
                    db.executemany('INSERT INTO processed (topic, partition, "offset", key, value) '
                                   'VALUES (?, ?, ?, ?, ?)',
                                   [(r.topic, r.partition, r.offset, r.key, r.value) for r in records])
            try:
                consumer.commit({tp: OffsetAndMetadata(records[-1].offset + 1, "")
                                 for tp, records in batches.items()})
            except Exception:  # a rebalance or a broker failure: those records will come again
                pass
    finally:
        consumer.close(autocommit=False)
        db.close()
