"""TLS and SASL with unmodified clients: confluent-kafka, kafka-python, aiokafka and odradek's own.

One cluster for the module: two brokers, each with four listeners (PLAINTEXT for the fixture's
readiness checks, SSL with client certificates required, SASL_PLAINTEXT, SASL_SSL), brokers
talking to each other over SASL_SSL (PLAIN), SCRAM users in ZooKeeper. Every client
produces and consumes through every secured listener; a wrong password, an unknown user, an
untrusted broker certificate and a missing client certificate are refused; replication runs
over the SASL_SSL inter-broker listener.
"""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.testing import create_topic, wait_until
from odradek.testing.certificates import TlsFiles
from odradek.testing.secure_cluster import USERS, SecuredListeners
from odradek.zk.cluster import LocalCluster
from odradek_test_support import free_port

pytestmark = pytest.mark.compat


@dataclass
class SecureCluster:
    cluster: LocalCluster
    listeners: SecuredListeners

    @property
    def tls(self) -> TlsFiles:
        return self.listeners.tls

    @property
    def ports(self) -> dict[int, dict[str, int]]:
        return self.listeners.ports

    def bootstrap(self, protocol: str) -> str:
        return self.listeners.bootstrap(protocol)


@pytest.fixture(scope="module")
def secure(tmp_path_factory) -> SecureCluster:
    base = tmp_path_factory.mktemp("secure-cluster")
    secured = SecuredListeners.make(base, [1, 2])
    cluster = LocalCluster(base / "cluster", zookeepers=1, brokers=2, overrides=secured.overrides,
                           extra_listeners=secured.extra_listeners)
    cluster.start()
    try:
        for name, password in USERS.items():   # as an operator does: kafka-configs.sh --zookeeper
            subprocess.run([sys.executable, "-m", "odradek.zk.cli", "configs", "--zookeeper",
                            cluster.zookeeper_connect, "--alter", "--entity-type", "users", "--entity-name", name,
                            "--add-config", f"SCRAM-SHA-256=[iterations=4096,password={password}],"
                                            f"SCRAM-SHA-512=[password={password}]"],
                           check=True, capture_output=True, timeout=60)
        yield SecureCluster(cluster, secured)
    finally:
        cluster.stop()


# ------------------------------------------------------------------ client settings per library

