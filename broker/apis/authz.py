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
