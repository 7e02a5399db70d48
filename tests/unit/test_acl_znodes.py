"""ACL znodes and filters: Kafka 2.8's paths, JSON and change notifications, and its filter rules."""
from __future__ import annotations

import json

import pytest

from odradek.protocol.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from odradek.zk import znodes as zn

LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


@pytest.mark.parametrize("pattern, path", [
    (ResourcePattern(ResourceType.TOPIC, "orders", LIT), "/kafka-acl/Topic/orders"),
    (ResourcePattern(ResourceType.GROUP, "g1", LIT), "/kafka-acl/Group/g1"),
    (ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", LIT), "/kafka-acl/Cluster/kafka-cluster"),
    (ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", LIT), "/kafka-acl/TransactionalId/tx"),
    (ResourcePattern(ResourceType.DELEGATION_TOKEN, "d", LIT), "/kafka-acl/DelegationToken/d"),
    (ResourcePattern(ResourceType.TOPIC, "pay", PRE), "/kafka-acl-extended/prefixed/Topic/pay"),
    (ResourcePattern(ResourceType.GROUP, "app-", PRE), "/kafka-acl-extended/prefixed/Group/app-"),
])
def test_resource_paths(pattern, path):
    assert zn.ResourceZNode.path(pattern) == path


def test_resource_json_is_kafkas():
    entries = {AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
               AccessControlEntry("User:bob", "10.0.0.1", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.DENY),
               AccessControlEntry("User:ops", "*", AclOperation.IDEMPOTENT_WRITE, AclPermissionType.ALLOW)}
    data = zn.ResourceZNode.encode(entries)
    obj = json.loads(data)
    assert obj["version"] == 1
    assert {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"} in obj["acls"]
    assert {"principal": "User:bob", "permissionType": "Deny", "operation": "DescribeConfigs",
            "host": "10.0.0.1"} in obj["acls"]
    assert {"principal": "User:ops", "permissionType": "Allow", "operation": "IdempotentWrite",
            "host": "*"} in obj["acls"]
    assert zn.ResourceZNode.decode(data) == frozenset(entries)


def test_decodes_what_kafka_wrote():
    written = (b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
               b'"operation":"ClusterAction","host":"*"},{"principal":"User:*","permissionType":"Deny",'
               b'"operation":"All","host":"1.2.3.4"}]}')
    assert zn.ResourceZNode.decode(written) == {
        AccessControlEntry("User:alice", "*", AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW),
        AccessControlEntry("User:*", "1.2.3.4", AclOperation.ALL, AclPermissionType.DENY)}
    assert zn.ResourceZNode.decode(b"") == frozenset()
    with pytest.raises(ValueError):
        zn.ResourceZNode.decode(b'{"version":2,"acls":[]}')


def test_change_notifications():
    literal = ResourcePattern(ResourceType.TOPIC, "a:b", LIT)
    change = zn.acl_change_znode(LIT)
    assert change.path == "/kafka-acl-changes" and change.prefix == "acl_changes_"
    assert change.encode(literal) == b"TOPIC:a:b"
    assert change.decode(b"TOPIC:a:b") == literal
    assert change.decode(b"Topic:a:b") == literal       # Kafka reads any case
    prefixed = ResourcePattern(ResourceType.GROUP, "app-", PRE)
    extended = zn.acl_change_znode(PRE)
    assert extended.path == "/kafka-acl-extended-changes"
    assert json.loads(extended.encode(prefixed)) == {"version": 1, "resourceType": "GROUP", "name": "app-",
                                                    "patternType": "PREFIXED"}
    assert extended.decode(extended.encode(prefixed)) == prefixed


def test_pattern_filters_match_as_kafkas():
    lit = ResourcePattern(ResourceType.TOPIC, "payments", LIT)
    wild = ResourcePattern(ResourceType.TOPIC, "*", LIT)
    pre = ResourcePattern(ResourceType.TOPIC, "pay", PRE)

    def f(name, pt):
        return ResourcePatternFilter(ResourceType.TOPIC, name, pt)
    assert [f("payments", PatternType.MATCH).matches(p) for p in (lit, wild, pre)] == [True, True, True]
    assert [f("payments", PatternType.ANY).matches(p) for p in (lit, wild, pre)] == [True, False, False]
    assert [f("pay", PatternType.ANY).matches(p) for p in (lit, wild, pre)] == [False, False, True]
    assert [f("payments", LIT).matches(p) for p in (lit, wild, pre)] == [True, False, False]
    assert [f(None, PRE).matches(p) for p in (lit, wild, pre)] == [False, False, True]
    assert not ResourcePatternFilter(ResourceType.GROUP).matches(lit)
    assert ResourcePatternFilter().matches(pre)


def test_entry_filters_and_strings():
    e = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    assert AccessControlEntryFilter().matches(e)
    assert AccessControlEntryFilter("User:alice", operation=AclOperation.READ).matches(e)
    assert not AccessControlEntryFilter(permission_type=AclPermissionType.DENY).matches(e)
    assert not AccessControlEntryFilter(host="1.2.3.4").matches(e)
    b = AclBinding(ResourcePattern(ResourceType.TOPIC, "t"), e)
    assert AclBindingFilter().matches(b)
    assert str(b.pattern) == "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
    assert str(e) == "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"


@pytest.mark.parametrize("binding, reason", [
    (AclBinding(ResourcePattern(ResourceType.CLUSTER, "c"),
                AccessControlEntry("User:a", "*", AclOperation.ALTER, AclPermissionType.ALLOW)), "kafka-cluster"),
    (AclBinding(ResourcePattern(ResourceType.TOPIC, ""),
                AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ALLOW)), "empty resource"),
    (AclBinding(ResourcePattern(ResourceType.TOPIC, "t", PatternType.MATCH),
                AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ALLOW)), "pattern type"),
    (AclBinding(ResourcePattern(ResourceType.TOPIC, "t"),
                AccessControlEntry("alice", "*", AclOperation.READ, AclPermissionType.ALLOW)), "principal"),
    (AclBinding(ResourcePattern(ResourceType.TOPIC, "t"),
                AccessControlEntry("User:a", "*", AclOperation.ANY, AclPermissionType.ALLOW)), "operation"),
])
def test_invalid_bindings_are_refused(binding, reason):
    assert reason in (binding.invalid_reason() or "")


def test_names_parse_leniently():
    assert AclOperation.parse("DescribeConfigs") is AclOperation.DESCRIBE_CONFIGS
    assert AclOperation.parse("describe_configs") is AclOperation.DESCRIBE_CONFIGS
    assert AclOperation.parse("IDEMPOTENT_WRITE").zk_name == "IdempotentWrite"
    assert ResourceType.parse("transactional-id") is ResourceType.TRANSACTIONAL_ID
    assert ResourceType.from_code(99) is ResourceType.UNKNOWN
    with pytest.raises(ValueError):
        AclOperation.parse("fly")
