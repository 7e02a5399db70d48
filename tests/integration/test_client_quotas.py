"""Client quotas on a running broker, set and removed live (no restart) with ``odradek configs``
(both modes) and the AdminClient, enforced on real clients: librdkafka's producer, kafka-python's
consumer, a SASL user, CreateTopics under controller_mutation_rate; DescribeClientQuotas with each
filter form; bad alterations refused with Kafka's errors and nothing stored.

Invariant: one module-scoped 1-broker cluster (1 ZooKeeper node) with a PLAINTEXT and a
SASL_PLAINTEXT (PLAIN) listener and ``quota.window.num=2``: a quota's rate is measured over two
1-second windows, so what may pass above the quota in a burst is about two seconds' worth
(Kafka's default 11 windows would let ten seconds' worth through first, only making the tests
slower). Each test uses client ids and topics of its own. A quota is known applied on the broker
once a probe client of that entity is throttled; times are only bounded from below.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from kazoo.client import KazooClient

from odradek.client import AdminClient, ErrorCode, KafkaError, NewTopic
from odradek.client.quota_admin import ClientQuotaAlteration, ClientQuotaEntity, ClientQuotaFilterComponent as C
from odradek.testing import wait_until
from odradek.testing.secure_cluster import SecuredListeners

pytestmark = pytest.mark.integration

ODRADEK = os.path.join(os.path.dirname(sys.executable), "odradek")
RATE = 50_000            # bytes/s of the quotas under test
N = 250_000              # bytes sent or consumed under a quota
BURST_S = 2.0            # quota.window.num * quota.window.size.seconds
VALUE = b"q" * 1000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from odradek.zk.cluster import LocalCluster
    base = tmp_path_factory.mktemp("client-quotas")
    secured = SecuredListeners.make(base, [1], protocols=("SASL_PLAINTEXT",), inter_broker="PLAINTEXT")
    c = LocalCluster(base / "cluster", zookeepers=1, brokers=1, extra_listeners=secured.extra_listeners,
                     overrides={**secured.overrides, "quota.window.num": "2"})
    c.start()
    c.sasl_bootstrap = secured.bootstrap("SASL_PLAINTEXT")
    try:
        yield c
    finally:
        c.stop()


def odradek(cluster, *args: str) -> str:
    r = subprocess.run([ODRADEK, "configs", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout


def create_topic(cluster, name: str) -> str:
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, 1, 1)])
    return name


def send(cluster, client_id: str, topic: str, nbytes: int, **extra) -> tuple[float, int]:
    """librdkafka sends ``nbytes`` of records: (seconds until all acknowledged, the largest
    throttle time its statistics reported for the broker)."""
    from confluent_kafka import Producer
    throttle, stats_seen = [0], [0]

    def on_stats(raw: str) -> None:
        stats_seen[0] += 1
        for broker in json.loads(raw)["brokers"].values():
            throttle[0] = max(throttle[0], int(broker.get("throttle", {}).get("max", 0)))
    producer = Producer({"bootstrap.servers": extra.pop("bootstrap", cluster.bootstrap_servers),
                         "client.id": client_id, "linger.ms": 5, "batch.size": 10_000, "statistics.interval.ms": 100,
                         "stats_cb": on_stats, **extra})
    started = time.monotonic()
    for _ in range(nbytes // len(VALUE)):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0
    elapsed = time.monotonic() - started
    seen = stats_seen[0]
    wait_until(lambda: producer.poll(0.05) is not None and stats_seen[0] >= seen + 2, 30, "statistics after the flush")
    return elapsed, throttle[0]


def throttled(cluster, client_id: str, **extra) -> bool:
    """Does a producer of this entity get throttled sending three seconds' worth of the quota?"""
    return send(cluster, client_id, "quota-probe", 3 * RATE, **extra)[1] > 0


def alter_client(cluster, mode: tuple[str, str], client_id: str, *change: str, applied: bool) -> str:
    """``odradek configs`` on a client id's quotas, then wait until the broker has (un)throttled it."""
    out = odradek(cluster, *mode, "--entity-type", "clients", "--entity-name", client_id, "--alter", *change)
    wait_until(lambda: throttled(cluster, client_id) == applied, 60,
               f"the broker to {'apply' if applied else 'lift'} the quotas of {client_id}")
    return out.strip()


def assert_held_to_the_quota(elapsed: float, throttle_ms: int) -> None:
    assert throttle_ms > 0
    assert elapsed >= N / RATE - BURST_S, f"{N} bytes under {RATE} B/s took {elapsed:.2f} s"


