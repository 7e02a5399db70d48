"""Delegation tokens (KIP-48) against real brokers: two brokers with a SASL_PLAINTEXT listener
serving SCRAM (users in ZooKeeper, admin the super user and inter-broker principal), ACLs on and
``delegation.token.secret.key`` set. A token created by alice logs in as alice (her ACLs apply),
any broker knows it at once (the change notifications), renew/expire/describe behave as Kafka
2.8's, the expiry check removes expired tokens, and the PLAINTEXT listener and token-authenticated
connections are refused token requests with 64. odradek's own clients log in with the token:
kafka-python and librdkafka cannot (their SCRAM first message has no ``tokenauth`` extension)."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from odradek.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from odradek.client.config import ClientConfig
from odradek.client.connection import BrokerConnection
from odradek.client.security import ClientSecurity
from odradek.client.scram_admin import UserScramCredentialUpsertion
from odradek.protocol.acl import (AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType,
                                  ResourcePattern, ResourceType)
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.testing import wait_until
from odradek_test_support import free_port

pytestmark = pytest.mark.integration

ADMIN_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
              'password="admin-secret";')
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
MECHANISM = "SCRAM-SHA-256"


def odradek(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek.zk.cli", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from odradek.zk.cluster import LocalCluster
    sasl_ports = {b: free_port() for b in (1, 2)}
    c = LocalCluster(tmp_path_factory.mktemp("tokens"), zookeepers=1, brokers=2, extra_listeners={
        b: [f"SASL_PLAINTEXT://127.0.0.1:{p}"] for b, p in sasl_ports.items()}, overrides={
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": ADMIN_JAAS,
        "delegation.token.secret.key": "token-secret-key",
        "delegation.token.expiry.check.interval.ms": "1000",
    })
    c.start(before_brokers=lambda: odradek(
        "configs", "--zookeeper", c.zookeeper_connect, "--alter", "--entity-type", "users", "--entity-name", "admin",
        "--add-config", f"{MECHANISM}=[password=admin-secret]"))
    c.sasl_ports = sasl_ports
    c.sasl_bootstrap = ",".join(f"127.0.0.1:{p}" for p in sasl_ports.values())
    try:
        with admin(c) as a:
            a.alter_user_scram_credentials([UserScramCredentialUpsertion(u, m, p) for u, p in PASSWORDS.items()
                                            if u != "admin" for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")])
        yield c
    finally:
        c.stop()


def user_config(cluster, user: str, bootstrap: str | None = None) -> dict:
    return {"bootstrap.servers": bootstrap or cluster.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": MECHANISM, "sasl.username": user, "sasl.password": PASSWORDS[user]}


def token_config(cluster, token, bootstrap: str | None = None, mechanism: str = MECHANISM) -> dict:
    """Kafka's client settings for a token login (ScramLoginModule with tokenauth="true")."""
    return {"bootstrap.servers": bootstrap or cluster.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                f'username="{token.info.token_id}" password="{token.hmac_base64}" tokenauth="true";'}


def admin(cluster, user: str = "admin", **config) -> AdminClient:
    return AdminClient({**user_config(cluster, user), "request.timeout.ms": 15000, **config})


def logs_in(config: dict, port: int) -> bool:
    """Whether one broker (its SASL port) accepts the login ``config`` describes."""
    conn = BrokerConnection("127.0.0.1", port, security=ClientSecurity.from_config(ClientConfig("admin", config)))
    try:
        conn.connect()
        return True
    except KafkaError as exc:
        assert exc.code == ErrorCode.SASL_AUTHENTICATION_FAILED, exc
        return False
    finally:
        conn.close()


def grant(cluster, principal: str, rtype: ResourceType, name: str, *operations: AclOperation) -> None:
    with admin(cluster) as a:
        a.create_acls([AclBinding(ResourcePattern(rtype, name, PatternType.LITERAL),
                                  AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW))
                       for op in operations])


def create(cluster, user: str, renewers=(), max_lifetime_ms: int = -1):
    with admin(cluster, user) as a:
        return a.create_delegation_token(list(renewers), max_lifetime_ms)


