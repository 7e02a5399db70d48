"""``odradek perf producer|consumer --client ...``: each client, as a user runs the tools to compare
them on one broker, sends and reads exactly what it reports (Kafka's output lines)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.compat

ODRADEK = os.path.join(os.path.dirname(sys.executable), "odradek")
CLIENTS = ("odradek", "aiokafka", "confluent-kafka")
RECORDS = 3000
SIZE = 100


def perf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ODRADEK, "perf", *args], capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def topic(compat_cluster):
    """A one-partition topic that each client's producer run has written to."""
    from odradek.client import AdminClient
    from odradek.client.structs import NewTopic
    name = "perf-clients"
    admin = AdminClient(bootstrap_servers=compat_cluster.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        admin.close()
    return name


@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_produces_what_it_reports(compat_cluster, topic, client):
    before = _end_offset(compat_cluster.bootstrap_servers, topic)
    r = perf("producer", "--client", client, "--bootstrap-server", compat_cluster.bootstrap_servers,
             "--topic", topic, "--num-records", str(RECORDS), "--record-size", str(SIZE), "--throughput", "-1",
             "--producer-props", "acks=all", "linger.ms=5")
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith(f"{RECORDS} records sent, ") and "ms 99.9th." in last, last
    assert _end_offset(compat_cluster.bootstrap_servers, topic) == before + RECORDS


@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_consumes_what_it_reports(compat_cluster, topic, client):
    total = _end_offset(compat_cluster.bootstrap_servers, topic)
    if total < RECORDS:   # run alone: write the records first
        assert perf("producer", "--bootstrap-server", compat_cluster.bootstrap_servers, "--topic", topic,
                    "--num-records", str(RECORDS), "--record-size", str(SIZE), "--throughput", "-1").returncode == 0
        total = _end_offset(compat_cluster.bootstrap_servers, topic)
    r = perf("consumer", "--client", client, "--bootstrap-server", compat_cluster.bootstrap_servers,
             "--topic", topic, "--messages", str(total), "--group", f"perf-{client}", "--hide-header")
    assert r.returncode == 0 and "WARNING" not in r.stderr, r.stderr
    fields = [f.strip() for f in r.stdout.strip().splitlines()[-1].split(",")]
    assert int(fields[4]) == total                                     # data.consumed.in.nMsg
    assert float(fields[2]) == pytest.approx(total * SIZE / 2**20, abs=1e-4)   # data.consumed.in.MB


def test_a_client_that_is_not_offered_or_cannot_do_transactions_gets_one_line(compat_cluster, topic):
    r = perf("producer", "--client", "aiokafka", "--bootstrap-server", compat_cluster.bootstrap_servers,
             "--topic", topic, "--num-records", "10", "--record-size", "10", "--throughput", "-1",
             "--transactional-id", "perf-txn")
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        "Error: --client aiokafka does not run transactions here: use odradek or confluent-kafka"]
    r = perf("consumer", "--client", "kafka-go", "--bootstrap-server", compat_cluster.bootstrap_servers,
             "--topic", topic, "--messages", "1")
    assert r.returncode != 0 and "invalid choice: 'kafka-go'" in r.stderr


def _end_offset(bootstrap: str, topic: str) -> int:
    from odradek.client import Consumer
    from odradek.client.structs import TopicPartition
    consumer = Consumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


@pytest.mark.parametrize("mode", [[], ["--throughput", "500"]], ids=["one-at-a-time", "at-a-rate"])
def test_e2e_latency_reads_back_every_message(compat_cluster, mode):
    """``odradek perf e2e``: EndToEndLatency's lines (and at a rate, the exact percentiles) over
    every message sent, each read back; a message too small for its send instant is refused."""
    from odradek.client import AdminClient
    from odradek.client.structs import NewTopic
    topic = "perf-e2e-" + ("rate" if mode else "sync")
    admin = AdminClient(bootstrap_servers=compat_cluster.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    before = _end_offset(compat_cluster.bootstrap_servers, topic)
    r = perf("e2e", "--bootstrap-server", compat_cluster.bootstrap_servers, "--topic", topic,
             "--num-messages", "400", "--acks", "all", *mode)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    summary = [line for line in lines if line.startswith(("Avg latency: ", "Percentiles"))]
    assert len(summary) == (3 if mode else 2), lines
    assert float(summary[0].split()[2]) > 0
    if mode:
        exact = dict(part.split(" = ") for part in summary[2].removeprefix("Percentiles (ms): ").split(", "))
        assert set(exact) == {"50th", "99th", "99.9th", "max"}
        assert 0 < float(exact["50th"]) <= float(exact["99th"]) <= float(exact["99.9th"]) <= float(exact["max"])
    assert _end_offset(compat_cluster.bootstrap_servers, topic) == before + 400
    r = perf("e2e", "--bootstrap-server", compat_cluster.bootstrap_servers, "--topic", topic,
             "--num-messages", "1", "--message-size", "4", "--throughput", "10")
    assert r.returncode == 1 and r.stderr.strip() == \
        "Error: --throughput needs --message-size of at least 8 (the send instant)"
