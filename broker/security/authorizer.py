"""AclAuthorizer: Kafka 2.8's ACL decisions over a per-broker cache of the ACLs in ZooKeeper.

Invariant: ``authorize`` reads only the in-memory cache (no I/O, no Deferred: one dict lookup
per literal pattern plus a scan of the resource type's prefixed patterns) and decides exactly as
Kafka's AclAuthorizer.authorizeAction: a super user (``super.users``) may do everything; a
resource no ACL applies to is allowed only with ``allow.everyone.if.no.acl.found``; otherwise a
matching DENY wins over any ALLOW, and an ALLOW matches for the operation itself, for ALL, or
for an operation implying it (Describe by Read/Write/Delete/Alter, DescribeConfigs by
AlterConfigs). An ACL applies to a resource when its pattern is the LITERAL name, the LITERAL
wildcard ``*`` or a PREFIXED prefix of the name; to a request when its principal is the
request's or ``User:*`` and its host is the client's address or ``*``. The cache changes only
on the reactor thread, through ``apply``/``replace_all`` (fed by ``acl_sync.AclSync``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

from odradek.protocol.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    implied_by,
)

if TYPE_CHECKING:
    from twisted.internet import defer

Entries = frozenset[AccessControlEntry]
_ALLOW, _DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:ops``)."""
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


class AclAuthorizer:
    """The decisions and the cache; ``sync`` (an ``AclSync``) writes ZooKeeper for the admin APIs."""

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._literal: dict[tuple[ResourceType, str], Entries] = {}
        self._prefixed: dict[ResourceType, dict[str, Entries]] = {}
        self.sync: Any = None

    @classmethod
    def from_config(cls, config: Any) -> "AclAuthorizer":
        return cls(parse_super_users(config["super.users"]), bool(config["allow.everyone.if.no.acl.found"]))

    # ------------------------------------------------------------ the cache

    def apply(self, changes: Mapping[ResourcePattern, Entries]) -> None:
        """Take the entries ZooKeeper now has for these patterns (empty = none left)."""
        for pattern, entries in changes.items():
            if pattern.pattern_type == PatternType.LITERAL:
                key = (pattern.resource_type, pattern.name)
                if entries:
                    self._literal[key] = frozenset(entries)
                else:
                    self._literal.pop(key, None)
            elif pattern.pattern_type == PatternType.PREFIXED:
                by_name = self._prefixed.setdefault(pattern.resource_type, {})
                if entries:
                    by_name[pattern.name] = frozenset(entries)
                else:
                    by_name.pop(pattern.name, None)

    def replace_all(self, everything: Mapping[ResourcePattern, Entries]) -> None:
        self._literal = {}
        self._prefixed = {}
        self.apply(everything)

    def patterns(self) -> list[ResourcePattern]:
        out = [ResourcePattern(t, n, PatternType.LITERAL) for t, n in self._literal]
        out += [ResourcePattern(t, n, PatternType.PREFIXED) for t, names in self._prefixed.items() for n in names]
        return sorted(out)

    def entries(self, pattern: ResourcePattern) -> Entries:
        if pattern.pattern_type == PatternType.LITERAL:
            return self._literal.get((pattern.resource_type, pattern.name), frozenset())
        return self._prefixed.get(pattern.resource_type, {}).get(pattern.name, frozenset())

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        """The cached bindings matching ``flt`` (DescribeAcls)."""
        return sorted(AclBinding(p, e) for p in self.patterns() if flt.pattern.matches(p)
                      for e in self.entries(p) if flt.entry.matches(e))

    def _matching(self, resource_type: ResourceType, name: str) -> list[Entries]:
        found = []
        literal = self._literal
        if literal:
            exact = literal.get((resource_type, name))
            if exact:
                found.append(exact)
            wildcard = literal.get((resource_type, WILDCARD_RESOURCE))
            if wildcard and name != WILDCARD_RESOURCE:
                found.append(wildcard)
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            found.extend(entries for prefix, entries in prefixed.items() if name.startswith(prefix))
        return found

    # ------------------------------------------------------------ decisions

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self._matching(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        if _any_match(acls, principal, host, _DENY, (operation,)):
            return False
        return _any_match(acls, principal, host, _ALLOW, implied_by(operation))

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: may the principal do ``operation`` on SOME resource of
        this type? (An ALLOW not cancelled by a DENY on the same or a wider pattern.)"""
        if principal in self.super_users:
            return True
        allows: list[ResourcePattern] = []
        denies: list[ResourcePattern] = []
        for pattern in self.patterns():
            if pattern.resource_type != resource_type:
                continue
            entries = [self.entries(pattern)]
            if _any_match(entries, principal, host, _DENY, (operation,)):
                denies.append(pattern)
            if _any_match(entries, principal, host, _ALLOW, (operation,)):
                allows.append(pattern)
        if any(d.pattern_type == PatternType.LITERAL and d.name == WILDCARD_RESOURCE for d in denies):
            return False
        for allow in allows:
            if not any(_covers(d, allow) for d in denies):
                return True
        if self.allow_everyone_if_no_acl_found and not any(p.resource_type == resource_type for p in self.patterns()):
            return True
        return False

    # ------------------------------------------------------------ the admin APIs (through ZooKeeper)

    def create_acls(self, bindings: list[AclBinding]) -> "defer.Deferred":
        """Fires with a list of None (created) / error message per binding."""
        return self.sync.create_acls(bindings)

    def delete_acls(self, filters: list[AclBindingFilter]) -> "defer.Deferred":
        """Fires with the bindings removed per filter."""
        return self.sync.delete_acls(filters)


def _covers(deny: ResourcePattern, allow: ResourcePattern) -> bool:
    """Whether a DENY on ``deny`` takes away everything an ALLOW on ``allow`` gives."""
    if deny.pattern_type == PatternType.LITERAL:
        return deny.name == WILDCARD_RESOURCE or (allow.pattern_type == PatternType.LITERAL and deny.name == allow.name)
    return allow.name.startswith(deny.name)


def _any_match(acls: list[Entries], principal: str, host: str, permission: AclPermissionType,
               operations: Iterable[AclOperation]) -> bool:
    ops = set(operations)
    for entries in acls:
        for e in entries:
            if (e.permission_type == permission
                    and (e.operation in ops or e.operation == AclOperation.ALL)
                    and (e.principal == principal or e.principal == WILDCARD_PRINCIPAL)
                    and (e.host == host or e.host == WILDCARD_HOST)):
                return True
    return False


def start_authorizer(config: Any, zk: Any, run_in_thread: Any, reactor: Any) -> "defer.Deferred":
    """KafkaServer's one call: None when ``authorizer.class.name`` is empty, else an AclAuthorizer
    whose cache was loaded from ZooKeeper and follows the change notifications."""
    from twisted.internet import defer

    from .acl_sync import AclSync
    if not (config["authorizer.class.name"] or "").strip():
        return defer.succeed(None)
    authorizer = AclAuthorizer.from_config(config)
    sync = AclSync(authorizer, zk, run_in_thread, reactor)
    return sync.start().addCallback(lambda _: authorizer)
