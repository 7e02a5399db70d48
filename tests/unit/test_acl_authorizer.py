"""AclAuthorizer decisions as Kafka 2.8's AclAuthorizer makes them, on the in-memory cache."""
from __future__ import annotations

import pytest

from odradek.broker.config.kafka_config import ConfigError, KafkaConfig
from odradek.broker.security.authorizer import AclAuthorizer, parse_super_users
from odradek.protocol.acl import (
    AccessControlEntry as Ace,
    AclBinding,
    AclBindingFilter,
    AclOperation as Op,
    AclPermissionType as Perm,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType as RT,
)

ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def topic(name: str, pattern: PatternType = PatternType.LITERAL) -> ResourcePattern:
    return ResourcePattern(RT.TOPIC, name, pattern)


def authz(acls: dict[ResourcePattern, list[Ace]], **kw) -> AclAuthorizer:
    a = AclAuthorizer(**kw)
    a.replace_all({p: frozenset(es) for p, es in acls.items()})
    return a


def allow(principal: str, op: Op, host: str = "*") -> Ace:
    return Ace(principal, host, op, Perm.ALLOW)


def deny(principal: str, op: Op, host: str = "*") -> Ace:
    return Ace(principal, host, op, Perm.DENY)


def test_no_acl_denies_unless_allow_everyone_if_no_acl_found():
    assert not authz({}).authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert authz({}, allow_everyone_if_no_acl_found=True).authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    # an ACL on the resource (even for someone else) turns the default off
    a = authz({topic("t"): [allow(BOB, Op.READ)]}, allow_everyone_if_no_acl_found=True)
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "other")


def test_allow_matches_principal_operation_and_host():
    a = authz({topic("t"): [allow(ALICE, Op.READ, HOST)]})
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.2", Op.READ, RT.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "t")
    assert not a.authorize(BOB, HOST, Op.READ, RT.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.GROUP, "t")


def test_deny_beats_allow_and_all():
    a = authz({topic("t"): [allow(ALICE, Op.ALL), deny(ALICE, Op.WRITE)]})
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "t")
    # a DENY on a wider pattern still wins
    b = authz({topic("t"): [allow(ALICE, Op.READ)], topic("*"): [deny("User:*", Op.READ, HOST)]})
    assert not b.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert b.authorize(ALICE, "10.9.9.9", Op.READ, RT.TOPIC, "t")


def test_deny_all_denies_everything():
    a = authz({topic("t"): [allow(ALICE, Op.READ), deny(ALICE, Op.ALL)]})
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "t")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.ALL])
def test_describe_is_implied(granted):
    assert authz({topic("t"): [allow(ALICE, granted)]}).authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "t")


@pytest.mark.parametrize("granted", [Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS])
def test_describe_is_not_implied_by_others(granted):
    assert not authz({topic("t"): [allow(ALICE, granted)]}).authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "t")


def test_describe_configs_implied_by_alter_configs_only():
    a = authz({topic("t"): [allow(ALICE, Op.ALTER_CONFIGS)]})
    assert a.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, RT.TOPIC, "t")
    assert not authz({topic("t"): [allow(ALICE, Op.WRITE)]}).authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, RT.TOPIC, "t")
    # implication is for ALLOW only: a DENY of Read does not deny Describe
    b = authz({topic("t"): [allow(ALICE, Op.DESCRIBE), deny(ALICE, Op.READ)]})
    assert b.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "t")


def test_wildcard_resource_and_principal():
    a = authz({topic("*"): [allow("User:*", Op.READ)]})
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "anything")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.GROUP, "anything")


def test_prefixed_patterns():
    a = authz({topic("pay", PatternType.PREFIXED): [allow(ALICE, Op.WRITE)],
               topic("payments-secret"): [deny(ALICE, Op.WRITE)]})
    assert a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "payments")
    assert a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "pay")
    assert not a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "pa")
    assert not a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "payments-secret")
    # a literal "pay*" is not a prefix: only the name "pay*" itself
    b = authz({topic("pay*"): [allow(ALICE, Op.WRITE)]})
    assert not b.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "payments")


def test_super_users_bypass_acls():
    assert parse_super_users(" User:admin ; User:ops;") == frozenset({"User:admin", "User:ops"})
    a = authz({topic("t"): [deny("User:*", Op.ALL)]}, super_users=parse_super_users("User:admin;User:ops"))
    assert a.authorize("User:admin", HOST, Op.WRITE, RT.TOPIC, "t")
    assert a.authorize("User:ops", HOST, Op.CLUSTER_ACTION, RT.CLUSTER, "kafka-cluster")
    assert not a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "t")


def test_apply_replaces_and_removes_a_pattern():
    a = authz({topic("t"): [allow(ALICE, Op.READ)]})
    a.apply({topic("t"): frozenset({allow(BOB, Op.READ)})})
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert a.authorize(BOB, HOST, Op.READ, RT.TOPIC, "t")
    a.apply({topic("t"): frozenset()})
    assert a.patterns() == []
    assert not a.authorize(BOB, HOST, Op.READ, RT.TOPIC, "t")


def test_describe_filters_the_cache():
    p = topic("pay", PatternType.PREFIXED)
    a = authz({topic("t"): [allow(ALICE, Op.READ), allow(BOB, Op.WRITE)], p: [allow(ALICE, Op.WRITE)]})
    everything = a.acls(AclBindingFilter())
    assert len(everything) == 3
    match = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "payments", PatternType.MATCH))
    assert a.acls(match) == [AclBinding(p, allow(ALICE, Op.WRITE))]
    literal_only = AclBindingFilter(ResourcePatternFilter(RT.ANY, None, PatternType.LITERAL))
    assert {b.pattern for b in a.acls(literal_only)} == {topic("t")}


def test_authorize_any_by_resource_type():
    a = authz({topic("a"): [allow(ALICE, Op.WRITE)]})
    assert a.authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert not a.authorize_any(BOB, HOST, Op.WRITE, RT.TOPIC)
    denied = authz({topic("a"): [allow(ALICE, Op.WRITE)], topic("*"): [deny(ALICE, Op.WRITE)]})
    assert not denied.authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)
    prefixed = authz({topic("ab"): [allow(ALICE, Op.WRITE)],
                      topic("a", PatternType.PREFIXED): [deny(ALICE, Op.WRITE)]})
    assert not prefixed.authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)


def test_authorizer_class_names_kafka_knows_are_accepted_and_others_refused():
    base = {"zookeeper.connect": "127.0.0.1:1"}
    for name in ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer", ""):
        assert KafkaConfig({**base, "authorizer.class.name": name})["authorizer.class.name"] == name
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        KafkaConfig({**base, "authorizer.class.name": "com.example.MyAuthorizer"})