def settings(secure: SecureCluster, listener: str, mechanism: str, password: str = "alice-secret",
             user: str = "alice", cafile: Path | None = None) -> dict:
    """Kafka's client property names (confluent-kafka takes them as they are)."""
    tls = secure.tls
    out: dict = {"bootstrap.servers": secure.bootstrap(listener), "security.protocol": listener}
    if listener in ("SSL", "SASL_SSL"):
        out["ssl.ca.location"] = str(cafile or tls.ca)
    if listener == "SSL":
        out.update({"ssl.certificate.location": str(tls.client.cert), "ssl.key.location": str(tls.client.key)})
    if listener.startswith("SASL"):
        out.update({"sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password})
    return out


def python_style(s: dict) -> dict:
    """The same settings as kafka-python, aiokafka and odradek name them."""
    out = {"bootstrap_servers": s["bootstrap.servers"], "security_protocol": s["security.protocol"]}
    names = {"ssl.ca.location": "ssl_cafile", "ssl.certificate.location": "ssl_certfile",
             "ssl.key.location": "ssl_keyfile", "sasl.mechanisms": "sasl_mechanism",
             "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password"}
    out.update({names[k]: v for k, v in s.items() if k in names})
    return out


def roundtrip_confluent(s: dict, topic: str, n: int) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    errors: list = []
    producer = Producer({**s, "acks": "all"})
    for i in range(n):
        producer.produce(topic, value=f"v{i}".encode(), on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(60) == 0 and not errors, errors
    consumer = Consumer({**s, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def roundtrip_kafka_python(s: dict, topic: str, n: int) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer
    kw = python_style(s)
    producer = KafkaProducer(acks="all", **kw)
    try:
        for f in [producer.send(topic, value=f"v{i}".encode()) for i in range(n)]:
            f.get(timeout=60)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=20000, **kw)
    got: list[bytes] = []
    try:
        for msg in consumer:
            got.append(msg.value)
            if len(got) >= n:
                break
    finally:
        consumer.close()
    return got


def roundtrip_aiokafka(s: dict, topic: str, n: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context
    kw = python_style(s)
    context = None
    if "ssl_cafile" in kw:
        context = create_ssl_context(cafile=kw.pop("ssl_cafile"), certfile=kw.pop("ssl_certfile", None),
                                     keyfile=kw.pop("ssl_keyfile", None))
    kw["ssl_context"] = context

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(acks="all", **kw)
        await producer.start()
        try:
            for i in range(n):
                await producer.send_and_wait(topic, f"v{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **kw)
        await consumer.start()
        got: list[bytes] = []
        try:
            async def take() -> None:
                async for msg in consumer:
                    got.append(msg.value)
                    if len(got) >= n:
                        return
            await asyncio.wait_for(take(), 60)
        finally:
            await consumer.stop()
        return got
    return asyncio.run(run())


def roundtrip_odradek(s: dict, topic: str, n: int) -> list[bytes]:
    from odradek.client import Consumer, Producer, TopicPartition
    kw = python_style(s)
    producer = Producer(acks="all", **kw)
    try:
        for f in [producer.send(topic, value=f"v{i}".encode()) for i in range(n)]:
            f.get(timeout=60)
    finally:
        producer.close()
    consumer = Consumer(auto_offset_reset="earliest", **kw)
    consumer.assign([TopicPartition(topic, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
    finally:
        consumer.close()
    return got


CLIENTS = {"confluent": roundtrip_confluent, "kafka-python": roundtrip_kafka_python,
           "aiokafka": roundtrip_aiokafka, "odradek": roundtrip_odradek}
WAYS = [("SSL", None), ("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN")]


def _topic(secure: SecureCluster, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(secure.cluster.bootstrap_servers, name, partitions=1, replication_factor=2)
    return name


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("listener,mechanism", WAYS, ids=[f"{l}-{m or 'mTLS'}" for l, m in WAYS])
def test_clients_produce_and_consume_over_every_secured_listener(secure, client, listener, mechanism):
    topic = _topic(secure, "sec")
    got = CLIENTS[client](settings(secure, listener, mechanism or ""), topic, 20)
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(20))


def test_replication_runs_over_the_sasl_ssl_inter_broker_listener(secure):
    """acks=all with min.insync.replicas=2 succeeds only if the follower fetched over SASL_SSL."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    s = settings(secure, "SASL_SSL", "PLAIN", "admin-secret", "admin")
    admin = AdminClient(s)
    name = f"isr-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1, 2, config={"min.insync.replicas": "2"})])[name].result(30)

    def isr() -> list[int]:
        return list(admin.list_topics(name, timeout=10).topics[name].partitions[0].isrs)
    wait_until(lambda: sorted(isr()) == [1, 2], timeout=30, what="both replicas in the ISR")
    errors: list = []
    producer = Producer({**s, "acks": "all"})
    for i in range(50):
        producer.produce(name, value=b"x", on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(60) == 0 and not errors, errors


def test_transactions_commit_and_abort_with_markers_over_the_sasl_ssl_inter_broker_listener(secure):
    """Two partitions led by the two brokers: the coordinator's WriteTxnMarkers reach the other
    leader over SASL_SSL, or read_committed never sees the committed records.

    Each transaction's records are flushed before it ends, so the aborted ones are in the log
    too. Without the flush, librdkafka may send EndTxn(abort) after an AddPartitionsToTxn that
    the coordinator answered CONCURRENT_TRANSACTIONS while the commit's markers were still being
    written; once the commit completes, that abort gets INVALID_TXN_STATE, from Kafka 2.8 too."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    s = settings(secure, "SASL_SSL", "SCRAM-SHA-512")
    name = f"txn-{uuid.uuid4().hex[:8]}"
    create_topic(secure.cluster.bootstrap_servers, name, partitions=2, replication_factor=2)
    from confluent_kafka.admin import AdminClient
    admin = AdminClient(s)
    assert {p.leader for p in admin.list_topics(name, timeout=30).topics[name].partitions.values()} == {1, 2}
    producer = Producer({**s, "transactional.id": f"tx-{name}"})
    producer.init_transactions(30)
    for outcome in ("commit", "abort"):
        producer.begin_transaction()
        for p in (0, 1):
            producer.produce(name, value=f"{outcome}-{p}".encode(), partition=p)
        assert producer.flush(30) == 0
        (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(30)
    consumer = Consumer({**s, "group.id": f"g-{name}", "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(name, p, 0) for p in (0, 1)])
    got: set[bytes] = set()
    try:
        def both_ends_read() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.add(msg.value())
            lso = [consumer.get_watermark_offsets(TopicPartition(name, p), cached=False)[1] for p in (0, 1)]
            return all(consumer.position([TopicPartition(name, p)])[0].offset >= lso[p] for p in (0, 1))
        wait_until(both_ends_read, timeout=60, what="read_committed to reach the end of both partitions",
                   interval=0)
        # per partition: the committed record, its marker, the aborted record, its marker
        ends = [consumer.get_watermark_offsets(TopicPartition(name, p), cached=False)[1] for p in (0, 1)]
    finally:
        consumer.close()
    assert ends == [4, 4]
    assert got == {b"commit-0", b"commit-1"}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_password_is_refused_with_the_brokers_reason(secure, mechanism):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient
    seen: list = []
    admin = AdminClient({**settings(secure, "SASL_PLAINTEXT", mechanism, password="not-the-password"),
                         "error_cb": seen.append})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)

    def refusals() -> list:
        admin.poll(0.2)     # serves error_cb
        return [e.str() for e in seen if e.code() == KafkaError._AUTHENTICATION]
    wait_until(refusals, timeout=20, what="an _AUTHENTICATION error from librdkafka")
    assert "Authentication failed" in refusals()[0]


def test_an_unknown_scram_user_is_refused_by_kafka_python(secure, caplog):
    """kafka-python gives up bootstrapping with a timeout and logs the broker's refusal."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError
    kw = python_style(settings(secure, "SASL_PLAINTEXT", "SCRAM-SHA-256", user="mallory", password="x"))
    with pytest.raises(KafkaError):
        KafkaAdminClient(request_timeout_ms=5000, bootstrap_timeout_ms=5000, **kw).list_topics()
    assert any("SaslAuthenticationFailedError" in r.getMessage() and "Authentication failed" in r.getMessage()
               for r in caplog.records)


def test_a_wrong_password_fails_odradeks_client_at_once(secure):
    from odradek.client import AdminClient
    from odradek.protocol.errors import ErrorCode, KafkaError
    kw = python_style(settings(secure, "SASL_SSL", "SCRAM-SHA-512", password="wrong"))
    with pytest.raises(KafkaError) as info:
        AdminClient(**kw).list_topics()
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "Authentication failed" in str(info.value)


def test_a_client_that_does_not_trust_the_broker_certificate_fails(secure):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    admin = AdminClient(settings(secure, "SASL_SSL", "PLAIN", cafile=secure.tls.other_ca))
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=8)


def test_ssl_listener_requiring_client_certificates_refuses_a_client_without_one(secure):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    s = settings(secure, "SSL", None)
    del s["ssl.certificate.location"], s["ssl.key.location"]
    with pytest.raises(KafkaException):
        AdminClient(s).list_topics(timeout=8)


def test_requests_before_authentication_close_the_connection(secure):
    """A Metadata request on a SASL listener before any handshake gets no answer: the broker
    closes the connection, as Kafka does."""
    import socket
    import struct
    from odradek.protocol.apis import metadata
    from odradek.protocol.header import encode_request
    port = secure.ports[1]["SASL_PLAINTEXT"]
    frame = encode_request(metadata, 1, 7, "probe", {"topics": None})
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        assert sock.recv(4) == b""


@pytest.mark.parametrize("problem", ["missing", "garbage", "jks"])
def test_a_broker_whose_keystore_cannot_be_used_refuses_to_start(tmp_path, problem):
    keystore = tmp_path / "broker.pem"
    if problem == "garbage":
        keystore.write_text("not a certificate\n")
    props = tmp_path / "server.properties"
    props.write_text("\n".join([
        "broker.id=1", f"listeners=SSL://127.0.0.1:{free_port()}", f"log.dirs={tmp_path / 'logs'}",
        "zookeeper.connect=127.0.0.1:1", "security.inter.broker.protocol=SSL",
        f"ssl.keystore.type={'JKS' if problem == 'jks' else 'PEM'}", f"ssl.keystore.location={keystore}",
        f"ssl.truststore.type=PEM", f"ssl.truststore.location={keystore}"]) + "\n")
    proc = subprocess.run([sys.executable, "-m", "odradek.zk.cli", "broker", "start", str(props)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if "startup failed" in line]
    assert len(errors) == 1 and str(keystore) in errors[0], proc.stderr


def _client_properties(secure: SecureCluster, path: Path) -> Path:
    """A client config file as an operator writes one for Kafka's tools (--command-config etc.)."""
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    'username="alice" password="alice-secret";\n'
                    f"ssl.truststore.type=PEM\nssl.truststore.location={secure.tls.ca}\n")
    return path


def _odradek(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek.zk.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=120)


def test_console_tools_and_kcat_with_a_client_config_file(secure, tmp_path):
    topic = _topic(secure, "tools")
    props = str(_client_properties(secure, tmp_path / "client.properties"))
    boot = secure.bootstrap("SASL_SSL")
    produced = _odradek("console-producer", "--bootstrap-server", boot, "--topic", topic,
                        "--producer.config", props, stdin="one\ntwo\nthree\n")
    assert produced.returncode == 0, produced.stderr
    consumed = _odradek("console-consumer", "--bootstrap-server", boot, "--topic", topic, "--from-beginning",
                        "--max-messages", "3", "--group", "tools-group", "--consumer.config", props)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["one", "two", "three"]
    groups = _odradek("consumer-groups", "--bootstrap-server", boot, "--command-config", props, "--list")
    assert groups.returncode == 0 and "tools-group" in groups.stdout.split(), groups.stderr
    kcat = subprocess.run(["kcat", "-C", "-b", boot, "-t", topic, "-o", "beginning", "-e", "-q",
                           "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
                           "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret",
                           "-X", f"ssl.ca.location={secure.tls.ca}"],
                          capture_output=True, text=True, timeout=60)
    assert kcat.returncode == 0, kcat.stderr
    assert kcat.stdout.split() == ["one", "two", "three"]


def test_a_wrong_password_is_one_line_from_the_console_tools(secure, tmp_path):
    props = tmp_path / "bad.properties"
    props.write_text(_client_properties(secure, tmp_path / "c.properties").read_text()
                     .replace('password="alice-secret"', 'password="nope"'))
    result = _odradek("consumer-groups", "--bootstrap-server", secure.bootstrap("SASL_SSL"),
                      "--command-config", str(props), "--list")
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "Authentication failed" in result.stderr, result.stderr
