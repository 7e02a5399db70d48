"""odradek.client against real brokers: 10,000 keyed records per codec, read back in order."""
from __future__ import annotations

import time

import pytest

from odradek.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from odradek.client.partitioner import partition_for_key

N = 10_000


def wait_for_leaders(admin: AdminClient, topic: str, partitions: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        parts = admin.describe_topics([topic])[0]["partitions"]
        if len(parts) == partitions and all(p["leader"] >= 0 for p in parts):
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic}: partitions without leaders after {timeout} s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # a module-scoped cluster: the round trips below share it
    from odradek.zk.cluster import LocalCluster
    c = LocalCluster(tmp_path_factory.mktemp("client-roundtrip"), zookeepers=1, brokers=1)
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_keyed_roundtrip(cluster, codec):
    bootstrap = cluster.bootstrap_servers
    topic = f"roundtrip-{codec}"
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 3, 1)])
        wait_for_leaders(admin, topic, 3)
    base_ts = int(time.time() * 1000) - 60_000
    producer = Producer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5, acks="all")
    futures = []
    for i in range(N):
        futures.append(producer.send(topic, f"value-{i}".encode(), key=f"key-{i % 97}",
                                     headers=[("seq", str(i).encode())], timestamp_ms=base_ts + i))
    producer.flush(timeout=60)
    producer.close()
    offsets = {}
    for i, f in enumerate(futures):
        md = f.get(0)
        assert md.partition == partition_for_key(f"key-{i % 97}".encode(), 3)
        offsets[i] = (md.partition, md.offset)

    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", max_poll_records=2000)
    consumer.assign([TopicPartition(topic, p) for p in range(3)])
    got = {p: [] for p in range(3)}
    deadline = time.monotonic() + 60
    total = 0
    while total < N and time.monotonic() < deadline:
        for tp, recs in consumer.poll(timeout_ms=1000).items():
            got[tp.partition].extend(recs)
            total += len(recs)
    consumer.close()
    assert total == N
    for p, recs in got.items():
        assert [r.offset for r in recs] == list(range(len(recs)))
        seqs = [int(r.headers[0][1]) for r in recs]
        assert seqs == sorted(seqs)                          # send order kept per partition
        for r, i in zip(recs, seqs):
            assert r.value == f"value-{i}".encode()
            assert r.key == f"key-{i % 97}".encode()
            assert r.headers == [("seq", str(i).encode())]
            assert r.timestamp == base_ts + i and r.timestamp_type == 0
            assert offsets[i] == (p, r.offset)


def test_offsets_lookup_and_seek(cluster):
    bootstrap = cluster.bootstrap_servers
    topic = "lookup"
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        wait_for_leaders(admin, topic, 1)
    with Producer(bootstrap_servers=bootstrap) as producer:
        for i in range(100):  # one batch per record: the lookup below is then exact at any granularity
            producer.send(topic, str(i), timestamp_ms=1_000_000 + i * 10).get(10)
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=bootstrap) as consumer:
        consumer.assign([tp])
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 100}
        assert consumer.position(tp) == 100                  # auto.offset.reset=latest
        found = consumer.offsets_for_times({tp: 1_000_000 + 555})
        assert found[tp] == (56, 1_000_560)
        consumer.seek(tp, 90)
        recs = []
        deadline = time.monotonic() + 20
        while len(recs) < 10 and time.monotonic() < deadline:
            recs += consumer.poll(1000).get(tp, [])
        assert [r.value for r in recs] == [str(i).encode() for i in range(90, 100)]


