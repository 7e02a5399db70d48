"""Kafka 2.8's API surface with real clients (issue 16): Fetch v12 as confluent-kafka and
kafka-python pick it (plain, compressed, transactional read_committed; aiokafka on its own
version), DescribeProducers of an idempotent and a transactional producer (odradek's AdminClient
and ``odradek transactions describe-producers``), and feature versioning: /feature, ApiVersions
v3's features decoded by the clients, UpdateFeatures refused with Kafka's messages."""
from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import time

import pytest

from odradek.client import AdminClient, TopicPartition
from odradek.protocol.apis import api_versions, fetch, update_features
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import iter_headers
from odradek.testing import create_topic, wait_until

pytestmark = pytest.mark.compat

COMMITTED = [b"c%d" % i for i in range(60)]
ABORTED = [b"a%d" % i for i in range(25)]


def raw(compat_cluster):
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "integration"))
    from test_broker_e2e import RawClient
    return RawClient(compat_cluster.bootstrap_servers.split(",")[0])


@pytest.fixture(scope="module")
def txn_topic(compat_cluster):
    """30 committed records (lz4), 25 aborted (gzip), 30 committed (none), from confluent-kafka's
    transactional producer."""
    from confluent_kafka import Producer
    bs, topic = compat_cluster.bootstrap_servers, "parity-read-committed"
    create_topic(bs, topic)
    for codec, values, commit in (("lz4", COMMITTED[:30], True), ("gzip", ABORTED, False),
                                  ("none", COMMITTED[30:], True)):
        p = Producer({"bootstrap.servers": bs, "transactional.id": f"parity-{codec}", "compression.type": codec,
                      "linger.ms": 5})
        p.init_transactions(30)
        p.begin_transaction()
        for v in values:
            p.produce(topic, v, partition=0)
        p.flush(30)
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    return topic


def test_librdkafka_fetches_with_v12_and_reads_only_committed(compat_cluster, txn_topic):
    from confluent_kafka import Consumer, TopicPartition as RdTP
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())
    logger = logging.getLogger("parity-rdkafka")
    logger.addHandler(Keep())
    logger.setLevel(logging.DEBUG)
    c = Consumer({"bootstrap.servers": compat_cluster.bootstrap_servers, "group.id": "parity-rd",
                  "isolation.level": "read_committed", "enable.auto.commit": False, "debug": "protocol",
                  "auto.offset.reset": "earliest"}, logger=logger)
    got: list[bytes] = []
    try:
        c.assign([RdTP(txn_topic, 0, 0)])
        deadline = time.monotonic() + 60
        while len(got) < len(COMMITTED) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    assert got == COMMITTED
    assert any("FetchRequest (v12" in ln for ln in lines), [ln for ln in lines if "Fetch" in ln][:5]


def test_kafka_python_fetches_with_v12_both_isolation_levels(compat_cluster, txn_topic):
    from kafka import KafkaConsumer, TopicPartition as KTP
    from kafka.protocol.consumer import FetchRequest

    def read(isolation: str, want: int) -> list[bytes]:
        c = KafkaConsumer(bootstrap_servers=compat_cluster.bootstrap_servers, isolation_level=isolation,
                          auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=2000)
        try:
            c.assign([KTP(txn_topic, 0)])
            got: list[bytes] = []
            wait_until(lambda: got.extend(r.value for rs in c.poll(timeout_ms=500).values() for r in rs)
                       or len(got) >= want, 60, f"{want} records ({isolation})")
            assert c._client.api_version(FetchRequest, max_version=12) == 12
            return got
        finally:
            c.close()
    assert read("read_committed", len(COMMITTED)) == COMMITTED
    assert sorted(read("read_uncommitted", len(COMMITTED) + len(ABORTED))) == sorted(COMMITTED + ABORTED)


