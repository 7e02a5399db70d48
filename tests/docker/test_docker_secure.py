"""The secured compose variant (docker-compose.yml + docker-compose.secure.yml), from the host.

A user fetches the CA from the `secrets` volume as the compose file's header says, then
confluent-kafka produces and consumes as the application user over SASL_SSL/SCRAM-SHA-512
(topics replicated three ways over the brokers' SASL_SSL INTERNAL listener). A wrong password,
a plaintext client and a client that does not trust the CA are refused, and a user without ACLs
is denied the topic.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from compose_cluster import BROKERS, ComposeCluster, compose_project, wait_until


@pytest.fixture(scope="module")
def secure_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                   image: str) -> Iterator[tuple[ComposeCluster, Path]]:
    with compose_project(request, tmp_path_factory, ["docker-compose.yml", "docker-compose.secure.yml"],
                         {"ODRADEK_USER": "alice", "ODRADEK_USER_PASSWORD": "alice-in-docker"}) as c:
        ca = tmp_path_factory.mktemp("secure-compose") / "ca.crt"
        c.compose_cmd("cp", "secrets:/var/lib/odradek/secrets/ca.crt", str(ca))
        yield c, ca


def _settings(c: ComposeCluster, ca: Path, user: str = "alice", password: str = "alice-in-docker") -> dict:
    return {"bootstrap.servers": c.bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password, "ssl.ca.location": str(ca)}


def test_the_application_user_produces_and_consumes_over_sasl_ssl(secure_cluster) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    c, ca = secure_cluster
    s = _settings(c, ca)
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(s)            # kept: a collected client abandons its futures
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(60)
    errors: list = []
    producer = Producer({**s, "acks": "all", "enable.idempotence": True})
    for i in range(100):
        producer.produce(topic, key=str(i).encode(), value=f"v{i}".encode(),
                         on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(60) == 0 and not errors, errors
    consumer = Consumer({**s, "group.id": "secure-app", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: set[bytes] = set()
    try:
        def read_all() -> bool:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.add(msg.value())
            return len(got) == 100
        wait_until(read_all, 90, "every record back over SASL_SSL", interval=0)
    finally:
        consumer.close()
    meta = admin.list_topics(topic, timeout=30).topics[topic]
    assert all(sorted(p.isrs) == list(BROKERS) for p in meta.partitions.values())


@pytest.mark.parametrize("how", ["wrong password", "plaintext", "untrusted CA", "no ACLs"])
def test_clients_without_the_right_credentials_are_refused(secure_cluster, tmp_path, how) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    c, ca = secure_cluster
    if how == "wrong password":
        s = _settings(c, ca, password="guess")
    elif how == "plaintext":
        s = {"bootstrap.servers": c.bootstrap}
    elif how == "untrusted CA":
        from odradek.testing.certificates import make_tls_files
        s = _settings(c, make_tls_files(tmp_path).ca)
    else:   # a SCRAM user the secrets service gave no ACL: authenticated, and shown no topic
        from confluent_kafka.admin import NewTopic
        topic = f"alices-{uuid.uuid4().hex[:8]}"
        alice = AdminClient(_settings(c, ca))
        alice.create_topics([NewTopic(topic, 1, 3)])[topic].result(60)
        c.docker("exec", c.container("broker-1"), "odradek", "configs", "--zookeeper", "zookeeper-1:2181",
                 "--alter", "--entity-type", "users", "--entity-name", "mallory",
                 "--add-config", "SCRAM-SHA-512=[password=mallory-secret]")
        assert topic in alice.list_topics(timeout=30).topics
        seen = AdminClient(_settings(c, ca, "mallory", "mallory-secret")).list_topics(timeout=30).topics
        assert topic not in seen and not [t for t in seen if not t.startswith("__")], seen
        return
    with pytest.raises(KafkaException):
        AdminClient(s).list_topics(timeout=8)
