"""ZooKeeper SASL logins and Kafka's secure znode ACLs, against a real SASL ZooKeeper and broker.

One ZooKeeper node authenticates clients with SASL (DIGEST-MD5, users from a JAAS ``Server``
section); the broker runs with ``zookeeper.set.acl=true`` and KAFKA_OPTS naming the JAAS file
whose ``Client`` section is its login, as Kafka's scripts pass it.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, Id, Permissions

from odradek.client import Consumer, Producer, TopicPartition
from odradek.testing import wait_until
from odradek.zk.cluster import LocalCluster
from odradek.zk.ensemble import log_tail

ODRADEK = [os.path.join(os.path.dirname(sys.executable), "odradek")]
DIGEST = "org.apache.zookeeper.server.auth.DigestLoginModule"
JAAS = f"""
Server {{
    {DIGEST} required user_kafka="kafka-secret";
}};
Client {{
    {DIGEST} required username="kafka" password="kafka-secret";
}};
"""
KAFKA_ALL = ACL(Permissions.ALL, Id("sasl", "kafka"))
WORLD_READ = ACL(Permissions.READ, Id("world", "anyone"))


def kafka_opts(path) -> dict[str, str]:
    return {"KAFKA_OPTS": f"-Djava.security.auth.login.config={path}"}


@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("zk-security")
    jaas = base / "jaas.conf"
    jaas.write_text(JAAS)
    cluster = LocalCluster(base / "cluster", zookeepers=1, brokers=1, env=kafka_opts(jaas),
                           overrides={"zookeeper.set.acl": "true"})
    try:
        cluster.start()
        yield cluster, jaas
    except BaseException:
        for broker in cluster.brokers.values():
            print(f"\n--- tail of {broker.log_path}:\n{log_tail(broker.log_path, 50)}")
        raise
    finally:
        cluster.stop()


@pytest.fixture
def anonymous(secure_cluster):
    cluster, _ = secure_cluster
    zk = KazooClient(hosts=cluster.zookeeper_connect, timeout=10)
    zk.start(timeout=30)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def odradek(args: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*ODRADEK, *args], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout)


def test_cli_and_broker_create_znodes_anyone_may_read_and_only_the_cluster_may_change(secure_cluster, anonymous):
    cluster, jaas = secure_cluster
    topic = "secured"
    created = odradek(["topics", "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1",
                       "--zookeeper", cluster.zookeeper_connect], kafka_opts(jaas))
    assert created.returncode == 0, created.stderr
    assert f"Created topic {topic}." in created.stdout

    # the broker serves the topic: records go in and come back out
    producer = Producer(bootstrap_servers=cluster.bootstrap_servers, acks=1, request_timeout_ms=10000)
    consumer = Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                        fetch_max_wait_ms=100)
    try:
        producer.send(topic, b"hello", partition=0).get(30)
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        got: list[bytes] = []
        wait_until(lambda: got.extend(r.value for r in consumer.poll(500).get(tp, [])) or b"hello" in got,
                   timeout=30, what="the record consumed back")
    finally:
        producer.close(10)
        consumer.close()

    # what the CLI, the controller and the broker created: sasl:kafka ALL, world READ
    for path in (f"/brokers/topics/{topic}", f"/config/topics/{topic}", f"/brokers/topics/{topic}/partitions",
                 f"/brokers/topics/{topic}/partitions/0/state", "/brokers/ids/1", "/controller", "/brokers/ids"):
        assert anonymous.get_acls(path)[0] == [KAFKA_ALL, WORLD_READ], path

    # anyone may read ...
    data, _ = anonymous.get(f"/brokers/topics/{topic}")
    assert b'"partitions"' in data
    # ... nobody else may change or delete
    with pytest.raises(NoAuthError):
        anonymous.delete(f"/brokers/topics/{topic}", recursive=True)
    with pytest.raises(NoAuthError):
        anonymous.delete(f"/brokers/topics/{topic}/partitions/0/state")
    with pytest.raises(NoAuthError):
        anonymous.set(f"/brokers/topics/{topic}", b'{"version":1,"partitions":{"0":[99]}}')
    with pytest.raises(NoAuthError):
        anonymous.create(f"/admin/delete_topics/{topic}", b"", makepath=True)
    with pytest.raises(NoAuthError):
        anonymous.set("/controller", b'{"version":1,"brokerid":99,"timestamp":"0"}')
    assert anonymous.get(f"/brokers/topics/{topic}")[0] == data
    listed = odradek(["topics", "--list", "--zookeeper", cluster.zookeeper_connect], kafka_opts(jaas))
    assert listed.returncode == 0 and topic in listed.stdout.split()


def test_sensitive_znodes_are_not_world_readable(secure_cluster, anonymous):
    cluster, jaas = secure_cluster
    from odradek.zk.admin import open_zk
    altered = odradek(["configs", "--zookeeper", cluster.zookeeper_connect, "--alter", "--add-config",
                       "SCRAM-SHA-256=[iterations=8192,password=alice-secret]", "--entity-type", "users",
                       "--entity-name", "alice"], kafka_opts(jaas))
    assert altered.returncode == 0, altered.stderr
    kafka = open_zk(cluster.zookeeper_connect, timeout=30, environ=kafka_opts(jaas))
    try:
        assert kafka.get_acls("/config/users")[0] == [KAFKA_ALL]
        assert kafka.get_acls("/config/users/alice")[0] == [KAFKA_ALL]
        assert kafka.get_acls("/config/brokers")[0] == [KAFKA_ALL]
        assert b"SCRAM-SHA-256" in kafka.get("/config/users/alice")[0]   # the cluster still reads it
    finally:
        kafka.stop()
        kafka.close()
    for read in (lambda: anonymous.get("/config/users"), lambda: anonymous.get_children("/config/users"),
                 lambda: anonymous.get("/config/users/alice"), lambda: anonymous.get_children("/config/brokers")):
        with pytest.raises(NoAuthError):
            read()


def test_a_wrong_password_or_a_missing_jaas_file_is_one_line(secure_cluster, tmp_path):
    cluster, _ = secure_cluster
    wrong = tmp_path / "wrong.conf"
    wrong.write_text(f'Client {{ {DIGEST} required username="kafka" password="guess"; }};')
    listed = odradek(["topics", "--list", "--zookeeper", cluster.zookeeper_connect], kafka_opts(wrong))
    assert listed.returncode == 1
    assert "refused the SASL (DIGEST-MD5) login of user 'kafka'" in listed.stderr
    assert "Traceback" not in listed.stderr and len(listed.stderr.strip().splitlines()) == 1

    missing = tmp_path / "missing.conf"
    listed = odradek(["topics", "--list", "--zookeeper", cluster.zookeeper_connect], kafka_opts(missing))
    assert listed.returncode == 1
    assert f"JAAS file {missing} does not exist" in listed.stderr and "Traceback" not in listed.stderr


@pytest.mark.parametrize("env_kind, message", [
    ("none", "zookeeper.set.acl is true, but ZooKeeper SASL is not configured"),
    ("missing", "does not exist"),
])
def test_a_broker_refuses_to_start_without_a_usable_zookeeper_login(secure_cluster, tmp_path, free_port,
                                                                     env_kind, message):
    cluster, _ = secure_cluster
    props = tmp_path / "server.properties"
    props.write_text(f"broker.id=7\nlisteners=PLAINTEXT://127.0.0.1:{free_port()}\nlog.dirs={tmp_path / 'logs'}\n"
                     f"zookeeper.connect={cluster.zookeeper_connect}\nzookeeper.set.acl=true\n")
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_OPTS"}
    if env_kind == "missing":
        env.update(kafka_opts(tmp_path / "missing.conf"))
    started = subprocess.run([*ODRADEK, "broker", "start", str(props)], env=env, capture_output=True, text=True,
                             timeout=60)
    assert started.returncode == 1
    assert message in started.stderr
    assert "Traceback" not in started.stderr
    assert anonymous_broker_ids(cluster) == ["1"]


def anonymous_broker_ids(cluster) -> list[str]:
    zk = KazooClient(hosts=cluster.zookeeper_connect, timeout=10)
    zk.start(timeout=30)
    try:
        return sorted(zk.get_children("/brokers/ids"))
    finally:
        zk.stop()
        zk.close()


def test_zookeeper_start_takes_its_sasl_users_from_kafka_opts(tmp_path, free_port):
    from odradek.zk.admin import AdminOperationError, open_zk
    from odradek.zk.ensemble import server_mode, stop_process
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    port = free_port()
    data = tmp_path / "zk"
    proc = subprocess.Popen([*ODRADEK, "zookeeper", "start", "--data-dir", str(data), "--client-port", str(port)],
                            env={**os.environ, **kafka_opts(jaas)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: server_mode("127.0.0.1", port) == "standalone", timeout=60, what="a standalone node")
        assert ("authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
                in (data / "zoo.cfg").read_text())
        kafka = open_zk(f"127.0.0.1:{port}", timeout=30, environ=kafka_opts(jaas))
        try:
            kafka.create("/brokers/topics/t", b"{}", makepath=True)
            assert kafka.get_acls("/brokers/topics/t")[0] == [KAFKA_ALL, WORLD_READ]
        finally:
            kafka.stop()
            kafka.close()
        wrong = tmp_path / "wrong.conf"
        wrong.write_text(f'Client {{ {DIGEST} required username="kafka" password="guess"; }};')
        with pytest.raises(AdminOperationError, match="refused the SASL"):
            open_zk(f"127.0.0.1:{port}", timeout=30, environ=kafka_opts(wrong))
    finally:
        stop_process(proc, 15)

    r = subprocess.run([*ODRADEK, "zookeeper", "start", "--data-dir", str(data), "--client-port", str(port)],
                       env={**os.environ, **kafka_opts(tmp_path / "missing.conf")}, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0
    assert f"JAAS file {tmp_path / 'missing.conf'} does not exist" in r.stderr