def test_producer_quota_set_by_the_cli_throttles_live_and_removing_it_lifts_it(cluster):
    topic = create_topic(cluster, "quota-produce")
    zk = ("--zookeeper", cluster.zookeeper_connect)
    out = alter_client(cluster, zk, "slow-producer", "--add-config", f"producer_byte_rate={RATE}", applied=True)
    assert out == "Completed updating config for entity: client-id 'slow-producer'."
    assert_held_to_the_quota(*send(cluster, "slow-producer", topic, N))
    assert send(cluster, "other-producer", topic, N)[1] == 0   # no quota for that client id

    alter_client(cluster, zk, "slow-producer", "--delete-config", "producer_byte_rate", applied=False)
    assert send(cluster, "slow-producer", topic, N)[1] == 0


def consume(cluster, client_id: str, topic: str, nbytes: int) -> tuple[float, int]:
    """kafka-python reads ``nbytes`` of records from the start: (seconds, the largest throttle
    time its metrics recorded)."""
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, client_id=client_id,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got, started = 0, time.monotonic()
        deadline = started + 120
        while got < nbytes and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += sum(len(r.value) for r in records)
        elapsed = time.monotonic() - started
        assert got >= nbytes
        throttles = [v for group in consumer.metrics().values() for k, v in group.items()
                     if k == "throttle-time-max" and v == v]   # NaN until recorded
        return elapsed, int(max(throttles, default=0))
    finally:
        consumer.close()


def test_consumer_quota_set_through_the_admin_api_throttles_fetches_live(cluster):
    topic = create_topic(cluster, "quota-consume")
    send(cluster, "filler", topic, N)
    bootstrap = ("--bootstrap-server", cluster.bootstrap_servers)
    # the producer quota on the same entity shows when the broker has applied the change
    out = alter_client(cluster, bootstrap, "slow-consumer", "--add-config",
                       f"consumer_byte_rate={RATE},producer_byte_rate={RATE}", applied=True)
    assert out == "Completed updating config for client slow-consumer."
    assert_held_to_the_quota(*consume(cluster, "slow-consumer", topic, N))

    alter_client(cluster, bootstrap, "slow-consumer", "--delete-config", "consumer_byte_rate,producer_byte_rate",
                 applied=False)
    assert consume(cluster, "slow-consumer", topic, N)[1] == 0


