"""ZooKeeper client security: Kafka's default ACL per path, and the SASL login read from KAFKA_OPTS."""
import pytest
from kazoo.security import ACL, Id, Permissions

from odradek.zk.security import (ZkSecurityError, default_acls, is_sensitive_path, new_kazoo,
                                 zk_client_security)

CREATOR_ALL = ACL(Permissions.ALL, Id("auth", ""))
WORLD_READ = ACL(Permissions.READ, Id("world", "anyone"))
WORLD_ALL = ACL(Permissions.ALL, Id("world", "anyone"))
DIGEST = "org.apache.zookeeper.server.auth.DigestLoginModule"


@pytest.mark.parametrize("path", ["/brokers/topics/t", "/brokers/ids/1", "/controller", "/config",
                                  "/config/topics/t", "/config/changes/config_change_0000000001",
                                  "/admin/delete_topics/t", "/kafka-acl/Topic/t", "/cluster/id"])
def test_secure_acls_give_the_creator_all_and_the_world_read(path):
    assert not is_sensitive_path(path)
    assert default_acls(True, path) == [CREATOR_ALL, WORLD_READ]


@pytest.mark.parametrize("path", ["/config/users", "/config/users/alice", "/config/brokers",
                                  "/config/brokers/<default>", "/delegation_token/tokens/t1"])
def test_sensitive_paths_get_no_world_access_at_all(path):
    assert is_sensitive_path(path)
    assert default_acls(True, path) == [CREATOR_ALL]


def test_without_secure_acls_every_znode_is_open_as_in_kafka():
    assert default_acls(False, "/config/users/alice") == [WORLD_ALL]
    assert default_acls(False, "/brokers/topics/t") == [WORLD_ALL]


def _env(tmp_path, text, extra=""):
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(text)
    return {"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas} {extra}"}, jaas


def test_the_client_section_is_the_digest_md5_login(tmp_path):
    env, jaas = _env(tmp_path, f'Client {{ {DIGEST} required username="kafka" password="kafka-secret"; }};')
    sec = zk_client_security(env)
    assert sec.sasl_enabled and sec.login_config == str(jaas)
    assert sec.sasl_options() == {"mechanism": "DIGEST-MD5", "username": "kafka", "password": "kafka-secret"}
    assert sec.sasl_options() is not sec.sasl_options()   # kazoo adds "service" to the dict it gets


def test_no_login_file_or_no_client_section_means_an_anonymous_session(tmp_path):
    assert not zk_client_security({}).sasl_enabled
    assert zk_client_security({}).sasl_options() is None
    env, _ = _env(tmp_path, 'KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required; };')
    assert not zk_client_security(env).sasl_enabled


def test_the_section_name_comes_from_zookeeper_sasl_clientconfig(tmp_path):
    text = f'ZkClient {{ {DIGEST} required username="zk-user" password="p"; }};'
    env, _ = _env(tmp_path, text, "-Dzookeeper.sasl.clientconfig=ZkClient")
    assert zk_client_security(env).username == "zk-user"
    env, _ = _env(tmp_path, text)   # default section "Client" is absent
    assert not zk_client_security(env).sasl_enabled


def test_a_named_login_file_that_is_missing_or_unparsable_is_one_line_naming_it(tmp_path):
    missing = tmp_path / "missing.conf"
    with pytest.raises(ZkSecurityError, match=f"JAAS file {missing} does not exist"):
        zk_client_security({"KAFKA_OPTS": f"-Djava.security.auth.login.config={missing}"})
    env, jaas = _env(tmp_path, f'Client {{ {DIGEST} required username="kafka" }};')
    with pytest.raises(ZkSecurityError, match=f"JAAS file {jaas}: line 1: expected"):
        zk_client_security(env)


@pytest.mark.parametrize("text, extra, message", [
    (f'Client {{ {DIGEST} required username="k" password="p"; }};', "-Dzookeeper.sasl.client=false",
     "zookeeper.sasl.client is set to false, which disables SASL"),
    ('Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };', "",
     "Krb5LoginModule is not supported"),
    (f'Client {{ {DIGEST} required username="k"; }};', "", "needs option(s) password"),
    ("Client { };", "", "section Client has no login module"),
])
def test_a_client_section_that_cannot_be_used_is_refused(tmp_path, text, extra, message):
    env, _ = _env(tmp_path, text, extra)
    with pytest.raises(ZkSecurityError) as err:
        zk_client_security(env)
    assert message in str(err.value)


def test_set_acl_without_a_zookeeper_login_is_refused_as_kafka_refuses_it():
    with pytest.raises(ZkSecurityError, match="zookeeper.set.acl is true, but ZooKeeper SASL is not configured"):
        new_kazoo("127.0.0.1:2181", 5.0, zk_client_security({}), secure_acls=True)


def test_transaction_creates_get_the_acl_of_their_own_path(tmp_path):
    env, _ = _env(tmp_path, f'Client {{ {DIGEST} required username="k" password="p"; }};')
    kz = new_kazoo("127.0.0.1:2181", 5.0, zk_client_security(env), secure_acls=True)
    txn = kz.transaction()
    txn.create("/controller", b"1", ephemeral=True)
    txn.create("/config/users/alice", b"{}")
    explicit = [ACL(Permissions.READ, Id("world", "anyone"))]
    txn.create("/x", b"", acl=explicit)
    assert [op.acl for op in txn.operations] == [[CREATOR_ALL, WORLD_READ], [CREATOR_ALL], explicit]
    open_kz = new_kazoo("127.0.0.1:2181", 5.0, zk_client_security({}), secure_acls=False)
    txn = open_kz.transaction()
    txn.create("/y", b"")
    assert txn.operations[0].acl == [WORLD_ALL]
