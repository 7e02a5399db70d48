"""The handlers' authorization checks with an AclAuthorizer on the BrokerContext, through the codec."""
from __future__ import annotations

import pytest

from odradek.broker.apis import (create_acls, create_topics, delete_acls, describe_acls, describe_cluster,
                                 describe_configs, fetch, find_coordinator, offset_delete,
                                 init_producer_id, join_group, leader_and_isr, metadata, produce, stop_replica,
                                 update_metadata)
from odradek.broker.security.authorizer import AclAuthorizer
from odradek.protocol.acl import (CLUSTER_NAME, AccessControlEntry, AclOperation as Op, AclPermissionType,
                                  PatternType, ResourcePattern, ResourceType as RT)
from odradek.protocol.errors import ErrorCode

from broker_fixtures import Broker, batch, call, fetch_body, produce_body
from test_broker_control_apis import lai_body, um_body

ANON = "User:ANONYMOUS"   # the principal of broker_fixtures.call's requests


def allow(op: Op, rtype: RT, name: str, principal: str = ANON) -> dict:
    return {ResourcePattern(rtype, name, PatternType.LITERAL):
            frozenset({AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW)})}


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    b.lead("ok", 1)
    b.set_metadata({"ok": {0: (1, [1], [1])}, "secret": {0: (1, [1], [1])}})
    b.ctx.authorizer = AclAuthorizer()
    yield b
    b.close()


def test_produce_needs_write_on_the_topic(broker):
    broker.ctx.authorizer.apply(allow(Op.WRITE, RT.TOPIC, "ok"))
    ok = call(broker, produce, 8, produce_body("ok", batch()))
    assert ok.responses[0].partition_responses[0].error_code == 0
    denied = call(broker, produce, 8, produce_body("secret", batch()))
    assert denied.responses[0].partition_responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_idempotent_produce_needs_idempotent_write_on_the_cluster(broker):
    broker.ctx.authorizer.apply(allow(Op.WRITE, RT.TOPIC, "ok"))
    body = produce_body("ok", batch(producer_id=5, producer_epoch=0, base_sequence=0))
    resp = call(broker, produce, 8, body)
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    broker.ctx.authorizer.apply(allow(Op.IDEMPOTENT_WRITE, RT.CLUSTER, CLUSTER_NAME))
    resp = call(broker, produce, 8, body)
    assert resp.responses[0].partition_responses[0].error_code != ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_fetch_needs_read(broker):
    assert call(broker, fetch, 11, fetch_body("ok")).responses[0].partition_responses[0].error_code == \
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    broker.ctx.authorizer.apply(allow(Op.READ, RT.TOPIC, "ok"))
    assert call(broker, fetch, 11, fetch_body("ok")).responses[0].partition_responses[0].error_code == 0
    follower = call(broker, fetch, 11, fetch_body("ok", replica_id=2))
    assert follower.responses[0].partition_responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_metadata_hides_and_refuses_topics(broker):
    broker.ctx.authorizer.apply(allow(Op.READ, RT.TOPIC, "ok"))      # Read implies Describe
    all_topics = call(broker, metadata, 8, {"topics": None})
    assert [t.name for t in all_topics.topics] == ["ok"]
    named = call(broker, metadata, 8, {"topics": [{"name": "secret"}, {"name": "missing"}],
                                       "allow_auto_topic_creation": True})
    codes = {t.name: t.error_code for t in named.topics}
    assert codes == {"secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "missing": ErrorCode.TOPIC_AUTHORIZATION_FAILED}


def test_create_topics_needs_create(broker):
    resp = call(broker, create_topics, 4, {"topics": [{"name": "new", "num_partitions": 1, "replication_factor": 1,
                                                       "assignments": [], "configs": []}], "timeout_ms": 0})
    assert resp.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_controller_requests_need_cluster_action_and_change_nothing(broker):
    lai = call(broker, leader_and_isr, 5, lai_body(topic="x"))
    assert lai.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert broker.rm.get_partition(("x", 0)) is None
    um = call(broker, update_metadata, 7, um_body(topics={"x": {0: (1, [1], [1])}}))
    assert um.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert not broker.cache.contains_topic("x")
    sr = call(broker, stop_replica, 3, {"controller_id": 1, "controller_epoch": 1, "broker_epoch": -1,
                                        "topic_states": [{"topic_name": "ok", "partition_states": [
                                            {"partition_index": 0, "leader_epoch": 5, "delete_partition": True}]}]})
    assert sr.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert broker.rm.get_partition(("ok", 0)) is not None


def test_group_and_transactional_ids(broker):
    join = call(broker, join_group, 5, {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                        "protocols": []})
    assert join.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    fc = call(broker, find_coordinator, 2, {"key": "g", "key_type": 0})
    assert fc.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    fc = call(broker, find_coordinator, 2, {"key": "tx", "key_type": 1})
    assert fc.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    init = call(broker, init_producer_id, 4, {"transactional_id": "tx", "transaction_timeout_ms": 1000,
                                              "producer_id": -1, "producer_epoch": -1})
    assert init.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    idem = call(broker, init_producer_id, 4, {"transactional_id": None, "transaction_timeout_ms": 1000,
                                              "producer_id": -1, "producer_epoch": -1})
    assert idem.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_acl_apis_need_the_cluster_and_an_authorizer(broker):
    flt = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
           "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    assert call(broker, describe_acls, 2, flt).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    creation = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:a",
                "host": "*", "operation": 3, "permission_type": 3}
    assert call(broker, create_acls, 2, {"creations": [creation]}).results[0].error_code == \
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert call(broker, delete_acls, 2, {"filters": [flt]}).filter_results[0].error_code == \
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    broker.ctx.authorizer.apply(allow(Op.DESCRIBE, RT.CLUSTER, CLUSTER_NAME))
    listed = call(broker, describe_acls, 2, flt)
    assert listed.error_code == 0
    assert [(r.resource_type, r.resource_name, [a.operation for a in r.acls]) for r in listed.resources] == \
        [(RT.CLUSTER, CLUSTER_NAME, [Op.DESCRIBE])]
    broker.ctx.authorizer = None
    assert call(broker, describe_acls, 2, flt).error_code == ErrorCode.SECURITY_DISABLED
    assert call(broker, create_acls, 2, {"creations": [creation]}).results[0].error_code == \
        ErrorCode.SECURITY_DISABLED


