"""Table -> topic -> table through a standalone worker with a real PostgreSQL server."""
from __future__ import annotations

import pytest

from odradek.client import AdminClient, NewTopic

from .conftest import wait_for, write_props

pytestmark = pytest.mark.integration


def _worker(tmp, bootstrap, port, name):
    return write_props(tmp / f"{name}.properties", {
        "bootstrap.servers": bootstrap,
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "offset.storage.file.filename": tmp / "connect.offsets",
        "offset.flush.interval.ms": 300,
        "rest.host.name": "127.0.0.1", "rest.port": port,
    })


def _connectors(tmp, url):
    return [
        write_props(tmp / "jdbc-source.properties", {
            "name": "pg-source", "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
            "connection.url": url, "mode": "timestamp+incrementing", "incrementing.column.name": "id",
            "timestamp.column.name": "updated_at", "table.whitelist": "accounts", "topic.prefix": "pg-",
            "poll.interval.ms": 200, "batch.max.rows": 500,
            # key each row by id, so every version of a row lands in the same partition (ordered)
            "transforms": "createKey,extractId",
            "transforms.createKey.type": "org.apache.kafka.connect.transforms.ValueToKey",
            "transforms.createKey.fields": "id",
            "transforms.extractId.type": "org.apache.kafka.connect.transforms.ExtractField$Key",
            "transforms.extractId.field": "id"}),
        write_props(tmp / "jdbc-sink.properties", {
            "name": "pg-sink", "connector.class": "JdbcSinkConnector", "connection.url": url,
            "topics": "pg-accounts", "insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id",
            "auto.create": "true", "table.name.format": "replica_${topic}",
            "transforms": "route", "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": "pg-(.*)", "transforms.route.replacement": "$1"}),
    ]


def _rows(conn, table):
    return sorted(conn.execute(f'SELECT id, owner, balance FROM "{table}"').fetchall())


def test_postgres_table_to_table_upserts_and_kill9(cluster_factory, connect_workers, postgres, free_port, tmp_path):
    import psycopg
    cluster = cluster_factory(brokers=1)
    admin = AdminClient(bootstrap_servers=cluster.bootstrap_servers)
    admin.create_topics([NewTopic("pg-accounts", 3, 1)])
    admin.close()
    db = psycopg.connect(postgres.url(), autocommit=True)
    db.execute("SET TIME ZONE 'UTC'")
    db.execute("CREATE TABLE accounts (id SERIAL PRIMARY KEY, owner TEXT NOT NULL, balance BIGINT, "
               "updated_at TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'utc'))")
    with db.cursor() as cur:
        cur.executemany("INSERT INTO accounts (owner, balance) VALUES (%s, %s)",
                        [(f"owner-{i}", i * 10) for i in range(2000)])
    port = free_port()
    args = [_worker(tmp_path, cluster.bootstrap_servers, port, "w1"), *_connectors(tmp_path, postgres.url())]
    w = connect_workers("standalone", args, tmp_path / "w1.log", port)

    def replica_matches():
        return _rows(db, "replica_accounts") == _rows(db, "accounts")

    wait_for(replica_matches, 120, 0.3, "the replica table to match after the initial load")
    # updates reach the target as upserts
    db.execute("UPDATE accounts SET balance = balance + 1, updated_at = (now() AT TIME ZONE 'utc') "
               "WHERE id % 7 = 0")
    db.execute("INSERT INTO accounts (owner, balance) VALUES ('late', 42)")
    wait_for(replica_matches, 60, 0.3, "updates and inserts to reach the replica")
    status = w.get("/connectors/pg-sink/status")[1]
    assert status["tasks"][0]["state"] == "RUNNING", status
    # kill -9 while rows keep changing; restart; nothing is lost
    with db.cursor() as cur:
        cur.executemany("INSERT INTO accounts (owner, balance) VALUES (%s, %s)",
                        [(f"more-{i}", i) for i in range(3000)])
    wait_for(lambda: db.execute('SELECT count(*) FROM "replica_accounts"').fetchone()[0] > 2001, 60, 0.02,
             "the worker to be mid-way")
    w.kill()
    db.execute("UPDATE accounts SET balance = -balance, updated_at = (now() AT TIME ZONE 'utc') WHERE id % 5 = 0")
    with db.cursor() as cur:
        cur.executemany("INSERT INTO accounts (owner, balance) VALUES (%s, %s)",
                        [(f"after-{i}", i) for i in range(500)])
    port2 = free_port()
    args[0] = _worker(tmp_path, cluster.bootstrap_servers, port2, "w2")
    connect_workers("standalone", args, tmp_path / "w2.log", port2)
    wait_for(replica_matches, 120, 0.3, "the replica to match after kill -9 and restart")
    assert len(_rows(db, "replica_accounts")) == 5501
    db.close()
