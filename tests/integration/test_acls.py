"""ACLs against real brokers: two brokers with the AclAuthorizer, SASL PLAIN principals (admin is a
super user and the inter-broker principal; alice and bob are not), ACLs written with
``odradek acls --authorizer-properties zookeeper.connect=...`` and through the ACL APIs, taking
effect on running brokers within seconds; Kafka's error codes for what is denied."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from odradek.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from odradek.protocol.acl import (AccessControlEntry, AccessControlEntryFilter, AclBinding, AclBindingFilter,
                                  AclOperation, AclPermissionType, PatternType, ResourcePattern,
                                  ResourcePatternFilter, ResourceType)
from odradek.protocol.apis import metadata, produce, stop_replica, update_metadata
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import BatchBuilder
from odradek.testing import wait_until
from odradek_test_support import free_port
from test_broker_e2e import RawClient

pytestmark = pytest.mark.integration

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
LIVE_WITHIN = 15.0   # seconds for an ACL change to reach every broker


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from odradek.zk.cluster import LocalCluster
    sasl_ports = {i: free_port() for i in (1, 2)}
    c = LocalCluster(tmp_path_factory.mktemp("acls"), zookeepers=1, brokers=2, extra_listeners={
        i: [f"SASL_PLAINTEXT://127.0.0.1:{port}"] for i, port in sasl_ports.items()}, overrides={
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "auto.create.topics.enable": "true",
    })
    c.start()
    c.sasl_bootstrap = ",".join(f"127.0.0.1:{p}" for p in sasl_ports.values())
    try:
        yield c
    finally:
        c.stop()


def client_config(cluster, user: str) -> dict:
    return {"bootstrap_servers": cluster.sasl_bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": user, "sasl_plain_password": PASSWORDS[user]}


def admin(cluster, user: str = "admin") -> AdminClient:
    return AdminClient(request_timeout_ms=15000, **client_config(cluster, user))


def new_topic(cluster, name: str, partitions: int = 1, rf: int = 2) -> str:
    with admin(cluster) as a:
        a.create_topics([NewTopic(name, partitions, rf)])
        wait_until(lambda: all(p["leader"] >= 0 for p in a.describe_topics([name])[0]["partitions"]),
                   30, f"{name} has leaders")
    return name


def produce_code(cluster, user: str, topic: str) -> int:
    """Produce one record as ``user`` over SASL PLAIN; 0 or the error code."""
    producer = Producer(acks="all", retries=0, max_block_ms=5000, request_timeout_ms=5000,
                        **client_config(cluster, user))
    try:
        producer.send(topic, b"value", key=b"key").get(15)
        return 0
    except KafkaError as exc:
        return int(exc.code)
    finally:
        producer.close()


def odradek(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek.zk.cli", *args], capture_output=True, text=True,
                          input=stdin, timeout=120, env={**os.environ})


# ---------------------------------------------------------------- ZooKeeper mode (kafka-acls.sh --authorizer-properties)

def test_cli_acls_in_zookeeper_reach_running_brokers(cluster):
    topic = new_topic(cluster, "orders")
    assert produce_code(cluster, "alice", topic) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    zk_props = f"zookeeper.connect={cluster.zookeeper_connect}"
    added = odradek("acls", "--authorizer-properties", zk_props, "--add", "--allow-principal", "User:alice",
                    "--operation", "Write", "--operation", "Describe", "--topic", topic)
    assert added.returncode == 0, added.stderr
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`" \
        in added.stdout
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in added.stdout
    # stored as Kafka 2.8 stores it, with a change notification
    data, _ = cluster.zk.get("/kafka-acl/Topic/orders")
    stored = json.loads(data)
    assert stored["version"] == 1 and sorted(stored["acls"], key=lambda a: a["operation"]) == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Describe", "host": "*"},
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Write", "host": "*"}]
    notes = cluster.zk.get_children("/kafka-acl-changes")
    assert any(cluster.zk.get(f"/kafka-acl-changes/{n}")[0] == b"TOPIC:orders" for n in notes)
    wait_until(lambda: produce_code(cluster, "alice", topic) == 0, LIVE_WITHIN, "alice may write (no restart)")
    assert produce_code(cluster, "bob", topic) == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    listed = odradek("acls", "--authorizer-properties", zk_props, "--list", "--topic", topic)
    assert listed.returncode == 0 and "operation=DESCRIBE" in listed.stdout and "User:alice" in listed.stdout

    removed = odradek("acls", "--authorizer-properties", zk_props, "--remove", "--force", "--topic", topic)
    assert removed.returncode == 0, removed.stderr
    assert cluster.zk.exists("/kafka-acl/Topic/orders") is None
    wait_until(lambda: produce_code(cluster, "alice", topic) == ErrorCode.TOPIC_AUTHORIZATION_FAILED,
               LIVE_WITHIN, "alice's Write revoked (no restart)")


def test_cli_prefixed_deny_beats_allow(cluster):
    new_topic(cluster, "pay-in")
    new_topic(cluster, "pay-secret")
    zk_props = f"zookeeper.connect={cluster.zookeeper_connect}"
    assert odradek("acls", "--authorizer-properties", zk_props, "--add", "--allow-principal", "User:bob",
                   "--operation", "Write", "--topic", "pay-", "--resource-pattern-type", "prefixed").returncode == 0
    assert odradek("acls", "--authorizer-properties", zk_props, "--add", "--deny-principal", "User:bob",
                   "--operation", "All", "--topic", "pay-secret").returncode == 0
    assert cluster.zk.exists("/kafka-acl-extended/prefixed/Topic/pay-") is not None
    notes = cluster.zk.get_children("/kafka-acl-extended-changes")
    assert any(json.loads(cluster.zk.get(f"/kafka-acl-extended-changes/{n}")[0]) ==
               {"version": 1, "resourceType": "TOPIC", "name": "pay-", "patternType": "PREFIXED"} for n in notes)
    wait_until(lambda: produce_code(cluster, "bob", "pay-in") == 0, LIVE_WITHIN, "bob writes pay-in")
    assert produce_code(cluster, "bob", "pay-secret") == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_cli_refuses_bad_flags_with_one_line(cluster):
    zk_props = f"zookeeper.connect={cluster.zookeeper_connect}"
    for args, expected in [
        (["--add", "--allow-principal", "alice", "--topic", "t"], "principalType:principalName"),
        (["--add", "--allow-principal", "User:alice", "--operation", "Read", "--cluster"], "only supports"),
        (["--add", "--topic", "t"], "--allow-principal"),
        (["--add", "--list", "--topic", "t"], "exactly one action"),
        (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"], "not valid"),
    ]:
        r = odradek("acls", "--authorizer-properties", zk_props, *args)
        assert r.returncode == 1 and expected in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = odradek("acls", "--list")
    assert r.returncode == 1 and "--bootstrap-server" in r.stderr


# ---------------------------------------------------------------- the ACL APIs

def binding(rtype: ResourceType, name: str, principal: str, op: AclOperation,
            pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern),
                      AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW))


def consume_one(cluster, user: str, topic: str, group: str) -> list[bytes] | int:
    consumer = Consumer(group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                        request_timeout_ms=10000, **client_config(cluster, user))
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[bytes] = []
        deadline_polls = 50
        while not got and deadline_polls:
            deadline_polls -= 1
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
        consumer.commit()
        return got
    except KafkaError as exc:
        return int(exc.code)
    finally:
        consumer.close()


def test_acl_api_grants_consume_and_revokes_it(cluster):
    topic = new_topic(cluster, "events")
    assert produce_code(cluster, "admin", topic) == 0
    grants = [binding(ResourceType.TOPIC, topic, "User:bob", AclOperation.READ),
              binding(ResourceType.GROUP, "bob-", "User:bob", AclOperation.READ, PatternType.PREFIXED)]
    with admin(cluster) as a:
        assert a.create_acls(grants) == {g: None for g in grants}
        assert set(grants) <= set(a.describe_acls(AclBindingFilter(
            ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
            AccessControlEntryFilter(principal="User:bob"))))
    wait_until(lambda: consume_one(cluster, "bob", topic, "bob-app") == [b"value"], LIVE_WITHIN,
               "bob consumes through his group")
    assert consume_one(cluster, "bob", topic, "other-app") == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert consume_one(cluster, "alice", topic, "bob-app") in (ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                                                ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    with admin(cluster) as a:
        [(_, removed, error)] = a.delete_acls([AclBindingFilter(
            ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.LITERAL), AccessControlEntryFilter())])
        assert error is None and removed == [grants[0]]
    wait_until(lambda: consume_one(cluster, "bob", topic, "bob-app2") == ErrorCode.TOPIC_AUTHORIZATION_FAILED,
               LIVE_WITHIN, "bob's Read revoked")


def test_acl_apis_need_alter_and_describe_on_the_cluster(cluster):
    with admin(cluster, "alice") as a:
        with pytest.raises(KafkaError) as err:
            a.describe_acls(AclBindingFilter())
        assert err.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        with pytest.raises(KafkaError) as err:
            a.create_acls([binding(ResourceType.TOPIC, "x", "User:alice", AclOperation.ALL)])
        assert err.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with admin(cluster) as a:
        bad = binding(ResourceType.CLUSTER, "not-the-cluster", "User:alice", AclOperation.ALTER)
        result = a.create_acls([bad], raise_errors=False)
        assert result[bad].code == ErrorCode.INVALID_REQUEST


def test_cli_through_a_broker_with_command_config(cluster, tmp_path):
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      f'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                      f'username="admin" password="admin-secret";\n')
    r = odradek("acls", "--bootstrap-server", cluster.sasl_bootstrap, "--command-config", str(config), "--add",
                "--allow-principal", "User:alice", "--operation", "Read", "--group", "cli-group")
    assert r.returncode == 0, r.stderr
    assert cluster.zk.exists("/kafka-acl/Group/cli-group") is not None
    r = odradek("acls", "--bootstrap-server", cluster.sasl_bootstrap, "--command-config", str(config), "--list",
                "--group", "cli-group")
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in r.stdout
    alice = tmp_path / "alice.properties"
    alice.write_text(config.read_text().replace("admin", "alice"))
    r = odradek("acls", "--bootstrap-server", cluster.sasl_bootstrap, "--command-config", str(alice), "--list")
    assert r.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------- topic creation

def test_topic_creation_needs_create(cluster):
    with admin(cluster, "alice") as a:
        result = a.create_topics([NewTopic("alice-topic", 1, 1)], raise_errors=False)
        assert result["alice-topic"].code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    with admin(cluster) as a:
        a.create_acls([binding(ResourceType.TOPIC, "alice-", "User:alice", AclOperation.CREATE,
                               PatternType.PREFIXED)])

    def created() -> bool:
        with admin(cluster, "alice") as a:
            result = a.create_topics([NewTopic("alice-topic", 1, 1)], raise_errors=False)
            return result["alice-topic"] is None
    wait_until(created, LIVE_WITHIN, "alice creates alice-topic")
    with admin(cluster, "alice") as a:
        assert a.create_topics([NewTopic("bob-topic", 1, 1)], raise_errors=False)["bob-topic"].code == \
            ErrorCode.TOPIC_AUTHORIZATION_FAILED
    # auto-creation through Metadata needs Create too (alice has none on this name)
    raw = RawClient(f"127.0.0.1:{cluster.brokers[1].port}")   # PLAINTEXT: User:ANONYMOUS
    meta = raw.request(metadata, 8, {"topics": [{"name": "auto-" + uuid.uuid4().hex[:6]}],
                                     "allow_auto_topic_creation": True})
    assert meta.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    raw.close()


# ---------------------------------------------------------------- controller requests

def test_controller_requests_without_cluster_action_change_nothing(cluster):
    """Even with the right epochs (read from ZooKeeper), a principal without ClusterAction cannot
    send the controller's requests: CLUSTER_AUTHORIZATION_FAILED, the partition keeps its data."""
    topic = new_topic(cluster, "guarded", partitions=1, rf=2)
    assert produce_code(cluster, "admin", topic) == 0
    zk = cluster.zk
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    epoch = int(zk.get("/controller_epoch")[0])
    with admin(cluster) as a:
        leader = a.describe_topics([topic])[0]["partitions"][0]["leader"]
    broker_epoch = zk.exists(f"/brokers/ids/{leader}").czxid
    raw = RawClient(f"127.0.0.1:{cluster.brokers[leader].port}")   # PLAINTEXT: User:ANONYMOUS
    stop = raw.request(stop_replica, 3, {
        "controller_id": controller, "controller_epoch": epoch, "broker_epoch": broker_epoch, "topic_states": [
            {"topic_name": topic, "partition_states": [
                {"partition_index": 0, "leader_epoch": 1000, "delete_partition": True}]}]})
    assert stop.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    um = raw.request(update_metadata, 7, {
        "controller_id": controller, "controller_epoch": epoch, "broker_epoch": broker_epoch, "topic_states": [],
        "live_brokers": [{"id": leader, "endpoints": [{"port": 1, "host": "attacker.example",
                                                       "listener": "PLAINTEXT", "security_protocol": 0}],
                          "rack": None}]})
    assert um.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    b = BatchBuilder()
    b.append(0, b"k", b"v")
    forged = raw.request(produce, 8, {"acks": -1, "timeout_ms": 5000, "transactional_id": None, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": b.build()}]}]})
    assert forged.responses[0].partition_responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    raw.close()
    consumer = Consumer(auto_offset_reset="earliest", **client_config(cluster, "admin"))
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got: list = []
        wait_until(lambda: got.extend(r for rs in consumer.poll(timeout_ms=200).values() for r in rs) or got,
                   30, "the partition's record is still there")
        with admin(cluster) as a:
            meta = a.describe_cluster()
        assert {b["host"] for b in meta["brokers"]} == {"127.0.0.1"}
    finally:
        consumer.close()


def test_alter_isr_update_features_and_describe_producers_need_their_acls(cluster):
    """AlterIsr needs ClusterAction and UpdateFeatures Alter on the Cluster (refused top-level,
    nothing written), DescribeProducers Read on the topic."""
    from odradek.protocol.apis import alter_isr, describe_producers, update_features
    topic = new_topic(cluster, "guarded-isr", partitions=1, rf=2)
    zk = cluster.zk
    path = f"/brokers/topics/{topic}/partitions/0/state"
    data, stat = zk.get(path)
    state = json.loads(data)
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    raw = RawClient(f"127.0.0.1:{cluster.brokers[controller].port}")   # PLAINTEXT: User:ANONYMOUS
    try:
        resp = raw.request(alter_isr, 0, {
            "broker_id": state["leader"], "broker_epoch": zk.exists(f"/brokers/ids/{state['leader']}").czxid,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "leader_epoch": state["leader_epoch"],
                                                       "new_isr": [state["leader"]],
                                                       "current_isr_version": stat.version}]}]})
        assert (resp.error_code, list(resp.topics)) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
        uf = raw.request(update_features, 0, {"timeout_ms": 1000, "feature_updates": [
            {"feature": "f", "max_version_level": 1, "allow_downgrade": False}]})
        assert (uf.error_code, uf.error_message, list(uf.results)) == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", [])
        dp = raw.request(describe_producers, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
        assert dp.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    finally:
        raw.close()
    assert zk.get(path)[1].mzxid == stat.mzxid