def test_a_token_logs_in_as_its_owner_on_every_broker_and_alices_acls_apply(cluster):
    topic, group = f"orders-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    with admin(cluster) as a:
        a.create_topics([NewTopic(topic, 1, 2)])
    grant(cluster, "User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.READ,
          AclOperation.DESCRIBE)
    grant(cluster, "User:alice", ResourceType.GROUP, group, AclOperation.READ)
    # created through broker 1 only; broker 2 learns of it from the change notification
    token = create(cluster, "alice", max_lifetime_ms=3_600_000)
    assert token.info.owner == "User:alice" and token.info.max_timestamp - token.info.issue_timestamp == 3_600_000
    stored = json.loads(cluster.zk.get(f"/delegation_token/tokens/{token.info.token_id}")[0])
    assert stored == {"version": 1, "owner": "User%3Aalice", "renewers": [], "tokenId": token.info.token_id,
                      "issueTimestamp": token.info.issue_timestamp, "maxTimestamp": token.info.max_timestamp,
                      "expiryTimestamp": token.info.expiry_timestamp}
    changes = cluster.zk.get_children("/delegation_token/token_changes")
    assert any(cluster.zk.get(f"/delegation_token/token_changes/{c}")[0] == token.info.token_id.encode()
               for c in changes)
    for port in cluster.sasl_ports.values():
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            wait_until(lambda: logs_in(token_config(cluster, token, mechanism=mechanism), port), 15,
                       f"broker on port {port} accepts the token with {mechanism}")
    # the token acts as alice: her Write and Read ACLs apply, bob (no ACLs) is refused
    producer = Producer(acks="all", retries=3, request_timeout_ms=10000, **token_config(cluster, token))
    try:
        producer.send(topic, b"from-the-token", key=b"k").get(20)
    finally:
        producer.close()
    bob = Producer(acks="all", retries=0, max_block_ms=5000, **user_config(cluster, "bob"))
    with pytest.raises(KafkaError) as refused:
        bob.send(topic, b"no").get(15)
    bob.close()
    assert refused.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    consumer = Consumer(group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                        **token_config(cluster, token))
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[bytes] = []
        wait_until(lambda: got.extend(r.value for rs in consumer.poll(timeout_ms=200).values() for r in rs) or got,
                   30, "the token's consumer reads the record")
        assert got == [b"from-the-token"]
        consumer.commit()
    finally:
        consumer.close()
    # a token-authenticated connection may not ask for tokens (Kafka: 64)
    with AdminClient({**token_config(cluster, token), "request.timeout.ms": 15000}) as a:
        with pytest.raises(KafkaError) as not_allowed:
            a.create_delegation_token()
    assert not_allowed.value.code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


def test_token_requests_on_the_plaintext_listener_are_refused_with_64(cluster):
    with AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "request.timeout.ms": 15000}) as a:
        for call in (lambda: a.create_delegation_token(), lambda: a.describe_delegation_token(),
                     lambda: a.renew_delegation_token(b"x", 1000), lambda: a.expire_delegation_token(b"x", -1)):
            with pytest.raises(KafkaError) as refused:
                call()
            assert refused.value.code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


def test_renew_and_expire_as_kafka_checks_them_and_an_expired_token_no_longer_logs_in(cluster):
    token = create(cluster, "alice", renewers=["User:bob"])
    port = cluster.sasl_ports[2]
    with admin(cluster, "carol") as carol:
        with pytest.raises(KafkaError) as mismatch:
            carol.renew_delegation_token(token.hmac, 60_000)
        assert mismatch.value.code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        with pytest.raises(KafkaError) as missing:
            carol.renew_delegation_token(b"not-an-hmac", 60_000)
        assert missing.value.code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    with admin(cluster, "bob") as bob:          # a renewer may renew, capped at the max lifetime
        before = time.time() * 1000
        expiry = bob.renew_delegation_token(token.hmac, 10 * 24 * 3600 * 1000)
        assert expiry == token.info.max_timestamp
        expiry = bob.renew_delegation_token(token.hmac, 60_000)
        assert before + 60_000 <= expiry <= time.time() * 1000 + 60_000
    wait_until(lambda: logs_in(token_config(cluster, token), port), 15, "the token logs in")
    # the command-line tool expires it at once: login refused on every broker, describe empty
    out = odradek("delegation-tokens", "--bootstrap-server", cluster.sasl_bootstrap, "--command-config",
                  properties(cluster, "alice"), "--expire", "--expiry-time-period", "-1", "--hmac", token.hmac_base64)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"Calling expire token operation with hmac :{token.hmac_base64} , "
                                 f"expire-time-period : -1\nCompleted expire operation. New expiry date : ")
    for p in cluster.sasl_ports.values():
        wait_until(lambda: not logs_in(token_config(cluster, token), p), 15, f"port {p} refuses the expired token")
    assert cluster.zk.exists(f"/delegation_token/tokens/{token.info.token_id}") is None
    with admin(cluster, "alice") as a:
        assert token.info.token_id not in [t.info.token_id for t in a.describe_delegation_token()]
        with pytest.raises(KafkaError) as gone:
            a.renew_delegation_token(token.hmac, 1000)
        assert gone.value.code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND


