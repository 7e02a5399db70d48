"""Distributed mode: two worker subprocesses in one Connect group, REST, kill -9 failover."""
from __future__ import annotations

import sqlite3

import pytest

from odradek.client import Consumer, TopicPartition

from .conftest import rest, wait_for, write_props

pytestmark = pytest.mark.integration


def _worker_props(tmp, bootstrap, port, name):
    return write_props(tmp / f"{name}.properties", {
        "bootstrap.servers": bootstrap, "group.id": "connect-cluster",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "config.storage.topic": "connect-configs", "offset.storage.topic": "connect-offsets",
        "status.storage.topic": "connect-status", "config.storage.replication.factor": 1,
        "offset.storage.replication.factor": 1, "status.storage.replication.factor": 1,
        "offset.storage.partitions": 3, "status.storage.partitions": 2,
        "offset.flush.interval.ms": 300, "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
        "listeners": f"http://127.0.0.1:{port}", "rest.advertised.host.name": "127.0.0.1",
    })


def _insert(db_path, table, start, n):
    c = sqlite3.connect(db_path)
    c.executemany(f"INSERT INTO {table} (id, v) VALUES (?, ?)", [(i, f"{table}-{i}") for i in range(start, start + n)])
    c.commit()
    c.close()


class _Collector:
    def __init__(self, bootstrap, topics):
        self.c = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        self.topics = topics
        self.assigned = False
        self.seen: dict[str, list[int]] = {t: [] for t in topics}

    def poll(self):
        if not self.assigned:
            tps = []
            for t in self.topics:
                parts = self.c.partitions_for_topic(t)
                if not parts:
                    return
                tps += [TopicPartition(t, p) for p in parts]
            self.c.assign(tps)
            self.assigned = True
        for tp, recs in self.c.poll(timeout_ms=200).items():
            for r in recs:
                import json
                self.seen[tp.topic].append(json.loads(r.value)["payload"]["id"])

    def has(self, table, ids):
        self.poll()
        return set(ids) <= set(self.seen[table])


def test_two_workers_share_tasks_and_fail_over(cluster_factory, connect_workers, free_port, tmp_path):
    cluster = cluster_factory(brokers=1)
    db = tmp_path / "source.db"
    c = sqlite3.connect(db)
    for t in ("t1", "t2"):
        c.execute(f"CREATE TABLE {t} (id INTEGER PRIMARY KEY, v TEXT)")
    c.commit()
    c.close()
    _insert(db, "t1", 1, 300)
    _insert(db, "t2", 1, 300)
    ports = [free_port(), free_port()]
    workers = [connect_workers("distributed", [_worker_props(tmp_path, cluster.bootstrap_servers, p, f"w{i}")],
                               tmp_path / f"w{i}.log", p) for i, p in enumerate(ports)]
    a, b = workers
    root = rest(a.url + "/")[1]
    assert root["version"] and root["kafka_cluster_id"]
    config = {"connector.class": "JdbcSourceConnector", "connection.url": f"sqlite:///{db}",
              "mode": "incrementing", "incrementing.column.name": "id", "table.whitelist": "t1,t2",
              "topic.prefix": "sq-", "tasks.max": "2", "poll.interval.ms": "200"}
    # create through worker b (a follower or the leader: either answers or forwards)
    def create():
        r = rest(b.url + "/connectors", "POST", {"name": "sq", "config": config})
        return None if r[0] == 409 and "rebalance" in r[1]["message"] else r

    status, body = wait_for(create, 90, 0.3, "the connector to be created (409 while the group forms)")
    assert status == 201, body
    assert body["name"] == "sq" and body["type"] == "source"
    assert rest(a.url + "/connectors/sq")[0] == 200
    assert wait_for(lambda: rest(a.url + "/connectors")[1] == ["sq"], 30, what="list on a")

    def running_on():
        st = rest(a.url + "/connectors/sq/status")[1]
        if st.get("connector", {}).get("state") != "RUNNING" or len(st.get("tasks", [])) != 2:
            return None
        if any(t["state"] != "RUNNING" for t in st["tasks"]):
            return None
        return st

    st = wait_for(running_on, 90, 0.3, "connector and both tasks RUNNING")
    owners = {st["connector"]["worker_id"]} | {t["worker_id"] for t in st["tasks"]}
    assert owners == {f"127.0.0.1:{p}" for p in ports}, st     # spread over both workers
    tasks = rest(b.url + "/connectors/sq/tasks")[1]
    assert sorted(t["config"]["tables"] for t in tasks) == ["t1", "t2"]
    assert {p["class"] for p in rest(b.url + "/connector-plugins")[1]} >= {
        "org.apache.kafka.connect.file.FileStreamSourceConnector", "io.confluent.connect.jdbc.JdbcSourceConnector"}

    col = _Collector(cluster.bootstrap_servers, ["sq-t1", "sq-t2"])
    wait_for(lambda: col.has("sq-t1", range(1, 301)) and col.has("sq-t2", range(1, 301)), 60, 0.1, "first rows")

    # kill -9 the worker running task 0; its work moves to the survivor and continues from the offsets
    victim_id = next(t["worker_id"] for t in st["tasks"] if t["id"] == 0)
    victim = a if victim_id.endswith(f":{ports[0]}") else b
    survivor = b if victim is a else a
    survivor_id = f"127.0.0.1:{survivor.rest_port}"
    _insert(db, "t1", 301, 200)
    _insert(db, "t2", 301, 200)
    victim.kill()
    _insert(db, "t1", 501, 200)
    _insert(db, "t2", 501, 200)

    def all_on_survivor():
        s = rest(survivor.url + "/connectors/sq/status")[1]
        ok = (s.get("connector", {}).get("worker_id") == survivor_id and len(s.get("tasks", [])) == 2
              and all(t["state"] == "RUNNING" and t["worker_id"] == survivor_id for t in s["tasks"])
              and s["connector"]["state"] == "RUNNING")
        return s if ok else None

    st2 = wait_for(all_on_survivor, 90, 0.5, "connector and tasks RUNNING on the survivor")
    assert st2["name"] == "sq"
    wait_for(lambda: col.has("sq-t1", range(1, 701)) and col.has("sq-t2", range(1, 701)), 60, 0.1,
             "every row after the failover")
    for t in ("sq-t1", "sq-t2"):
        dup = len(col.seen[t]) - len(set(col.seen[t]))
        print(f"\n{t}: {len(col.seen[t])} records for 700 rows ({dup} duplicates)")
    # REST on the survivor: pause / resume / restart / delete
    assert rest(survivor.url + "/connectors/sq/pause", "PUT")[0] == 202
    wait_for(lambda: all(t["state"] == "PAUSED" for t in rest(survivor.url + "/connectors/sq/status")[1]["tasks"]),
             30, what="paused")
    assert rest(survivor.url + "/connectors/sq/resume", "PUT")[0] == 202
    wait_for(lambda: all(t["state"] == "RUNNING" for t in rest(survivor.url + "/connectors/sq/status")[1]["tasks"]),
             30, what="resumed")
    assert rest(survivor.url + "/connectors/sq/tasks/1/restart", "POST")[0] == 204
    assert rest(survivor.url + "/connectors/sq", "DELETE")[0] == 204
    wait_for(lambda: rest(survivor.url + "/connectors")[1] == [], 30, what="deleted")
    assert rest(survivor.url + "/connectors/sq/status")[0] == 404
    col.c.close()
