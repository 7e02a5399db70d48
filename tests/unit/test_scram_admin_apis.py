"""DescribeUserScramCredentials (50) / AlterUserScramCredentials (51): the checks that need no
ZooKeeper (Kafka's error codes per user), the non-controller answer, and what the client puts
on the wire (salt and salted password, never the password)."""
from types import SimpleNamespace

import pytest

from odradek.broker.apis import HANDLERS, advertised_api_versions
from odradek.broker.apis import alter_user_scram_credentials as alter
from odradek.broker.apis import describe_user_scram_credentials as describe
from odradek.client.scram_admin import UserScramCredentialDeletion, UserScramCredentialUpsertion, alter_body
from odradek.protocol.apis import alter_user_scram_credentials as alter_api
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.scram import salted_password

from broker_fixtures import Broker, call

SHA256, SHA512 = 1, 2


def up(name, mechanism=SHA256, iterations=8192):
    return SimpleNamespace(name=name, mechanism=mechanism, iterations=iterations, salt=b"s", salted_password=b"p")


def rm(name, mechanism=SHA256):
    return SimpleNamespace(name=name, mechanism=mechanism)


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


def test_both_apis_are_served_and_advertised_at_version_0():
    assert HANDLERS[50] is describe and HANDLERS[51] is alter
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in advertised_api_versions()}
    assert ranges[50] == (0, 0) and ranges[51] == (0, 0)


@pytest.mark.parametrize("upsertions, deletions, expected", [
    ([up("")], [], {"": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")}),
    ([], [rm("")], {"": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")}),
    ([up("a", mechanism=0)], [], {"a": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")}),
    ([], [rm("a", mechanism=7)], {"a": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")}),
    ([up("a", iterations=4095)], [], {"a": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")}),
    ([up("a", iterations=16385)], [], {"a": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")}),
    ([up("a"), up("a")], [], {"a": (ErrorCode.DUPLICATE_RESOURCE,
                                    "A user credential cannot be altered twice in the same request")}),
    ([up("a")], [rm("a")], {"a": (ErrorCode.DUPLICATE_RESOURCE,
                                  "A user credential cannot be altered twice in the same request")}),
])
def test_alter_refuses_users_as_kafka_does(upsertions, deletions, expected):
    refused, valid = alter.validate(upsertions, deletions)
    assert refused == expected
    assert valid == set()


def test_one_bad_entry_spares_the_other_users():
    refused, valid = alter.validate([up("a"), up("b", iterations=1), up("c", SHA512)], [rm("a", SHA512)])
    assert set(refused) == {"b"} and valid == {"a", "c"}
    # two mechanisms of one user are not a duplicate
    assert alter.validate([up("a", SHA256), up("a", SHA512)], []) == ({}, {"a"})


def test_alter_on_a_broker_that_is_not_the_controller_is_not_controller_for_every_user(broker):
    resp = call(broker, alter, 0, {"deletions": [{"name": "zed", "mechanism": SHA256}],
                                   "upsertions": [{"name": "alice", "mechanism": SHA256, "iterations": 8192,
                                                   "salt": b"s", "salted_password": b"p"}]})
    assert [(r.user, r.error_code) for r in resp.results] == [("alice", ErrorCode.NOT_CONTROLLER),
                                                               ("zed", ErrorCode.NOT_CONTROLLER)]


def test_describe_without_zookeeper_is_an_error_not_a_crash(broker):
    resp = call(broker, describe, 0, {"users": [{"name": "alice"}]})
    assert resp.error_code == ErrorCode.UNKNOWN_SERVER_ERROR and list(resp.results) == []


def test_the_client_sends_salt_and_salted_password_only():
    body = alter_body([UserScramCredentialUpsertion("alice", "SCRAM-SHA-512", "alice-secret", 8192),
                       UserScramCredentialDeletion("bob", "SCRAM-SHA-256")])
    assert body["deletions"] == [{"name": "bob", "mechanism": SHA256}]
    (u,) = body["upsertions"]
    assert (u["name"], u["mechanism"], u["iterations"]) == ("alice", SHA512, 8192)
    assert len(u["salt"]) == 32
    assert u["salted_password"] == salted_password("SCRAM-SHA-512", "alice-secret", u["salt"], 8192)
    wire = alter_api.Request.encode(body, 0)
    assert b"alice-secret" not in wire
    assert "alice-secret" not in repr(UserScramCredentialUpsertion("alice", "SCRAM-SHA-512", "alice-secret"))


def test_two_upsertions_get_different_salts():
    body = alter_body([UserScramCredentialUpsertion("a", "SCRAM-SHA-256", "pw"),
                       UserScramCredentialUpsertion("b", "SCRAM-SHA-256", "pw")])
    assert body["upsertions"][0]["salt"] != body["upsertions"][1]["salt"]


def test_an_unknown_mechanism_name_fails_in_the_client():
    with pytest.raises(KafkaError) as info:
        alter_body([UserScramCredentialDeletion("a", "SCRAM-SHA-1")])
    assert info.value.code == ErrorCode.UNSUPPORTED_SASL_MECHANISM


def test_describe_needs_describe_on_the_cluster_when_an_authorizer_is_on(broker):
    from odradek.broker.security.authorizer import AclAuthorizer
    broker.ctx.authorizer = AclAuthorizer()
    resp = call(broker, describe, 0, {"users": None})
    assert resp.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    broker.ctx.authorizer = AclAuthorizer(super_users=["User:ANONYMOUS"])
    assert call(broker, describe, 0, {"users": None}).error_code != ErrorCode.CLUSTER_AUTHORIZATION_FAILED