def test_the_expiry_check_removes_tokens_past_their_expiry(cluster):
    token = create(cluster, "alice")
    with admin(cluster, "alice") as a:
        expiry = a.expire_delegation_token(token.hmac, 1500)
    assert expiry <= time.time() * 1000 + 1500
    wait_until(lambda: cluster.zk.exists(f"/delegation_token/tokens/{token.info.token_id}") is None, 20,
               "the controller's expiry check removed the token")
    assert not logs_in(token_config(cluster, token), cluster.sasl_ports[1])


def properties(cluster, user: str) -> str:
    path = cluster.data_dir / f"{user}.properties"
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={MECHANISM}\n"
                    f"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{user}" password="{PASSWORDS[user]}";\n')
    return str(path)


def test_describe_shows_each_principal_what_kafka_shows_and_the_cli_prints_kafkas_table(cluster):
    token = create(cluster, "alice", renewers=["User:bob"])
    tid = token.info.token_id

    def seen(user: str, owners=None) -> set[str]:
        with admin(cluster, user) as a:
            return {t.info.token_id for t in a.describe_delegation_token(owners)}
    assert tid in seen("alice") and tid in seen("bob") and tid in seen("admin")
    assert tid not in seen("carol")
    assert tid in seen("admin", ["User:bob"]) and tid not in seen("admin", ["User:carol"])
    grant(cluster, "User:carol", ResourceType.DELEGATION_TOKEN, tid, AclOperation.DESCRIBE)
    wait_until(lambda: tid in seen("carol"), 15, "carol's Describe ACL on the token lets her see it")
    with admin(cluster, "alice") as a:
        [described] = [t for t in a.describe_delegation_token(["User:alice"]) if t.info.token_id == tid]
    assert described == token
    out = odradek("delegation-tokens", "--bootstrap-server", cluster.sasl_bootstrap, "--command-config",
                  properties(cluster, "bob"), "--describe", "--owner-principal", "User:alice")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "Calling describe token operation for owners :[User:alice]"
    assert lines[1].startswith("Total number of tokens : ") and lines[2] == ""
    assert lines[3].split() == ["TOKENID", "HMAC", "OWNER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE"]
    row = next(line for line in lines if line.startswith(tid))
    assert row.split()[:4] == [tid, token.hmac_base64, "User:alice", "[User:bob]"]
    assert row.split()[4] == time.strftime("%Y-%m-%dT%H:%M", time.localtime(token.info.issue_timestamp / 1000))
    # the tool's create and renew
    created = odradek("delegation-tokens", "--bootstrap-server", cluster.sasl_bootstrap, "--command-config",
                      properties(cluster, "carol"), "--create", "--max-life-time-period", "-1",
                      "--renewer-principal", "User:alice")
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith("Calling create token operation with renewers :[User:alice] , "
                                     "max-life-time-period :-1\nCreated delegation token with tokenId : ")
    new_hmac = created.stdout.splitlines()[-1].split()[1]
    assert base64.b64decode(new_hmac)
    renewed = odradek("delegation-tokens", "--bootstrap-server", cluster.sasl_bootstrap, "--command-config",
                      properties(cluster, "alice"), "--renew", "--renew-time-period", "60000", "--hmac", new_hmac)
    assert renewed.returncode == 0 and "Completed renew operation. New expiry date : " in renewed.stdout
    bad = odradek("delegation-tokens", "--bootstrap-server", cluster.sasl_bootstrap, "--command-config",
                  properties(cluster, "bob"), "--renew", "--renew-time-period", "1", "--hmac", new_hmac)
    assert bad.returncode == 1
    assert bad.stderr.strip() == "Error while executing delegation token command : " \
                                 "Specified Principal is not valid Owner/Renewer."
    usage = odradek("delegation-tokens", "--bootstrap-server", "x:1", "--command-config", "x", "--create")
    assert usage.returncode == 1 and "max-life-time-period" in usage.stderr


def test_a_restarted_broker_loads_every_token_from_zookeeper(cluster):
    """Last in the module: it restarts broker 2. Tokens are in ZooKeeper, not in a broker's memory."""
    token = create(cluster, "alice")
    cluster.kill_broker(2)
    cluster.start_broker(2)
    wait_until(lambda: logs_in(token_config(cluster, token), cluster.sasl_ports[2]), 30,
               "the restarted broker accepts the token")
    with admin(cluster, "alice") as a:
        assert token in a.describe_delegation_token(["User:alice"])
