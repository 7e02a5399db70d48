"""Kafka's ACL model: resource types, operations, permission and pattern types, resource
patterns, access control entries, bindings and their filters (org.apache.kafka.common.acl /
org.apache.kafka.common.resource).

Invariant: every enum value carries Kafka's wire code (CreateAcls/DescribeAcls/DeleteAcls)
and Kafka's two spellings: the enum name (``TOPIC``, ``DESCRIBE_CONFIGS``: wire-facing
``toString``s) and the ZooKeeper/CLI name (``Topic``, ``DescribeConfigs``: ZkData's JSON and
paths). Filters match exactly as Kafka's ``ResourcePatternFilter`` / ``AccessControlEntryFilter``
do; ``implied_by`` is the AclAuthorizer's operation inheritance (Describe is implied by Read,
Write, Delete and Alter; DescribeConfigs by AlterConfigs; All implies everything). Values are
immutable and hashable; nothing here does I/O.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

N = TypeVar("N", bound="_Named")

CLUSTER_NAME = "kafka-cluster"
WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"


def _normalized(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


class _Named(IntEnum):
    """An enum with Kafka's PascalCase name (``zk_name``) and lenient parsing."""

    @property
    def zk_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def parse(cls: type[N], text: str) -> N:
        """By enum or PascalCase name, any case, with or without underscores; ValueError if unknown."""
        wanted = _normalized(text.strip())
        for member in cls:
            if _normalized(member.name) == wanted:
                return member
        raise ValueError(f"unknown {cls.__name__} {text!r}")

    @classmethod
    def from_code(cls: type[N], code: int) -> N:
        """The member with wire code ``code``, or UNKNOWN (as Kafka's ``fromCode``)."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6


class AclOperation(_Named):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @property
    def is_specific(self) -> bool:
        return self in (PatternType.LITERAL, PatternType.PREFIXED)


CONCRETE_RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                           ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN)

_O = AclOperation
# What kafka-acls.sh accepts per resource type (AclEntry.supportedOperations), All besides.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                                   _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE}),
    ResourceType.CLUSTER: frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                                     _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
}

# operation asked -> the ALLOW operations that grant it (besides ALL)
_IMPLIED: dict[AclOperation, frozenset[AclOperation]] = {
    _O.DESCRIBE: frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
}


def implied_by(operation: AclOperation) -> frozenset[AclOperation]:
    """The operations whose ALLOW grants ``operation`` (ALL aside)."""
    return _IMPLIED.get(operation) or frozenset({operation})


_PRINCIPAL = re.compile(r"^[^:]+:.*$")


def valid_principal(principal: str) -> bool:
    """Kafka's ``<type>:<name>`` (SecurityUtils.parseKafkaPrincipal)."""
    return bool(_PRINCIPAL.match(principal or ""))


def _show(value: object) -> str:
    return "<any>" if value is None else str(getattr(value, "name", value))


@dataclass(frozen=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this (specific) pattern applies to the concrete resource ``resource_type:name``."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD_RESOURCE


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"

    def invalid_reason(self) -> str | None:
        """Why this binding cannot be stored (Kafka's validateAclBinding and CreateAcls checks),
        or None."""
        p, e = self.pattern, self.entry
        if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return f"Invalid resource type {p.resource_type.name}"
        if not p.pattern_type.is_specific:
            return f"Invalid pattern type {p.pattern_type.name}"
        if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            return f"Invalid operation {e.operation.name}"
        if e.permission_type in (AclPermissionType.UNKNOWN, AclPermissionType.ANY):
            return f"Invalid permission type {e.permission_type.name}"
        if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
            return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        if not p.name:
            return "Invalid empty resource name"
        if not valid_principal(e.principal):
            return f"Could not parse principal from `{e.principal}`: it must be <type>:<name>"
        if not e.host:
            return "Invalid empty host"
        return None


@dataclass(frozen=True)
class ResourcePatternFilter:
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={_show(self.name)}, "
                f"patternType={self.pattern_type.name})")

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:          # MATCH against a literal pattern
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)                # MATCH against a prefixed pattern

    def unknown(self) -> bool:
        return ResourceType.UNKNOWN == self.resource_type or PatternType.UNKNOWN == self.pattern_type


@dataclass(frozen=True)
class AccessControlEntryFilter:
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def __str__(self) -> str:
        return (f"(principal={_show(self.principal)}, host={_show(self.host)}, "
                f"operation={self.operation.name}, permissionType={self.permission_type.name})")

    def matches(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission_type in (AclPermissionType.ANY, entry.permission_type))

    def unknown(self) -> bool:
        return AclOperation.UNKNOWN == self.operation or AclPermissionType.UNKNOWN == self.permission_type


@dataclass(frozen=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter = ResourcePatternFilter()
    entry: AccessControlEntryFilter = AccessControlEntryFilter()

    def __str__(self) -> str:
        return f"(patternFilter={self.pattern}, entryFilter={self.entry})"

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def unknown(self) -> bool:
        return self.pattern.unknown() or self.entry.unknown()


ANY_BINDING = AclBindingFilter()
