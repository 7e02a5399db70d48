"""The one authorization call every handler makes (Kafka's AuthHelper), and Kafka's error code
for each denied resource type.

Invariant: with no authorizer configured (``ctx.authorizer is None``) every check is one
attribute test and allows; with one, the decision is the authorizer's for the request's
principal (``rc.principal``) and the client's address (the host part of ``rc.peer``). Not a
handler module (it is not listed in the registry).
"""
from __future__ import annotations

from typing import Iterable

from odradek.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.protocol.errors import ErrorCode

from .context import BrokerContext, RequestContext

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                                AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE)
CLUSTER_ACTION, IDEMPOTENT_WRITE = AclOperation.CLUSTER_ACTION, AclOperation.IDEMPOTENT_WRITE
DESCRIBE_CONFIGS, ALTER_CONFIGS = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                           ResourceType.TRANSACTIONAL_ID)

DENIED: dict[ResourceType, ErrorCode] = {
    TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ResourceType.DELEGATION_TOKEN: ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
}


def client_address(rc: RequestContext) -> str:
    """The client's IP as ACL hosts name it: ``127.0.0.1`` of ``127.0.0.1:5555``, ``::1`` of ``[::1]:5555``."""
    peer = rc.peer or ""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return host.strip("[]")


def authorize(ctx: BrokerContext, rc: RequestContext, operation: AclOperation, resource_type: ResourceType,
              name: str = CLUSTER_NAME) -> bool:
    """May the request's principal do ``operation`` on ``resource_type:name``? (the Cluster by default)"""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(rc.principal, client_address(rc), operation, resource_type, name)


def denied(ctx: BrokerContext, rc: RequestContext, operation: AclOperation, resource_type: ResourceType,
           names: Iterable[str]) -> set[str]:
    """The names (of ``names``) the principal may NOT ``operation``; empty without an authorizer."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return set()
    principal, host = rc.principal, client_address(rc)
    return {n for n in set(names) if not authorizer.authorize(principal, host, operation, resource_type, n)}


def authorize_any(ctx: BrokerContext, rc: RequestContext, operation: AclOperation,
                  resource_type: ResourceType) -> bool:
    """May the principal do ``operation`` on some resource of the type? (authorizeByResourceType)"""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_any(rc.principal, client_address(rc), operation, resource_type)


NO_OPERATIONS = -2**31   # "authorized operations" not asked for (INT32_MIN)
# the operations Kafka 2.8 defines on each resource type (AclEntry.supportedOperations)
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE),
    TRANSACTIONAL_ID: (DESCRIBE, WRITE),
}


def authorized_operations(ctx: BrokerContext, rc: RequestContext, resource_type: ResourceType,
                          name: str = CLUSTER_NAME) -> int:
    """The bit set (1 << operation code) of the operations the principal may perform on the
    resource, as the ``*_authorized_operations`` fields carry it (all of them without an authorizer)."""
    bits = 0
    for op in SUPPORTED_OPERATIONS[resource_type]:
        if authorize(ctx, rc, op, resource_type, name):
            bits |= 1 << int(op)
    return bits


def cluster_operations(ctx: BrokerContext, rc: RequestContext) -> int:
    """The Cluster's authorized operations as Metadata and DescribeCluster answer them: 0 without
    Describe on the Cluster (KafkaApis 2.8)."""
    return authorized_operations(ctx, rc, CLUSTER) if authorize(ctx, rc, DESCRIBE, CLUSTER) else 0
