"""``odradek configs``: kafka-configs.sh 2.8 — parse once, then ZooKeeper or the admin API.

Invariant: flags, checks and output lines are kafka-configs.sh's. The arguments are parsed
and checked here for both modes; ``--zookeeper`` (or no connection flag: the ZooKeeper
``odradek topics`` would use) writes ``/config/<type>/<name>`` plus a ``/config/changes``
notification through ``odradek.zk.config_entities``; ``--bootstrap-server`` hands the parsed
request to ``odradek.client.configs_cli`` (loaded by name, as the console script table loads
every tool). A password given in ``--add-config`` is turned into a SCRAM credential at once
and never printed, logged or stored. Every user error is ONE line and exit code 1.
"""
from __future__ import annotations

import argparse
import importlib
import os
import re
from dataclasses import dataclass, field
from typing import Any, NoReturn, Sequence

from kazoo.client import KazooClient

from odradek.protocol.scram import MIN_ITERATIONS
from odradek.zk import config_entities as ce
from odradek.zk.admin import AdminZkClient
from odradek.zk.cli import CommandError
from odradek.zk.password_encoder import CIPHER, PASSWORD_SUFFIXES, PasswordEncoder, PasswordEncoderError
from odradek.zk.topics_cli import zookeeper_session

ENTITY_FLAGS = {"topic": ce.TOPICS, "client": ce.CLIENTS, "user": ce.USERS, "broker": ce.BROKERS}
DEFAULT_FLAGS = {"client_defaults": ce.CLIENTS, "user_defaults": ce.USERS, "broker_defaults": ce.BROKERS}
TYPE_NAMES = {ce.USERS: "user-principal", ce.CLIENTS: "client-id", ce.TOPICS: "topic", ce.BROKERS: "brokers"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CommandError(message)


class _EntityName(argparse.Action):
    """--entity-name NAME / --entity-default, kept in command-line order ("" = the default)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        names = list(getattr(namespace, "entity_names", None) or [])
        names.append("" if option_string == "--entity-default" else str(values))
        namespace.entity_names = names


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="odradek configs", description="Describe or change configs of topics, brokers, users and "
                                                    "clients, and users' SCRAM credentials (like kafka-configs.sh).")
    p.add_argument("--describe", action="store_true", help="list the configs of the given entity")
    p.add_argument("--alter", action="store_true", help="alter the configs of the given entity")
    p.add_argument("--zookeeper", metavar="HOST:PORT[,...]", help="write ZooKeeper directly (default: "
                   "$ODRADEK_ZOOKEEPER, or the local cluster's)")
    p.add_argument("--zookeeper-timeout", type=float, default=float(os.environ.get("ODRADEK_ZK_TIMEOUT", 10)),
                   metavar="SECONDS", help=argparse.SUPPRESS)
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="go through a broker's admin API")
    p.add_argument("--command-config", metavar="FILE", help="client properties (security.protocol, "
                   "sasl.mechanism, sasl.jaas.config, ssl.*) for --bootstrap-server")
    p.add_argument("--entity-type", action="append", default=[], help="topics, brokers, users or clients")
    p.add_argument("--entity-name", action=_EntityName, dest="entity_names", help="topic, broker id, user, client id")
    p.add_argument("--entity-default", action=_EntityName, dest="entity_names", nargs=0,
                   help="the default entity of the type (users, clients, brokers)")
    for flag in ENTITY_FLAGS:
        p.add_argument(f"--{flag}", help=f"shorthand for --entity-type {ENTITY_FLAGS[flag]} --entity-name NAME")
    for flag in DEFAULT_FLAGS:
        p.add_argument(f"--{flag.replace('_', '-')}", action="store_true",
                       help=f"shorthand for --entity-type {DEFAULT_FLAGS[flag]} --entity-default")
    p.add_argument("--add-config", metavar="K=V,...", help="configs to add; brackets group values with commas: "
                   "'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'")
    p.add_argument("--delete-config", action="append", default=[], metavar="K,...", help="config names to remove")
    p.add_argument("--all", action="store_true", help="(--bootstrap-server only) all configs")
    p.add_argument("--force", action="store_true", help=argparse.SUPPRESS)
    return p


@dataclass
class ConfigsRequest:
    """A checked command: one entity type; ``entity_name`` None = every entity, "" = the default."""
    action: str
    entity_type: str
    entity_name: str | None
    to_add: dict[str, str] = field(default_factory=dict)
    to_delete: list[str] = field(default_factory=list)
    scram: dict[str, tuple[int, str]] = field(default_factory=dict, repr=False)  # mechanism -> (iterations, password)
    zookeeper: str | None = None
    bootstrap_server: str | None = None
    command_config: str | None = None
    describe_all: bool = False
    # a <user, client-id> entity (``--entity-type users ... --entity-type clients ...``): the client
    # part, "" = the default, None = every client of the user(s) (describe only)
    with_clients: bool = False
    client_name: str | None = None

    def entity_types(self) -> list[str]:
        return [self.entity_type, ce.CLIENTS] if self.with_clients else [self.entity_type]

    def entity_names(self) -> list[str]:
        """The names given, in entity-type order (kafka-configs' entityNames)."""
        return [n for n in (self.entity_name, self.client_name) if n is not None]


# ---------------------------------------------------------------- parsing (both modes)

_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs' --add-config: split on commas outside [...], then on the first '=' outside
    [...]; brackets are dropped from values."""
    out: dict[str, str] = {}
    for item in re.split("," + _OUTSIDE_BRACKETS, text):
        pair = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
        if len(pair) != 2:
            raise CommandError('Invalid entity config: all configs to be added must be in the format "key=val".')
        out[pair[0].strip()] = re.sub(r"[\[\]]", "", pair[1]).strip()
    return out


def parse_delete_config(items: Sequence[str]) -> list[str]:
    return [name.strip() for item in items for name in item.split(",") if name.strip()]


def check_args(args: argparse.Namespace) -> ConfigsRequest:
    """kafka-configs.sh's ConfigCommandOptions.checkArgs, for one entity type."""
    if args.describe == args.alter:
        raise CommandError("Command must include exactly one action: --describe, --alter")
    action = "describe" if args.describe else "alter"
    if action == "describe":
        for flag, given in (("add-config", args.add_config), ("delete-config", args.delete_config)):
            if given:
                raise CommandError(f'Option "[describe]" can\'t be used with option "[{flag}]"')
    flags = [(t, getattr(args, f)) for f, t in ENTITY_FLAGS.items() if getattr(args, f) is not None]
    defaults = [t for f, t in DEFAULT_FLAGS.items() if getattr(args, f)]
    names: list[str] = list(args.entity_names or [])
    if (args.entity_type or names) and (flags or defaults):
        raise CommandError("--entity-{type,name,default} should not be used in conjunction with specific entity flags")
    types = list(args.entity_type) + [t for t, _ in flags] + defaults
    names += [n for _, n in flags] + [""] * len(defaults)
    if len(types) != len(set(types)):
        duplicates = sorted({t for t in types if types.count(t) > 1})
        raise CommandError(f"Duplicate entity type(s) specified: {','.join(duplicates)}")
    for t in types:
        if t not in ce.ENTITY_TYPES:
            raise CommandError(f"Invalid entity type {t}, the entity type must be one of {','.join(ce.ENTITY_TYPES)}")
    if not types:
        raise CommandError("At least one entity type must be specified")
    if len(types) > 1 and set(types) != {ce.USERS, ce.CLIENTS}:
        raise CommandError("Only the entity types users and clients can be combined (a <user, client-id> quota)")
    if len(names) > len(types):
        raise CommandError("More entity names specified than entity types")
    if args.alter and len(types) > 1 and len(names) != len(types):
        raise CommandError("--entity-name or --entity-default must be specified with each --entity-type for --alter")
    if len(types) > 1 and types[0] == ce.CLIENTS:   # kafka-configs takes them in either order
        types.reverse()
        names.reverse()
    entity_type, name = types[0], (names[0] if names else None)
    if args.zookeeper and args.bootstrap_server:
        raise CommandError("Only one of --bootstrap-server or --zookeeper must be specified")
    if args.command_config and not args.bootstrap_server:
        raise CommandError("--command-config can only be used with --bootstrap-server")
    if args.all and not args.bootstrap_server:
        raise CommandError("--bootstrap-server must be specified for --all")
    if name and entity_type == ce.BROKERS and not re.fullmatch(r"-?\d+", name):
        raise CommandError(f"The entity name for brokers must be a valid integer broker id, but it is: {name}")
    if name == "" and entity_type == ce.TOPICS:
        raise CommandError("--entity-default is not valid for topics: give --entity-name")
    request = ConfigsRequest(action, entity_type, name, zookeeper=args.zookeeper,
                             bootstrap_server=args.bootstrap_server, command_config=args.command_config,
                             describe_all=args.all, with_clients=len(types) > 1,
                             client_name=names[1] if len(names) > 1 else None)
    if action == "alter":
        if name is None:
            if entity_type == ce.TOPICS:
                raise CommandError("an entity name must be specified with --alter of topics")
            raise CommandError("an entity-name or default entity must be specified with --alter of users, "
                               "clients, brokers or ips")
        if not args.add_config and not args.delete_config:
            raise CommandError("At least one of --add-config, --add-config-file, or --delete-config must be "
                               "specified with --alter")
        request.to_add = parse_add_config(args.add_config) if args.add_config else {}
        request.to_delete = parse_delete_config(args.delete_config)
        if entity_type == ce.USERS:
            request.scram = take_scram_specs(request.to_add)
            if request.scram and request.with_clients:
                raise CommandError("SCRAM credentials belong to a user: not to a <user, client-id> entity")
    return request


def take_scram_specs(to_add: dict[str, str]) -> dict[str, tuple[int, str]]:
    """Move the SCRAM entries out of ``to_add``: mechanism -> (iterations, password), with
    kafka-configs' minimum-iterations check (the maximum is the broker's to enforce)."""
    out = {}
    for mechanism in ce.SCRAM_MECHANISMS:
        if mechanism in to_add:
            try:
                out[mechanism] = ce.parse_scram_spec(mechanism, to_add.pop(mechanism))
            except ce.InvalidConfig as exc:
                raise CommandError(str(exc)) from None
            if out[mechanism][0] < MIN_ITERATIONS:
                raise CommandError(f"Iterations {out[mechanism][0]} is less than the minimum {MIN_ITERATIONS} "
                                   f"required for {mechanism}")
    return out


# ---------------------------------------------------------------- ZooKeeper mode

def entity_label(entity_type: str, stored_name: str) -> str:
    """Kafka's ConfigCommand.Entity.toString: "user-principal 'alice'", "default brokers"..."""
    kind = TYPE_NAMES[entity_type]
    if stored_name == ce.DEFAULT_ENTITY:
        return f"default {kind}"
    shown = ce.desanitize(stored_name) if entity_type in (ce.USERS, ce.CLIENTS) else stored_name
    return f"{kind} '{shown}'"


def quota_label(user: str, client: str | None) -> str:
    """kafka-configs' ConfigEntity: "user-principal 'u', client-id 'c'" (stored names)."""
    return entity_label(ce.USERS, user) + ("" if client is None else ", " + entity_label(ce.CLIENTS, client))


def stored_name(entity_type: str, name: str) -> str:
    if name == "":
        return ce.DEFAULT_ENTITY
    return ce.sanitize(name) if entity_type in (ce.USERS, ce.CLIENTS) else name


def prepare_additions(configs: ce.EntityConfigs, request: ConfigsRequest, name: str) -> dict[str, str]:
    """The values to store: SCRAM passwords turned into credentials, the rest checked as Kafka does."""
    to_add = dict(request.to_add)
    if request.entity_type == ce.USERS:
        if request.scram and name == ce.DEFAULT_ENTITY:
            raise ce.InvalidConfig("SCRAM credentials belong to a user: give --entity-name, not --entity-default")
        ce.validate_quota_configs(ce.USERS, to_add, allow_scram=False)
        for mechanism, (iterations, password) in request.scram.items():
            to_add[mechanism] = ce.scram_config_value(mechanism, iterations, password)
    elif request.entity_type == ce.CLIENTS:
        ce.validate_quota_configs(ce.CLIENTS, to_add, allow_scram=False)
    elif request.entity_type == ce.BROKERS:
        check_broker_alter(configs, name, to_add)
    return to_add


def check_broker_alter(configs: ce.EntityConfigs, name: str, to_add: dict[str, str]) -> None:
    """Kafka's rule: besides replication throttles, broker configs go through ZooKeeper only to
    bootstrap, while the broker (or, for the default, every broker) is down; password configs
    only with ``password.encoder.secret`` (the brokers' own) in the same --add-config, which
    encrypts them and is not stored."""
    encoder_props = {k: to_add.pop(k) for k in list(to_add) if k.startswith("password.encoder.")}
    secret = sorted(k for k in to_add if k.endswith(PASSWORD_SUFFIXES))
    if secret:
        if "password.encoder.secret" not in encoder_props:
            raise CommandError(f"Password configs {', '.join(secret)} can be stored through --zookeeper only "
                               "encrypted: add password.encoder.secret=<the brokers' secret> to --add-config")
        try:
            encoder = PasswordEncoder(encoder_props["password.encoder.secret"],
                                      encoder_props.get("password.encoder.keyfactory.algorithm"),
                                      encoder_props.get("password.encoder.cipher.algorithm", CIPHER),
                                      int(encoder_props.get("password.encoder.key.length", 128)),
                                      int(encoder_props.get("password.encoder.iterations", 4096)))
        except (PasswordEncoderError, ValueError) as e:
            raise CommandError(str(e)) from None
        to_add.update({k: encoder.encode(to_add[k]) for k in secret})
    dynamic = sorted(k for k in to_add if k not in ce.BROKER_CONFIGS_UPDATABLE_WHILE_RUNNING)
    if not dynamic:
        return
    live = {b.id for b in configs.admin.live_brokers()}
    base = f"--bootstrap-server option must be specified to update broker configs {{{', '.join(dynamic)}}}"
    info = ("Broker configuration updates using ZooKeeper are supported for bootstrapping before brokers "
            "are started to enable encrypted password configs to be stored in ZooKeeper.")
    if name == ce.DEFAULT_ENTITY and live:
        raise CommandError(f"{base} for default cluster if any broker is running. {info}")
    if name != ce.DEFAULT_ENTITY and int(name) in live:
        raise CommandError(f"{base} when broker {name} is running. {info}")


def alter_with_zk(zk: KazooClient, request: ConfigsRequest) -> None:
    configs = ce.EntityConfigs(AdminZkClient(zk))
    assert request.entity_name is not None
    name = stored_name(request.entity_type, request.entity_name)
    label = entity_label(request.entity_type, name)
    try:
        to_add = prepare_additions(configs, request, name)
    except ce.InvalidConfig as exc:
        raise CommandError(str(exc)) from None
    if request.with_clients:
        assert request.client_name is not None
        client = stored_name(ce.CLIENTS, request.client_name)
        label = quota_label(name, client)
        name = ce.quota_znode((name, client))[1]
    current = configs.fetch(request.entity_type, name)
    missing = [k for k in request.to_delete if k not in current]
    if missing:
        raise CommandError(f"Invalid config(s): {','.join(missing)}")
    current.update(to_add)
    for key in request.to_delete:
        current.pop(key, None)
    configs.change(request.entity_type, name, current)
    print(f"Completed updating config for entity: {label}.")


def describe_with_zk(zk: KazooClient, request: ConfigsRequest) -> None:
    configs = ce.EntityConfigs(AdminZkClient(zk))
    if request.with_clients:
        return describe_user_clients_with_zk(configs, request)
    if request.entity_name is None:
        names = configs.names(request.entity_type)
    else:
        names = [stored_name(request.entity_type, request.entity_name)]
    for name in names:
        config = configs.fetch(request.entity_type, name)
        if request.entity_name is None and request.entity_type == ce.USERS and not config:
            continue  # as Kafka: no line for user nodes that hold only <user, client> quotas
        shown = ",".join(f"{k}={ce.describe_value(k, v)}" for k, v in config.items())
        print(f"Configs for {entity_label(request.entity_type, name)} are {shown}")


def describe_user_clients_with_zk(configs: ce.EntityConfigs, request: ConfigsRequest) -> None:
    """<user, client-id> entities as kafka-configs' ConfigEntity.getAllEntities finds them: named
    ones, every client of a named user, or (no user named) every client of every user."""
    if request.entity_name is None:
        users = configs.names(ce.USERS)
    else:
        users = [stored_name(ce.USERS, request.entity_name)]
    for user in users:
        if request.entity_name is not None and request.client_name is not None:
            clients = [stored_name(ce.CLIENTS, request.client_name)]
        else:
            clients = configs.names(f"{ce.USERS}/{user}/{ce.CLIENTS}")
        for client in clients:
            config = configs.quota_config((user, client))
            print(f"Configs for {quota_label(user, client)} are {','.join(f'{k}={v}' for k, v in config.items())}")


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    request = check_args(args)
    if request.bootstrap_server:
        admin_mode = importlib.import_module("odradek.client.configs_cli")
        return int(admin_mode.run(request))
    with zookeeper_session(request.zookeeper, args.zookeeper_timeout) as zk:
        (alter_with_zk if request.action == "alter" else describe_with_zk)(zk, request)
    return 0