def test_a_sasl_users_quota_and_the_most_specific_entity_wins(cluster):
    alice = {"bootstrap": cluster.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.alter_client_quotas([
            ClientQuotaAlteration(ClientQuotaEntity.of({"user": "alice"}), (("producer_byte_rate", RATE),)),
            ClientQuotaAlteration(ClientQuotaEntity.of({"user": "alice", "client-id": "vip"}),
                                  (("producer_byte_rate", 1e9),))])
    wait_until(lambda: throttled(cluster, "alice-app", **dict(alice)), 60, "the broker to throttle alice")
    assert not throttled(cluster, "vip", **dict(alice))          # <user, client-id> beats user
    assert not throttled(cluster, "alice-app")                   # ANONYMOUS on PLAINTEXT: no quota
    out = odradek(cluster, "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", "users",
                  "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "vip", "--describe")
    assert out.strip() == "Quota configs for user-principal 'alice', client-id 'vip' are producer_byte_rate=1.0E9"
    out = odradek(cluster, "--zookeeper", cluster.zookeeper_connect, "--entity-type", "users", "--entity-name",
                  "alice", "--entity-type", "clients", "--describe")
    assert out.strip() == "Configs for user-principal 'alice', client-id 'vip' are producer_byte_rate=1000000000"


def test_describe_client_quotas_with_each_filter_form(cluster):
    entities = {("user", "u1"): 1, ("user", None): 2, ("client-id", "c1"): 3, ("client-id", None): 4}
    both = ClientQuotaEntity.of({"user": "u1", "client-id": "c1"})
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.alter_client_quotas([ClientQuotaAlteration(ClientQuotaEntity.of({t: n}), (("request_percentage", v),))
                                   for (t, n), v in entities.items()]
                                  + [ClientQuotaAlteration(both, (("request_percentage", 5),))])

        def described(*components, strict=False) -> dict:
            return {e: v["request_percentage"] for e, v in admin.describe_client_quotas(components, strict).items()
                    if "request_percentage" in v}
        u1, default_user = ClientQuotaEntity.of({"user": "u1"}), ClientQuotaEntity.of({"user": None})
        c1, default_client = ClientQuotaEntity.of({"client-id": "c1"}), ClientQuotaEntity.of({"client-id": None})
        assert described(C.of_entity("user", "u1"), strict=True) == {u1: 1}
        assert described(C.of_entity("user", "u1")) == {u1: 1, both: 5}
        assert described(C.of_default_entity("user"), strict=True) == {default_user: 2}
        assert described(C.of_entity_type("user"), strict=True) == {u1: 1, default_user: 2}
        assert described(C.of_entity_type("client-id"), strict=True) == {c1: 3, default_client: 4}
        assert described(C.of_entity("user", "u1"), C.of_entity("client-id", "c1")) == {both: 5}
        assert described() == {u1: 1, default_user: 2, c1: 3, default_client: 4, both: 5}
        assert described(strict=True) == {}
        for components, code in [((C.of_entity("user", "a"), C.of_entity("user", "b")), ErrorCode.INVALID_REQUEST),
                                 ((C.of_entity_type("group"),), ErrorCode.UNSUPPORTED_VERSION),
                                 ((C.of_entity_type(""),), ErrorCode.INVALID_REQUEST)]:
            with pytest.raises(KafkaError) as err:
                admin.describe_client_quotas(components)
            assert err.value.code == code


@pytest.mark.parametrize("entity, op, message", [
    ({"client-id": "bad"}, ("no_such_quota", 1.0), "Invalid configuration key no_such_quota"),
    ({"client-id": "bad"}, ("producer_byte_rate", 10.5), "Configuration producer_byte_rate must be a LONG value"),
    ({"client-id": "bad"}, ("consumer_byte_rate", -1.0), "Invalid value -1.0 for configuration consumer_byte_rate"),
    ({"client-id": ""}, ("producer_byte_rate", 1.0), "Empty client-id not supported"),
    ({"group": "bad"}, ("producer_byte_rate", 1.0), "Unhandled client quota entity type: group"),
    ({"user": "bad", "ip": "127.0.0.1"}, ("producer_byte_rate", 1.0), "Invalid quota entity combination"),
    ({}, ("producer_byte_rate", 1.0), "Invalid empty client quota entity"),
])
def test_bad_alterations_get_kafkas_errors_and_store_nothing(cluster, entity, op, message):
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        valid = ClientQuotaAlteration(ClientQuotaEntity.of({"client-id": "fine"}), (("producer_byte_rate", 1e9),))
        bad = ClientQuotaAlteration(ClientQuotaEntity.of(entity), (("request_percentage", 10.0), op))
        results = admin.alter_client_quotas([bad, valid], raise_errors=False)
        error = results[bad.entity]
        assert isinstance(error, KafkaError) and error.code == ErrorCode.INVALID_REQUEST
        assert message in (error.message or "")
        assert results[valid.entity] is None          # the other entry is applied on its own
        dry = ClientQuotaAlteration(ClientQuotaEntity.of({"client-id": "dry-run"}), (("producer_byte_rate", 1.0),))
        assert admin.alter_client_quotas([dry], validate_only=True) == {dry.entity: None}
        stored = admin.describe_client_quotas([])
    assert ClientQuotaEntity.of({"client-id": "dry-run"}) not in stored
    assert all(e.as_dict().get("client-id") != "bad" and e.as_dict().get("user") != "bad" for e in stored)
    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start(timeout=30)
    try:
        assert not zk.exists("/config/clients/bad") and not zk.exists("/config/users/bad")
        assert not zk.exists("/config/clients/dry-run")
    finally:
        zk.stop()
        zk.close()


def test_controller_mutation_rate_refuses_topics_over_the_quota_and_stores_nothing(cluster):
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers, client_id="mutator") as admin:
        admin.alter_client_quotas([ClientQuotaAlteration(ClientQuotaEntity.of({"client-id": "mutator"}),
                                                         (("controller_mutation_rate", 1.0),))])
        made: list[str] = []

        def refused() -> bool:   # 10 partitions a topic: the second takes the rate over 1/s
            name = f"mutated-{len(made)}"
            made.append(name)
            error = admin.create_topics([NewTopic(name, 10, 1)], raise_errors=False)[name]
            return error is not None and error.code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        wait_until(refused, 60, "CreateTopics to be refused THROTTLING_QUOTA_EXCEEDED")
        assert len(made) >= 2 and made[-1] not in admin.list_topics()
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers, client_id="someone-else") as admin:
        assert admin.create_topics([NewTopic(made[-1], 10, 1)]) == {made[-1]: None}
