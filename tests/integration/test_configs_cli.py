"""``odradek configs`` and the SCRAM admin API as an operator uses them, against one real cluster.

One cluster for the module: one ZooKeeper node and two brokers, each with a PLAINTEXT listener
(the fixture's readiness checks, the admin API) and a SASL_PLAINTEXT one serving SCRAM-SHA-256
and SCRAM-SHA-512; the brokers talk to each other over SASL_PLAINTEXT with SCRAM-SHA-256 as
``admin``, whose credential ``odradek configs --zookeeper`` writes before any broker starts.
Users are created by the tests through the CLI, odradek's AdminClient and kafka-python's, and
confluent-kafka proves a broker accepts them (and refuses a wrong password).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.scram import ScramClient, ScramCredential, ScramError, ScramServer
from odradek.testing import create_topic, wait_until
from odradek.zk.cluster import LocalCluster
from odradek_test_support import free_port

ODRADEK = os.path.join(os.path.dirname(sys.executable), "odradek")
ADMIN_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
              'password="admin-secret";')


def configs(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([ODRADEK, "configs", *args], capture_output=True, text=True, timeout=timeout)


def ok(*args: str) -> str:
    r = configs(*args)
    assert r.returncode == 0 and r.stderr == "", (r.stdout, r.stderr)
    return r.stdout


def fails(*args: str, fragment: str) -> str:
    r = configs(*args)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], r.stderr
    return lines[0]


class Secured:
    def __init__(self, cluster: LocalCluster, sasl_ports: dict[int, int]):
        self.cluster = cluster
        self.zk = cluster.zk
        self.zk_connect = cluster.zookeeper_connect
        self.plaintext = cluster.bootstrap_servers
        self.sasl = ",".join(f"127.0.0.1:{p}" for p in sasl_ports.values())

    def add_user(self, user: str, add_config: str) -> str:
        return ok("--zookeeper", self.zk_connect, "--alter", "--entity-type", "users", "--entity-name", user,
                  "--add-config", add_config)

    def user_config(self, user: str) -> dict:
        return json.loads(self.zk.get(f"/config/users/{user}")[0].decode())

    def notifications(self) -> list[dict]:
        return [json.loads(self.zk.get(f"/config/changes/{c}")[0].decode())
                for c in sorted(self.zk.get_children("/config/changes"))]


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Secured:
    base = tmp_path_factory.mktemp("configs-cluster")
    overrides = {
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": ADMIN_JAAS,
    }
    sasl_ports = {b: free_port() for b in (1, 2)}
    cluster = LocalCluster(base, zookeepers=1, brokers=2, overrides=overrides,
                           extra_listeners={b: [f"SASL_PLAINTEXT://127.0.0.1:{p}"] for b, p in sasl_ports.items()})
    # The inter-broker login needs the admin credential before any broker starts: create the
    # user as an operator would, once ZooKeeper serves.
    cluster.start(before_brokers=lambda: ok(
        "--zookeeper", cluster.zookeeper_connect, "--alter", "--entity-type", "users", "--entity-name", "admin",
        "--add-config", "SCRAM-SHA-256=[iterations=8192,password=admin-secret],SCRAM-SHA-512=[password=admin-secret]"))
    try:
        yield Secured(cluster, sasl_ports)
    finally:
        cluster.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def verifies(credential_text: str, mechanism: str, password: str) -> bool:
    """Run a full SCRAM exchange (protocol/scram.py) of ``password`` against the stored credential."""
    credential = ScramCredential.from_config(credential_text)
    server, client = ScramServer(mechanism, lambda _u: credential), ScramClient(mechanism, "u", password)
    try:
        client_final = client.step(server.step(client.first()))
        client.step(server.step(client_final))
    except ScramError:
        return False
    return server.complete and client.complete


def authenticates(secured: Secured, user: str, password: str, mechanism: str) -> bool:
    """Whether confluent-kafka (librdkafka) gets metadata over SASL_PLAINTEXT as ``user``
    (False once it reports an authentication failure)."""
    from confluent_kafka import KafkaError as RdKafkaError
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    errors: list = []
    admin = AdminClient({"bootstrap.servers": secured.sasl, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password,
                         "error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=1)
            return True
        except KafkaException:
            admin.poll(0.1)   # serves error_cb
        if any(e.code() == RdKafkaError._AUTHENTICATION for e in errors):
            return False
    raise AssertionError(f"neither metadata nor an authentication failure as {user}: {errors}")


# ------------------------------------------------------------------ --zookeeper: users

def test_zookeeper_mode_stores_kafkas_credential_and_announces_it(secured):
    user = unique("alice")
    out = secured.add_user(user, "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
                                 "SCRAM-SHA-512=[password=alice-secret]")
    assert out == f"Completed updating config for entity: user-principal '{user}'.\n"
    raw = secured.zk.get(f"/config/users/{user}")[0]
    assert b"alice-secret" not in raw
    stored = json.loads(raw.decode())
    assert stored["version"] == 1 and set(stored["config"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert ScramCredential.from_config(stored["config"]["SCRAM-SHA-256"]).iterations == 8192
    assert ScramCredential.from_config(stored["config"]["SCRAM-SHA-512"]).iterations == 4096
    assert verifies(stored["config"]["SCRAM-SHA-256"], "SCRAM-SHA-256", "alice-secret")
    assert not verifies(stored["config"]["SCRAM-SHA-256"], "SCRAM-SHA-256", "alice-secreT")
    assert {"version": 2, "entity_path": f"users/{user}"} in secured.notifications()

    described = ok("--zookeeper", secured.zk_connect, "--describe", "--entity-type", "users", "--entity-name", user)
    assert described == (f"Configs for user-principal '{user}' are "
                         "SCRAM-SHA-256=iterations=8192,SCRAM-SHA-512=iterations=4096\n")
    everyone = ok("--zookeeper", secured.zk_connect, "--describe", "--entity-type", "users")
    assert f"Configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192," in everyone
    assert "Configs for user-principal 'admin' are " in everyone and "salt=" not in everyone


def test_user_names_are_stored_sanitized_as_kafka_stores_them(secured):
    user = f"ops team@{uuid.uuid4().hex[:6]}"
    secured.add_user(user, "SCRAM-SHA-256=[password=ops-secret]")
    stored = user.replace(" ", "%20").replace("@", "%40")
    assert set(secured.user_config(stored)["config"]) == {"SCRAM-SHA-256"}
    assert {"version": 2, "entity_path": f"users/{stored}"} in secured.notifications()
    assert ok("--zookeeper", secured.zk_connect, "--describe", "--entity-type", "users", "--entity-name", user) == (
        f"Configs for user-principal '{user}' are SCRAM-SHA-256=iterations=4096\n")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_broker_accepts_a_user_the_cli_created_and_refuses_a_wrong_password(secured, mechanism):
    user = unique("carol")
    secured.add_user(user, f"{mechanism}=[iterations=4096,password=carol-secret]")
    assert authenticates(secured, user, "carol-secret", mechanism)
    assert not authenticates(secured, user, "not-carols", mechanism)


def test_deleting_a_mechanism_takes_effect_on_running_brokers(secured):
    user = unique("dan")
    secured.add_user(user, "SCRAM-SHA-256=[password=dan-secret],SCRAM-SHA-512=[password=dan-secret]")
    assert authenticates(secured, user, "dan-secret", "SCRAM-SHA-512")
    out = ok("--zookeeper", secured.zk_connect, "--alter", "--entity-type", "users", "--entity-name", user,
             "--delete-config", "SCRAM-SHA-512")
    assert out == f"Completed updating config for entity: user-principal '{user}'.\n"
    assert set(secured.user_config(user)["config"]) == {"SCRAM-SHA-256"}
    assert not authenticates(secured, user, "dan-secret", "SCRAM-SHA-512")
    assert authenticates(secured, user, "dan-secret", "SCRAM-SHA-256")
    fails("--zookeeper", secured.zk_connect, "--alter", "--entity-type", "users", "--entity-name", user,
          "--delete-config", "SCRAM-SHA-512", fragment="Invalid config(s): SCRAM-SHA-512")


def test_user_errors_are_one_line_and_never_echo_the_password(secured):
    line = fails("--zookeeper", secured.zk_connect, "--alter", "--entity-type", "users", "--entity-name", "eve",
                 "--add-config", "SCRAM-SHA-256=[iterations=20000,password=hunter2]",
                 fragment="more than the maximum 16384")
    assert "hunter2" not in line
    fails("--zookeeper", secured.zk_connect, "--alter", "--entity-type", "users", "--entity-name", "eve",
          "--add-config", "SCRAM-SHA-1=[password=hunter2]", fragment="Unknown Dynamic Configuration: SCRAM-SHA-1")
    fails("--zookeeper", secured.zk_connect, "--alter", "--entity-type", "users", "--entity-default",
          "--add-config", "SCRAM-SHA-256=[password=hunter2]", fragment="SCRAM credentials belong to a user")
    fails("--zookeeper", "127.0.0.1:1", "--zookeeper-timeout", "2", "--describe", "--entity-type", "users",
          fragment="cannot connect to ZooKeeper at 127.0.0.1:1")
    assert secured.zk.exists("/config/users/eve") is None


# ------------------------------------------------------------------ --zookeeper: topics, brokers, clients

def test_topic_configs_through_zookeeper(secured):
    topic = unique("orders")
    create_topic(secured.plaintext, topic, partitions=1, replication_factor=2)
    out = ok("--zookeeper", secured.zk_connect, "--alter", "--entity-type", "topics", "--entity-name", topic,
             "--add-config", "retention.ms=86400000,cleanup.policy=[compact,delete]")
    assert out == f"Completed updating config for entity: topic '{topic}'.\n"
    assert json.loads(secured.zk.get(f"/config/topics/{topic}")[0].decode())["config"] == {
        "retention.ms": "86400000", "cleanup.policy": "compact,delete"}
    assert {"version": 2, "entity_path": f"topics/{topic}"} in secured.notifications()
    ok("--zookeeper", secured.zk_connect, "--alter", "--topic", topic, "--delete-config", "retention.ms")
    assert ok("--zookeeper", secured.zk_connect, "--describe", "--topic", topic) == (
        f"Configs for topic '{topic}' are cleanup.policy=compact,delete\n")
    # what a broker answers DescribeConfigs with: ZooKeeper's overrides, read for the request
    assert ok("--bootstrap-server", secured.plaintext, "--describe", "--topic", topic) == (
        f"Dynamic configs for topic {topic} are:\n"
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}\n")
    everything = ok("--bootstrap-server", secured.plaintext, "--describe", "--topic", topic, "--all").splitlines()
    assert everything[0] == f"All configs for topic {topic} are:"
    assert "  segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}" \
        in everything
    broker = ok("--bootstrap-server", secured.plaintext, "--describe", "--broker", "1", "--all").splitlines()
    assert broker[0] == "All configs for broker 1 are:"
    assert "  broker.id=1 sensitive=false synonyms={STATIC_BROKER_CONFIG:broker.id=1, DEFAULT_CONFIG:broker.id=-1}" \
        in broker
    assert any(line.startswith("  sasl.jaas.config=null sensitive=true") for line in broker)
    fails("--zookeeper", secured.zk_connect, "--alter", "--topic", unique("nope"), "--add-config", "retention.ms=1",
          fragment="does not exist")
    fails("--zookeeper", secured.zk_connect, "--alter", "--topic", topic, "--add-config", "retention.ms=soon",
          fragment="retention.ms")


def test_broker_and_client_configs_through_zookeeper(secured):
    out = ok("--zookeeper", secured.zk_connect, "--alter", "--entity-type", "brokers", "--entity-name", "1",
             "--add-config", "follower.replication.throttled.rate=1048576")
    assert out == "Completed updating config for entity: brokers '1'.\n"
    assert json.loads(secured.zk.get("/config/brokers/1")[0].decode())["config"] == {
        "follower.replication.throttled.rate": "1048576"}
    assert {"version": 2, "entity_path": "brokers/1"} in secured.notifications()
    assert ok("--zookeeper", secured.zk_connect, "--describe", "--entity-type", "brokers", "--entity-name", "1") == (
        "Configs for brokers '1' are follower.replication.throttled.rate=1048576\n")
    fails("--zookeeper", secured.zk_connect, "--alter", "--entity-type", "brokers", "--entity-default",
          "--add-config", "log.cleaner.threads=2", fragment="for default cluster if any broker is running")
    fails("--zookeeper", secured.zk_connect, "--alter", "--entity-type", "brokers", "--entity-name", "2",
          "--add-config", "log.cleaner.threads=2", fragment="when broker 2 is running")

    client = unique("app")
    ok("--zookeeper", secured.zk_connect, "--alter", "--entity-type", "clients", "--entity-name", client,
       "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    assert json.loads(secured.zk.get(f"/config/clients/{client}")[0].decode())["config"] == {
        "producer_byte_rate": "1024", "consumer_byte_rate": "2048"}
    assert {"version": 2, "entity_path": f"clients/{client}"} in secured.notifications()
    fails("--zookeeper", secured.zk_connect, "--alter", "--entity-type", "clients", "--entity-name", client,
          "--add-config", "producer_byte_rate=fast", fragment="Not a number")


# ------------------------------------------------------------------ the admin API

def test_odradek_admin_client_upserts_describes_and_deletes(secured):
    from odradek.client import AdminClient
    from odradek.client.scram_admin import (ScramCredentialInfo, UserScramCredentialDeletion,
                                            UserScramCredentialUpsertion)
    user = unique("bob")
    with AdminClient(bootstrap_servers=secured.plaintext) as admin:
        assert admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion(user, "SCRAM-SHA-512", "bob-secret", 8192)]) == {user: None}
        assert admin.describe_user_scram_credentials([user]) == {
            user: [ScramCredentialInfo("SCRAM-SHA-512", 8192)]}
        assert user in admin.describe_user_scram_credentials()
        stored = secured.user_config(user)["config"]["SCRAM-SHA-512"]
        assert verifies(stored, "SCRAM-SHA-512", "bob-secret")
        assert {"version": 2, "entity_path": f"users/{user}"} in secured.notifications()
        assert authenticates(secured, user, "bob-secret", "SCRAM-SHA-512")

        errors = admin.alter_user_scram_credentials([
            UserScramCredentialDeletion(user, "SCRAM-SHA-256"),                  # has none
            UserScramCredentialUpsertion("", "SCRAM-SHA-256", "x"),
            UserScramCredentialUpsertion("frank", "SCRAM-SHA-256", "x", iterations=100000),
        ], raise_errors=False)
        assert {u: e.code for u, e in errors.items()} == {
            user: ErrorCode.RESOURCE_NOT_FOUND, "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "frank": ErrorCode.UNACCEPTABLE_CREDENTIAL}

        admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, "SCRAM-SHA-512")])
        with pytest.raises(KafkaError) as info:
            admin.describe_user_scram_credentials([user])
        assert info.value.code == ErrorCode.RESOURCE_NOT_FOUND
        found = admin.describe_user_scram_credentials([user, user], raise_errors=False)
        assert found[user].code == ErrorCode.DUPLICATE_RESOURCE
    assert not authenticates(secured, user, "bob-secret", "SCRAM-SHA-512")


def test_kafka_python_admin_client_manages_scram_users(secured):
    from kafka.admin import KafkaAdminClient, ScramMechanism, UserScramCredentialUpsertion
    user = unique("gina")
    upsert = UserScramCredentialUpsertion(user, ScramMechanism.SCRAM_SHA_256, "gina-secret", iterations=4096)
    # kafka-python 3.0 sends AlterUserScramCredentials to a random broker, and one that is not the
    # controller answers NOT_CONTROLLER, as Kafka 2.8's do: a user retries, so does this test.
    answers = []
    for _ in range(30):
        admin = KafkaAdminClient(bootstrap_servers=secured.plaintext)
        try:
            answers.append(admin.alter_user_scram_credentials([upsert]))
        finally:
            admin.close()
        if answers[-1] == {user: None}:
            break
    assert answers[-1] == {user: None}, answers
    assert all(a == {user: "This is not the correct controller for this cluster."} for a in answers[:-1]), answers
    admin = KafkaAdminClient(bootstrap_servers=secured.plaintext)
    try:
        described = admin.describe_user_scram_credentials([user])
        assert described[user]["error"] is None
        assert [(int(i["mechanism"]), i["iterations"]) for i in described[user]["credential_infos"]] == [(1, 4096)]
        ghost = unique("nobody")
        assert "does not exist" in admin.describe_user_scram_credentials([ghost])[ghost]["error"]
    finally:
        admin.close()
    assert authenticates(secured, user, "gina-secret", "SCRAM-SHA-256")


def as_admin(secured: Secured, tmp_path, mechanism: str) -> tuple[str, ...]:
    """The flags of a tool that logs in to the SASL listener as ``admin`` with ``mechanism``."""
    props = tmp_path / "admin.properties"
    props.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\nsasl.jaas.config={ADMIN_JAAS}\n")
    return ("--bootstrap-server", secured.sasl, "--command-config", str(props))


def test_bootstrap_server_mode_over_sasl_with_a_command_config(secured, tmp_path):
    user = unique("hank")
    common = as_admin(secured, tmp_path, "SCRAM-SHA-256")
    out = ok(*common, "--alter", "--entity-type", "users", "--entity-name", user,
             "--add-config", "SCRAM-SHA-256=[iterations=8192,password=hank-secret],SCRAM-SHA-512=[password=hank-secret]")
    assert out == f"Completed updating config for user {user}.\n"
    assert "hank-secret" not in out
    assert ok(*common, "--describe", "--entity-type", "users", "--entity-name", user) == (
        f"SCRAM credential configs for user-principal '{user}' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")
    assert authenticates(secured, user, "hank-secret", "SCRAM-SHA-256")

    ok(*common, "--alter", "--entity-type", "users", "--entity-name", user, "--delete-config", "SCRAM-SHA-256")
    assert set(secured.user_config(user)["config"]) == {"SCRAM-SHA-512"}
    ghost = unique("ghost")
    r = configs(*common, "--describe", "--entity-type", "users", "--entity-name", ghost)
    assert r.returncode == 1 and r.stdout == (
        f"Error retrieving SCRAM credential configs for user-principal '{ghost}': ResourceNotFoundException: "
        f"Attempt to describe a user credential that does not exist: {ghost}\n")
    fails(*common, "--alter", "--entity-type", "topics", "--entity-name", "t", "--add-config", "retention.ms=1",
          fragment="UNKNOWN_TOPIC_OR_PARTITION")
    fails("--bootstrap-server", secured.sasl, "--command-config", str(tmp_path / "missing.properties"),
          "--describe", "--entity-type", "users", fragment="cannot read")


def test_topics_through_the_sasl_listener_with_a_command_config(secured, tmp_path):
    """``odradek topics --bootstrap-server`` logs in as the admin client configured by its file."""
    topic = unique("secured-topic")
    common = as_admin(secured, tmp_path, "SCRAM-SHA-512")

    def topics(*args: str) -> tuple[int, str, str]:
        r = subprocess.run([ODRADEK, "topics", *common, *args], capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout, r.stderr

    assert topics("--create", "--topic", topic, "--partitions", "2", "--replication-factor", "2") == (
        0, f"Created topic {topic}.\n", "")
    # (the broker asked learns of the topic from the controller's UpdateMetadata)
    wait_until(lambda: topics("--list", "--topic", topic) == (0, f"{topic}\n", ""), 60, f"{topic} listed")


def test_delegation_tokens_are_disabled_without_a_secret_key(secured):
    """This cluster sets no delegation.token.secret.key: every token request over SASL answers 61."""
    from odradek.client import AdminClient
    with AdminClient(bootstrap_servers=secured.sasl, security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                     sasl_plain_username="admin", sasl_plain_password="admin-secret", request_timeout_ms=15000) as a:
        for call in (lambda: a.create_delegation_token(), lambda: a.describe_delegation_token(),
                     lambda: a.renew_delegation_token(b"x", 1), lambda: a.expire_delegation_token(b"x", -1)):
            with pytest.raises(KafkaError) as disabled:
                call()
            assert disabled.value.code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    assert secured.zk.exists("/delegation_token/tokens") is None