def test_perf_requests_drives_every_kind_without_errors_and_reads_the_brokers_cpu(cluster):
    """``odradek perf requests`` as a user runs it: every kind answered without an error code, the
    broker's CPU found by its port, and the floor server measured in the same run."""
    import os
    import subprocess
    import sys
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("perf-requests", 1, 1)])
        wait_for_leaders(admin, "perf-requests", 1)
    odradek = os.path.join(os.path.dirname(sys.executable), "odradek")
    r = subprocess.run([odradek, "perf", "requests", "--bootstrap-server", cluster.bootstrap_servers, "--floor",
                        "--seconds", "0.5", "--processes", "1", "--connections", "2", "--in-flight", "8",
                        "--check-every", "1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [ln.split(" ")[0] for ln in lines] == ["floor", "produce", "fetch", "metadata", "metadata-all",
                                                  "api-versions",
                                                  "offset-commit", "heartbeat"]
    for ln in lines:
        assert " 0 errors" in ln and "us broker CPU/request" in ln and "requests/s" in ln, ln
        assert int(ln.split(": ", 1)[1].split(" ")[0].replace(",", "")) > 0, ln
    assert all("x the floor's" in ln for ln in lines[1:])


def test_perf_requests_refuses_a_topic_the_broker_does_not_know_in_one_line(cluster):
    """Every answer about a missing topic would be an error: the tool says so before any load."""
    import os
    import subprocess
    import sys
    odradek = os.path.join(os.path.dirname(sys.executable), "odradek")
    r = subprocess.run([odradek, "perf", "requests", "--bootstrap-server", cluster.bootstrap_servers,
                        "--request", "produce", "--topic", "perf-no-such-topic", "--seconds", "0.5"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines() == ["Error: topic 'perf-no-such-topic': UNKNOWN_TOPIC_OR_PARTITION (the load "
                                     "needs an existing topic whose partition 0 this broker leads: create it, "
                                     "or pass --topic)"]


def test_perf_requests_with_acks_all_lands_every_acknowledged_produce(cluster):
    """``odradek perf requests --acks all``: every Produce is sent with acks=-1 and answered
    without an error, and the partition holds exactly one record per answered Produce; against a
    topic whose min.insync.replicas its one replica cannot meet, the same load is refused, as only
    acks=all Produces are, and the tool says so."""
    import os
    import subprocess
    import sys
    topic, short = "perf-acks-all", "perf-acks-all-short-isr"
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1), NewTopic(short, 1, 1, {"min.insync.replicas": "2"})])
        wait_for_leaders(admin, topic, 1)
        wait_for_leaders(admin, short, 1)
    odradek = os.path.join(os.path.dirname(sys.executable), "odradek")

    def load(topic_: str) -> subprocess.CompletedProcess:
        return subprocess.run([odradek, "perf", "requests", "--bootstrap-server", cluster.bootstrap_servers,
                               "--request", "produce", "--acks", "all", "--topic", topic_, "--seconds", "0.5",
                               "--processes", "1", "--connections", "2", "--in-flight", "8", "--check-every", "1"],
                              capture_output=True, text=True, timeout=300)

    r = load(topic)
    assert r.returncode == 0, r.stderr
    (line,) = r.stdout.splitlines()
    assert " 0 errors" in line, line
    requests = int(line.split(": ", 1)[1].split(" ")[0].replace(",", ""))
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=cluster.bootstrap_servers) as consumer:
        assert requests > 0 and consumer.end_offsets([tp]) == {tp: requests}
    r = load(short)
    assert r.returncode == 1 and "(NOT_ENOUGH_REPLICAS first)" in r.stderr, (r.stdout, r.stderr)


def test_perf_requests_of_large_produces_lands_every_record_whole(cluster):
    """``odradek perf requests --records --record-size``: 100 KiB Produces, each received into the
    broker's reused buffer and appended from it, are all answered without an error, and every
    record reads back whole, at the offsets the answers gave."""
    import os
    import subprocess
    import sys
    topic = "perf-large-produces"
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        wait_for_leaders(admin, topic, 1)
    odradek = os.path.join(os.path.dirname(sys.executable), "odradek")
    r = subprocess.run([odradek, "perf", "requests", "--bootstrap-server", cluster.bootstrap_servers,
                        "--request", "produce", "--topic", topic, "--records", "100", "--record-size", "1024",
                        "--seconds", "1", "--processes", "1", "--connections", "2", "--in-flight", "4",
                        "--check-every", "1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (line,) = r.stdout.splitlines()
    assert " 0 errors" in line and "MB/s of requests" in line and "broker CPU-s per GB" in line, line
    requests = int(line.split(": ", 1)[1].split(" ")[0].replace(",", ""))
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                  max_poll_records=5000) as consumer:
        assert consumer.end_offsets([tp]) == {tp: requests * 100}
        consumer.assign([tp])
        offsets: list[int] = []
        deadline = time.monotonic() + 60
        while len(offsets) < requests * 100 and time.monotonic() < deadline:
            for rec in consumer.poll(timeout_ms=2000).get(tp, []):
                assert rec.value == b"x" * 1024
                offsets.append(rec.offset)
    assert offsets == list(range(requests * 100))