def test_aiokafka_reads_only_committed(compat_cluster, txn_topic):
    from aiokafka import AIOKafkaConsumer, TopicPartition as ATP

    async def run() -> list[bytes]:
        c = AIOKafkaConsumer(bootstrap_servers=compat_cluster.bootstrap_servers, isolation_level="read_committed",
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        got: list[bytes] = []
        try:
            c.assign([ATP(txn_topic, 0)])
            deadline = time.monotonic() + 60
            while len(got) < len(COMMITTED) and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                got.extend(r.value for rs in batch.values() for r in rs)
        finally:
            await c.stop()
        return got
    assert asyncio.run(run()) == COMMITTED


def test_a_diverged_fetcher_is_told_where_its_epoch_ended(compat_cluster, txn_topic):
    """A fetcher whose log ran past this one in the same epoch gets diverging_epoch and no records;
    one claiming an epoch this log cannot place gets OFFSET_OUT_OF_RANGE (Kafka 2.8's readRecords)."""
    client = raw(compat_cluster)

    def ask(offset: int, epoch: int):
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "topics": [{"topic": txn_topic, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": epoch,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [],
                "rack_id": ""}
        return client.request(fetch, 12, body).responses[0].partition_responses[0]
    try:
        end = ask(0, 0).high_watermark
        p = ask(end + 5, 0)
        assert p.error_code == 0 and not p.record_set
        assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (0, end)
        p = ask(10, 0)
        assert p.record_set and p.diverging_epoch.epoch == -1
        assert ask(10, 7).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    finally:
        client.close()


def test_describe_producers_of_an_idempotent_and_a_transactional_producer(compat_cluster):
    from confluent_kafka import Producer
    bs, topic = compat_cluster.bootstrap_servers, "parity-producers"
    create_topic(bs, topic)
    idem = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 0})
    for i in range(5):
        idem.produce(topic, b"i%d" % i, partition=0)
        idem.flush(30)
    txn = Producer({"bootstrap.servers": bs, "transactional.id": "parity-describe", "linger.ms": 0})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(3):
        txn.produce(topic, b"t%d" % i, partition=0)
    txn.flush(30)
    # what the log says: each batch's producer id, epoch and sequences
    client = raw(compat_cluster)
    try:
        part = client.request(fetch, 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                                          "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                          "topics": [{"topic": topic, "partitions": [
                                              {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                               "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                                          "forgotten_topics_data": [], "rack_id": ""}).responses[0]
    finally:
        client.close()
    headers = [h for _, h in iter_headers(part.partition_responses[0].record_set)]
    by_pid: dict[int, list] = {}
    for h in headers:
        by_pid.setdefault(h.producer_id, []).append(h)
    assert len(by_pid) == 2
    idem_pid = headers[0].producer_id
    txn_pid = next(p for p in by_pid if p != idem_pid)
    txn_start = by_pid[txn_pid][0].base_offset
    tp = TopicPartition(topic, 0)
    with AdminClient(bootstrap_servers=bs) as admin:
        states = {s.producer_id: s for s in admin.describe_producers([tp])[tp]}
        assert set(states) == {idem_pid, txn_pid}
        last = by_pid[idem_pid][-1]
        assert (states[idem_pid].producer_epoch, states[idem_pid].last_sequence) == \
            (last.producer_epoch, last.base_sequence + last.last_offset_delta) == (last.producer_epoch, 4)
        assert states[idem_pid].current_transaction_start_offset == -1
        assert states[idem_pid].last_timestamp == last.max_timestamp
        t_last = by_pid[txn_pid][-1]
        assert (states[txn_pid].producer_epoch, states[txn_pid].last_sequence) == \
            (t_last.producer_epoch, t_last.base_sequence + t_last.last_offset_delta)
        assert states[txn_pid].current_transaction_start_offset == txn_start
        # Kafka 3.0's tool prints the same
        out = subprocess.run([sys.executable, "-m", "odradek.zk.cli", "transactions", "--bootstrap-server", bs,
                              "describe-producers", "--topic", topic, "--partition", "0"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        rows = [ln.split() for ln in out.stdout.splitlines()]
        assert rows[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                           "CurrentTransactionStartOffset"]
        assert sorted(rows[1:]) == sorted([
            [str(idem_pid), str(last.producer_epoch), "-1", "4", str(last.max_timestamp), "None"],
            [str(txn_pid), str(t_last.producer_epoch), "-1", str(states[txn_pid].last_sequence),
             str(t_last.max_timestamp), str(txn_start)]])
        txn.commit_transaction(30)
        wait_until(lambda: admin.describe_producers([tp])[tp], 30, "the producers after the commit")
        after = {s.producer_id: s for s in admin.describe_producers([tp])[tp]}
        assert after[txn_pid].current_transaction_start_offset == -1 and after[txn_pid].coordinator_epoch >= 0
        missing = admin.describe_producers([TopicPartition(topic, 5)])
        assert missing[TopicPartition(topic, 5)].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    bad = subprocess.run([sys.executable, "-m", "odradek.zk.cli", "transactions", "--bootstrap-server", bs,
                          "describe-producers", "--topic", "parity-no-such", "--partition", "0"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in bad.stderr


def test_feature_versioning_as_kafka_2_8_has_it(compat_cluster):
    zk = compat_cluster.zk
    data, stat = zk.get("/feature")
    assert json.loads(data) == {"version": 1, "status": 1, "features": {}}
    broker = json.loads(zk.get("/brokers/ids/1")[0])
    assert broker["version"] == 5 and broker["features"] == {}
    client = raw(compat_cluster)
    try:
        av = client.request(api_versions, 3, {"client_software_name": "parity", "client_software_version": "1.0"})
        assert av.error_code == 0 and av.finalized_features_epoch == stat.version
        assert list(av.supported_features) == [] and list(av.finalized_features) == []
        keys = {k.api_key: (k.min_version, k.max_version) for k in av.api_keys}
        assert keys[1] == (0, 12) and keys[56] == keys[57] == keys[61] == (0, 0)
        resp = client.request(update_features, 0, {"timeout_ms": 5000, "feature_updates": [
            {"feature": "some.feature", "max_version_level": 2, "allow_downgrade": False},
            {"feature": "gone.feature", "max_version_level": 0, "allow_downgrade": True},
            {"feature": "low.feature", "max_version_level": 0, "allow_downgrade": False},
            {"feature": "", "max_version_level": 1, "allow_downgrade": False}]})
        assert (resp.error_code, resp.error_message) == (0, None)
        assert [(r.feature, r.error_code, r.error_message) for r in resp.results] == [
            ("some.feature", ErrorCode.INVALID_REQUEST,
             "Could not apply finalized feature update because the provided feature is not supported."),
            ("gone.feature", ErrorCode.INVALID_REQUEST, "Can not delete non-existing finalized feature."),
            ("low.feature", ErrorCode.INVALID_REQUEST, "Can not provide maxVersionLevel: 0 less than 1 without "
                                                       "setting the allowDowngrade flag to true in the request."),
            ("", ErrorCode.INVALID_REQUEST, "Feature name can not be empty.")]
    finally:
        client.close()
    assert zk.get("/feature")[1].mzxid == stat.mzxid   # nothing written
    # the clients decode ApiVersions v3's tagged fields and carry on
    from confluent_kafka.admin import AdminClient as RdAdmin
    from kafka import KafkaAdminClient
    assert 1 in RdAdmin({"bootstrap.servers": compat_cluster.bootstrap_servers}).list_topics(timeout=30).brokers
    kp = KafkaAdminClient(bootstrap_servers=compat_cluster.bootstrap_servers)
    try:
        assert "parity-producers" in kp.list_topics()
    finally:
        kp.close()
