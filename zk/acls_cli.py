"""``odradek acls``: kafka-acls.sh (Kafka 2.8's AclCommand) — add, remove and list ACLs.

Invariant: one parser and one way of turning flags into ACL bindings and filters, whatever the
backend: ``--authorizer-properties zookeeper.connect=...`` writes the ACL znodes directly
(``odradek.zk.acl_store``, exactly as a broker's AclAuthorizer would, change notifications
included), ``--bootstrap-server`` (with ``--command-config``) goes through a broker's
CreateAcls/DescribeAcls/DeleteAcls with odradek's AdminClient (``odradek.client.acls_cli``,
loaded by name: the client layer is not below this one). Flags, defaults (operation All, host
``*``, pattern type literal) and output lines are kafka-acls.sh's; every user error is one
``Error:`` line and exit code 1, and nothing is changed when any flag is wrong.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any, NoReturn, Protocol

from odradek.protocol.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
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
    valid_principal,
)
from odradek.protocol.errors import KafkaError
from odradek.zk.cli import CommandError

RESOURCE_FLAGS = (("topic", ResourceType.TOPIC), ("group", ResourceType.GROUP),
                  ("transactional_id", ResourceType.TRANSACTIONAL_ID),
                  ("delegation_token", ResourceType.DELEGATION_TOKEN))
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
O = AclOperation


class Backend(Protocol):
    def add(self, bindings: list[AclBinding]) -> None: ...
    def remove(self, filters: list[AclBindingFilter]) -> None: ...
    def describe(self, flt: AclBindingFilter) -> list[AclBinding]: ...
    def close(self) -> None: ...


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CommandError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="odradek acls", description="Add, remove or list ACLs (like kafka-acls.sh).")
    for action in ("add", "remove", "list"):
        p.add_argument(f"--{action}", action="store_true")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", help="through a broker's ACL APIs")
    p.add_argument("--command-config", metavar="FILE", help="client properties for --bootstrap-server")
    p.add_argument("--authorizer-properties", nargs="+", action="extend", metavar="KEY=VALUE",
                   help="zookeeper.connect=HOST:PORT[/chroot]: write ZooKeeper directly")
    p.add_argument("--authorizer", help="accepted for compatibility (the AclAuthorizer)")
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--delegation-token", action="append", default=[])
    p.add_argument("--resource-pattern-type", default="literal", metavar="literal|prefixed|any|match")
    p.add_argument("--allow-principal", action="append", default=[])
    p.add_argument("--deny-principal", action="append", default=[])
    p.add_argument("--principal", action="append", default=[], help="with --list: only these principals' ACLs")
    p.add_argument("--allow-host", action="append", default=[])
    p.add_argument("--deny-host", action="append", default=[])
    p.add_argument("--operation", action="append", default=[])
    p.add_argument("--producer", action="store_true")
    p.add_argument("--consumer", action="store_true")
    p.add_argument("--idempotent", action="store_true")
    p.add_argument("--force", action="store_true", help="assume yes to every prompt")
    p.add_argument("--zookeeper-timeout", type=float, default=10.0, help=argparse.SUPPRESS)
    return p


# ---------------------------------------------------------------- flags -> bindings

def _pattern_type(args: argparse.Namespace) -> PatternType:
    try:
        pattern_type = PatternType.parse(args.resource_pattern_type)
    except ValueError:
        raise CommandError(f"Invalid --resource-pattern-type {args.resource_pattern_type!r}: "
                           "expected literal, prefixed, any or match") from None
    if pattern_type == PatternType.UNKNOWN:
        raise CommandError("Invalid --resource-pattern-type unknown")
    return pattern_type


def resource_filters(args: argparse.Namespace) -> list[ResourcePatternFilter]:
    pattern_type = _pattern_type(args)
    out = [ResourcePatternFilter(rtype, name, pattern_type)
           for flag, rtype in RESOURCE_FLAGS for name in getattr(args, flag)]
    if args.cluster:
        out.append(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, pattern_type))
    return out


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    ops: list[AclOperation] = []
    for text in args.operation or ["All"]:
        try:
            op = AclOperation.parse(text)
        except ValueError:
            op = AclOperation.UNKNOWN
        if op in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise CommandError(f"Invalid operation {text!r}: expected one of "
                               + ", ".join(o.zk_name for o in AclOperation if o.value >= O.ALL))
        ops.append(op)
    return ops


def _entries(args: argparse.Namespace, ops: list[AclOperation]) -> list[AccessControlEntry]:
    out: list[AccessControlEntry] = []
    for permission, principals, hosts in ((ALLOW, args.allow_principal, args.allow_host),
                                          (DENY, args.deny_principal, args.deny_host)):
        for principal in principals:
            if not valid_principal(principal):
                raise CommandError(f"expected a string in format principalType:principalName but got {principal}")
            for host in hosts or ["*"]:
                out.extend(AccessControlEntry(principal, host, op, permission) for op in ops)
    return out


def _convenience(args: argparse.Namespace, pattern_type: PatternType) -> dict[ResourcePattern, list[AclOperation]]:
    """--producer / --consumer: the operations kafka-acls.sh grants per resource."""
    out: dict[ResourcePattern, list[AclOperation]] = {}
    for t in args.topic:
        ops = ([O.WRITE, O.DESCRIBE, O.CREATE] if args.producer else []) + \
              ([O.READ, O.DESCRIBE] if args.consumer else [])
        out[ResourcePattern(ResourceType.TOPIC, t, pattern_type)] = list(dict.fromkeys(ops))
    if args.consumer:
        for g in args.group:
            out[ResourcePattern(ResourceType.GROUP, g, pattern_type)] = [O.READ]
    if args.producer:
        for t in args.transactional_id:
            out[ResourcePattern(ResourceType.TRANSACTIONAL_ID, t, pattern_type)] = [O.WRITE, O.DESCRIBE]
        if args.idempotent:
            out[ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)] = [O.IDEMPOTENT_WRITE]
    return out


def bindings_to_add(args: argparse.Namespace) -> dict[ResourcePattern, list[AccessControlEntry]]:
    pattern_type = _pattern_type(args)
    if not pattern_type.is_specific:
        raise CommandError("A '--resource-pattern-type' value of 'any' and 'match' is not valid when adding acls.")
    if not (args.allow_principal or args.deny_principal):
        raise CommandError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    if args.producer or args.consumer:
        if not args.topic or (args.consumer and not args.group):
            raise CommandError("With --producer you must specify a --topic; with --consumer a --topic and a --group")
        per_resource = _convenience(args, pattern_type)
        return {p: _entries(args, ops) for p, ops in per_resource.items()}
    filters = resource_filters(args)
    if not filters:
        raise CommandError("You must specify one of: --topic, --cluster, --group, --transactional-id, "
                           "--delegation-token when trying to add ACLs.")
    ops = _operations(args)
    out = {}
    for f in filters:
        supported = SUPPORTED_OPERATIONS[f.resource_type] | {O.ALL}
        if set(ops) - supported:
            raise CommandError(f"ResourceType {f.resource_type.name} only supports operations "
                               + ",".join(o.name for o in sorted(supported)))
        out[ResourcePattern(f.resource_type, f.name or "", pattern_type)] = _entries(args, ops)
    return out


def _check(args: argparse.Namespace) -> str:
    actions = [a for a in ("add", "remove", "list") if getattr(args, a)]
    if len(actions) != 1:
        raise CommandError("Command must include exactly one action: --list, --add, --remove.")
    if bool(args.bootstrap_server) == bool(args.authorizer_properties):
        raise CommandError("Only one of --authorizer-properties or --bootstrap-server must be specified"
                           if args.bootstrap_server else
                           "One of --authorizer-properties or --bootstrap-server must be specified")
    if args.command_config and not args.bootstrap_server:
        raise CommandError("--command-config can only be used with --bootstrap-server")
    action = actions[0]
    if action == "list" and (args.allow_principal or args.deny_principal or args.producer or args.consumer):
        raise CommandError("--list takes --principal, not --allow-principal/--deny-principal/--producer/--consumer")
    if args.allow_host and not args.allow_principal:
        raise CommandError("--allow-host can only be used with --allow-principal")
    if args.deny_host and not args.deny_principal:
        raise CommandError("--deny-host can only be used with --deny-principal")
    if action != "add" and (args.producer or args.consumer):
        raise CommandError("--producer and --consumer can only be used with --add")
    return action


# ---------------------------------------------------------------- actions

def _show(title: str, resource: Any, acls: list[Any]) -> None:
    print(f"{title} `{resource}`: \n " + "\n".join(f"\t{a}" for a in acls) + " \n")


def _list(backend: Backend, args: argparse.Namespace, filters: list[ResourcePatternFilter]) -> None:
    found: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for f in filters or [ResourcePatternFilter()]:
        for b in backend.describe(AclBindingFilter(f, AccessControlEntryFilter())):
            if not args.principal or b.entry.principal in args.principal:
                found.setdefault(b.pattern, [])
                if b.entry not in found[b.pattern]:
                    found[b.pattern].append(b.entry)
    if args.principal:
        for principal in args.principal:
            print(f"ACLs for principal `{principal}`")
            for pattern, entries in sorted(found.items()):
                for e in entries:
                    if e.principal == principal:
                        print(f"Current ACLs for resource `{pattern}`: \n \t{e} \n")
        return
    for pattern, entries in sorted(found.items()):
        _show("Current ACLs for resource", pattern, entries)


def _confirm(args: argparse.Namespace, question: str) -> bool:
    if args.force:
        return True
    print(f"{question} (y/n)")
    answer = sys.stdin.readline().strip().lower()
    return answer == "y"


def run(backend: Backend, args: argparse.Namespace, action: str) -> None:
    if action == "add":
        to_add = bindings_to_add(args)
        for pattern, entries in to_add.items():
            _show("Adding ACLs for resource", pattern, entries)
        backend.add([AclBinding(p, e) for p, entries in to_add.items() for e in entries])
        _list(backend, args, [ResourcePatternFilter(p.resource_type, p.name, p.pattern_type) for p in to_add])
    elif action == "remove":
        filters = resource_filters(args)
        if not filters:
            raise CommandError("You must specify one of: --topic, --cluster, --group, --transactional-id, "
                               "--delegation-token when trying to remove ACLs.")
        ops = _operations(args)
        entries = _entries(args, ops)
        for f in filters:
            if not entries:
                if not _confirm(args, f"Are you sure you want to delete all ACLs for resource filter `{f}`?"):
                    continue
                backend.remove([AclBindingFilter(f, AccessControlEntryFilter())])
            else:
                listing = "\n".join(f"\t{e}" for e in entries)
                if not _confirm(args, f"Are you sure you want to remove ACLs: \n {listing} \n from resource "
                                      f"filter `{f}`?"):
                    continue
                backend.remove([AclBindingFilter(f, AccessControlEntryFilter(e.principal, e.host, e.operation,
                                                                             e.permission_type)) for e in entries])
        _list(backend, args, filters)
    else:
        _list(backend, args, resource_filters(args))


# ---------------------------------------------------------------- backends

class ZkBackend:
    """ACL znodes written directly, as kafka-acls.sh --authorizer-properties does."""

    def __init__(self, properties: dict[str, str], timeout: float) -> None:
        from odradek.zk.acl_store import ZkAclStore
        from odradek.zk.admin import open_zk
        connect = properties.get("zookeeper.connect")
        if not connect:
            raise CommandError("--authorizer-properties must include zookeeper.connect=HOST:PORT")
        try:
            self.kazoo = open_zk(connect, timeout=timeout)
        except Exception as exc:   # ZooKeeperUnavailable, AdminOperationError: one line
            raise CommandError(str(exc)) from None
        self.store = ZkAclStore(self.kazoo)
        self.store.create_acl_paths()

    def add(self, bindings: list[AclBinding]) -> None:
        for b in bindings:
            reason = b.invalid_reason()
            if reason:
                raise CommandError(reason)
        self.store.add(bindings)

    def remove(self, filters: list[AclBindingFilter]) -> None:
        self.store.delete(filters)

    def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        return self.store.describe(flt)

    def close(self) -> None:
        self.kazoo.stop()
        self.kazoo.close()


def _properties(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"Invalid --authorizer-properties {item!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    action = _check(args)
    if action == "add":
        bindings_to_add(args)          # every flag checked before connecting anywhere
    elif action == "remove":
        _entries(args, _operations(args))
    backend: Backend
    user_errors: tuple[type[Exception], ...] = (KafkaError,)
    if args.bootstrap_server:
        client_cli = importlib.import_module("odradek.client.acls_cli")
        user_errors += client_cli.USER_ERRORS
        try:
            backend = client_cli.AdminBackend(args.bootstrap_server, args.command_config)
        except user_errors as exc:
            raise CommandError(str(exc)) from None
    else:
        backend = ZkBackend(_properties(args.authorizer_properties), args.zookeeper_timeout)
    try:
        run(backend, args, action)
    except user_errors as exc:
        raise CommandError(f"Error while executing ACL command: {exc}") from None
    finally:
        backend.close()
    return 0