def test_admin_apis_of_issue_16(broker):
    """DescribeConfigs: DescribeConfigs on the topic / the Cluster, refused resources last;
    DescribeCluster: the Cluster operations the principal holds (0 without Describe);
    OffsetDelete: Delete on the group, then Read on each topic."""
    body = {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None},
                          {"resource_type": 2, "resource_name": "ok", "configuration_keys": None}]}
    broker.ctx.authorizer.apply(allow(Op.DESCRIBE_CONFIGS, RT.TOPIC, "ok"))
    results = call(broker, describe_configs, 2, body).results
    assert [(r.resource_name, r.error_code) for r in results] == [("ok", 0), ("1", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
    ops = {"include_cluster_authorized_operations": True}
    assert call(broker, describe_cluster, 0, ops).cluster_authorized_operations == 0
    broker.ctx.authorizer.apply(allow(Op.ALTER, RT.CLUSTER, CLUSTER_NAME))   # Alter implies Describe
    assert call(broker, describe_cluster, 0, ops).cluster_authorized_operations == (1 << 7) | (1 << 8)
    delete = {"group_id": "g", "topics": [{"name": "ok", "partitions": [{"partition_index": 0}]}]}
    assert call(broker, offset_delete, 0, delete).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    # Metadata v8's authorized operations: what the principal holds (Read implies Describe)
    broker.ctx.authorizer.apply(allow(Op.READ, RT.TOPIC, "ok"))
    meta = call(broker, metadata, 8, {"topics": [{"name": "ok"}], "allow_auto_topic_creation": False,
                                      "include_cluster_authorized_operations": True,
                                      "include_topic_authorized_operations": True})
    assert meta.cluster_authorized_operations == (1 << 7) | (1 << 8)
    assert meta.topics[0].topic_authorized_operations == (1 << 3) | (1 << 8)   # the topic's ACLs now: Read only
