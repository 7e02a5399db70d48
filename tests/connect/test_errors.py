"""Error handling against a real cluster: dead letter queue with context headers, FAILED tasks
with their trace in /status, REST errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from odradek.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition

from .conftest import rest, wait_for, write_props

pytestmark = pytest.mark.integration

GOOD = b'{"schema":{"type":"string","optional":false},"payload":"good-%d"}'


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_dead_letter_queue_and_failed_task(cluster_factory, connect_workers, free_port, tmp_path):
    cluster = cluster_factory(brokers=1)
    bs = cluster.bootstrap_servers
    admin = AdminClient(bootstrap_servers=bs)
    admin.create_topics([NewTopic("events", 1, 1)])
    admin.close()
    p = Producer(bootstrap_servers=bs)
    for i in range(30):
        value = b"this is not json %d" % i if i % 10 == 3 else GOOD % i
        p.send("events", value=value, key=b"k%d" % i, headers=[("origin", b"test")])
    p.flush()
    p.close()
    port = free_port()
    props = write_props(tmp_path / "worker.properties", {
        "bootstrap.servers": bs, "offset.storage.file.filename": tmp_path / "offsets",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "offset.flush.interval.ms": 300, "rest.host.name": "127.0.0.1", "rest.port": port})
    w = connect_workers("standalone", [props], tmp_path / "worker.log", port)
    base = {"connector.class": "FileStreamSink", "topics": "events", "tasks.max": "1"}
    # tolerant sink: bad records go to the DLQ with context headers, good ones to the file
    ok = tmp_path / "ok.txt"
    code, body = rest(w.url + "/connectors", "POST", {"name": "tolerant", "config": {
        **base, "file": str(ok), "errors.tolerance": "all", "errors.log.enable": "true",
        "errors.deadletterqueue.topic.name": "events-dlq",
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"}})
    assert code == 201, body
    wait_for(lambda: len(_lines(ok)) == 27, 60, 0.2, "27 good records in the file")
    assert _lines(ok) == [f"good-{i}" for i in range(30) if i % 10 != 3]
    c = Consumer(bootstrap_servers=bs, auto_offset_reset="earliest")
    c.assign([TopicPartition("events-dlq", 0)])
    dlq: list = []
    wait_for(lambda: dlq.extend(r for rs in c.poll(timeout_ms=200).values() for r in rs) or len(dlq) >= 3, 60,
             what="3 records in the DLQ")
    c.close()
    assert [r.value for r in dlq] == [b"this is not json %d" % i for i in (3, 13, 23)]
    assert [r.key for r in dlq] == [b"k3", b"k13", b"k23"]
    h = {k: v.decode() for k, v in dlq[0].headers}
    assert h["origin"] == "test"
    assert h["__connect.errors.topic"] == "events" and h["__connect.errors.partition"] == "0"
    assert h["__connect.errors.offset"] == "3" and h["__connect.errors.connector.name"] == "tolerant"
    assert h["__connect.errors.task.id"] == "0" and h["__connect.errors.stage"] == "VALUE_CONVERTER"
    assert h["__connect.errors.class.name"] == "JsonConverter"
    assert h["__connect.errors.exception.class.name"] == "org.apache.kafka.connect.errors.DataException"
    assert "serialization error" in h["__connect.errors.exception.message"]
    assert "Traceback" in h["__connect.errors.exception.stacktrace"]
    st = rest(w.url + "/connectors/tolerant/status")[1]
    assert st["tasks"][0]["state"] == "RUNNING"

    # intolerant sink (the default errors.tolerance=none): the task fails on offset 3, trace in /status
    bad = tmp_path / "bad.txt"
    code, body = rest(w.url + "/connectors", "POST", {"name": "strict", "config": {**base, "file": str(bad)}})
    assert code == 201, body

    def failed():
        s = rest(w.url + "/connectors/strict/status")[1]
        return s if s["tasks"] and s["tasks"][0]["state"] == "FAILED" else None

    st = wait_for(failed, 60, 0.2, "the strict task to be FAILED")
    assert st["connector"]["state"] == "RUNNING" and st["type"] == "sink"
    trace = st["tasks"][0]["trace"]
    assert "Tolerance exceeded in error handler" in trace and "DataException" in trace
    assert _lines(bad) == []            # the batch with the bad record was never put
    assert rest(w.url + "/connectors/strict/tasks/0/status")[1]["state"] == "FAILED"
    # a restart runs the task again (and it fails again on the same record)
    assert rest(w.url + "/connectors/strict/tasks/0/restart", "POST")[0] == 204
    wait_for(failed, 60, 0.2, "FAILED again after the restart")

    # REST errors have Kafka's shapes
    assert rest(w.url + "/connectors/nope/status") == (404, {"error_code": 404, "message": "Connector nope not found"})
    code, body = rest(w.url + "/connectors", "POST", {"name": "strict", "config": {**base, "file": str(bad)}})
    assert code == 409 and body["message"] == "Connector strict already exists"
    code, body = rest(w.url + "/connectors", "POST", {"name": "x", "config": {"connector.class": "FileStreamSink",
                                                                              "file": "/tmp/x"}})
    assert code == 400 and "topics" in body["message"]
    code, body = rest(w.url + "/connectors/y/config", "PUT", {"connector.class": "NoSuchConnector"})
    assert code == 400 and "NoSuchConnector" in body["message"]
    code, body = rest(w.url + "/connectors/tolerant/config", "PUT", {**base, "file": str(ok),
                                                                     "errors.tolerance": "all"})
    assert code == 200 and body["name"] == "tolerant" and body["tasks"] == [{"connector": "tolerant", "task": 0}]
    assert rest(w.url + "/connectors/tolerant/config")[1]["errors.tolerance"] == "all"
    assert rest(w.url + "/connectors/tolerant", "DELETE")[0] == 204
    assert rest(w.url + "/connectors")[1] == ["strict"]
