"""``odradek topics``: kafka-topics.sh, through ZooKeeper (``--zookeeper``, on kazoo) or through a
broker's admin API (``--bootstrap-server``, ``odradek.client.topics_admin``).

Invariant: flags, checks and output lines are kafka-topics.sh 2.8's, in each mode as that tool
has them there; every user error (bad flags, bad name, existing or unknown topic, too few
brokers, bad config, unreachable ZooKeeper or broker, a broker's refusal) leaves as ONE line via
``CommandError`` (exit code 1), never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import sys
from contextlib import contextmanager
from typing import Any, Iterator, NoReturn, Protocol, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from odradek.protocol.errors import KafkaError
from odradek.zk import topics as topic_rules
from odradek.zk.admin import AdminOperationError, AdminZkClient, TopicAlreadyMarkedForDeletion, open_zk
from odradek.zk.cli import CommandError

ACTIONS = ("create", "list", "describe", "alter", "delete")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CommandError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="odradek topics", description="Create, delete, describe, or change a topic "
                                                   "(like kafka-topics.sh).")
    for action in ACTIONS:
        p.add_argument(f"--{action}", action="store_true")
    p.add_argument("--zookeeper", metavar="HOST:PORT[,...]",
                   help="ZooKeeper connect string (default: $ODRADEK_ZOOKEEPER, or the local cluster's)")
    p.add_argument("--zookeeper-timeout", type=float, default=float(os.environ.get("ODRADEK_ZK_TIMEOUT", 10)),
                   metavar="SECONDS", help="give up connecting to ZooKeeper after this long (default 10)")
    p.add_argument("--topic", help="topic name (a regular expression for --list/--describe/--delete/--alter)")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--replica-assignment", metavar="B1:B2,B3:B4,...")
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--delete-config", action="append", default=[], metavar="NAME")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--exclude-internal", action="store_true")
    p.add_argument("--under-replicated-partitions", action="store_true")
    p.add_argument("--unavailable-partitions", action="store_true")
    p.add_argument("--under-min-isr-partitions", action="store_true")
    p.add_argument("--at-min-isr-partitions", action="store_true")
    p.add_argument("--topics-with-overrides", action="store_true")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="go through a broker's admin API")
    p.add_argument("--command-config", metavar="FILE", help="client properties (security.protocol, "
                   "sasl.mechanism, sasl.jaas.config, ssl.*) for --bootstrap-server")
    return p


# ---------------------------------------------------------------- parsing helpers

def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """'0:1,1:2' -> {0: [0, 1], 1: [1, 2]} with kafka-topics' checks."""
    result: dict[int, list[int]] = {}
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(s.strip()) for s in part.split(":")]
        except ValueError:
            raise CommandError(f"Invalid --replica-assignment {text!r}: expected broker ids like 0:1,1:2") from None
        dups = sorted({b for b in brokers if brokers.count(b) > 1})
        if dups:
            raise CommandError(f"Partition replica lists may not contain duplicate entries: "
                               f"{','.join(map(str, dups))}")
        result[i] = brokers
        if len(brokers) != len(result[0]):
            raise CommandError(f"Partition {i} has different replication factor: {','.join(map(str, brokers))}")
    return result


def parse_configs(items: list[str]) -> dict[str, str]:
    config: dict[str, str] = {}
    for item in items:
        parts = re.split(r"\s*=\s*", item)
        if len(parts) != 2:
            raise CommandError('Invalid topic config: all configs to be added must be in the format "key=val".')
        config[parts[0].strip()] = parts[1].strip()
    try:
        topic_rules.validate_topic_config(config)
    except KafkaError as exc:
        raise CommandError(exc.message or exc.code.name) from None
    return config


def select_topics(all_topics: list[str], include: str | None, exclude_internal: bool) -> list[str]:
    """kafka-topics' IncludeList: --topic is a regex (',' means '|') matched against whole names."""
    if include is None:
        return [t for t in all_topics if not (exclude_internal and topic_rules.is_internal(t))]
    raw = re.sub(r"""^["']+|["']+$""", "", include.strip().replace(",", "|").replace(" ", ""))
    try:
        pattern = re.compile(raw)
    except re.error as exc:
        raise CommandError(f"Invalid --topic {include!r}: {exc}") from None
    return [t for t in all_topics
            if pattern.fullmatch(t) and not (exclude_internal and topic_rules.is_internal(t))]


def ensure_topics(found: list[str], requested: str | None, required: bool) -> None:
    if requested is not None and required and not found:
        raise CommandError(f"Topic '{requested}' does not exist as expected")


def resolve_zookeeper(arg: str | None) -> str:
    if arg:
        return arg
    env = os.environ.get("ODRADEK_ZOOKEEPER")
    if env:
        return env
    from odradek.zk.cluster import saved_zookeeper_connect
    saved = saved_zookeeper_connect(os.environ.get("ODRADEK_DATA_DIR", "data"))
    if saved:
        return saved
    raise CommandError("no ZooKeeper to talk to: give --zookeeper host:port, set ODRADEK_ZOOKEEPER, "
                       "or start a local cluster with 'odradek cluster up'")


def check_args(args: argparse.Namespace) -> str:
    actions = [a for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise CommandError("Command must include exactly one action: --list, --describe, --create, --alter or --delete")
    action = actions[0]
    broker = bool(args.bootstrap_server)
    if broker and args.zookeeper:
        raise CommandError("Only one of --bootstrap-server or --zookeeper must be specified")
    if args.command_config and not broker:
        raise CommandError("--command-config can only be used with --bootstrap-server")
    if action in ("create", "alter", "delete") and not args.topic:
        raise CommandError('Missing required argument "[topic]"')
    if action == "describe" and args.if_exists and not args.topic:
        raise CommandError('Missing required argument "[topic]"')
    if broker and args.delete_config:
        raise CommandError('Option "[delete-config]" can\'t be used with option "[bootstrap-server]"')
    if action == "create":
        if args.replica_assignment:
            if args.partitions is not None or args.replication_factor is not None:
                raise CommandError('Option "[replica-assignment]" can\'t be used with option "[partitions]" '
                                   'or "[replication-factor]"')
        elif not broker:   # (through a broker, the cluster's num.partitions and default.replication.factor)
            if args.partitions is None:
                raise CommandError('Missing required argument "[partitions]"')
            if args.replication_factor is None:
                raise CommandError('Missing required argument "[replication-factor]"')
        if args.if_exists or args.delete_config:
            raise CommandError("--if-exists and --delete-config can't be used with --create")
    elif action == "alter":
        if broker and args.config:
            raise CommandError('Option combination "[bootstrap-server],[config]" can\'t be used with option '
                               '"[alter]" (the kafka-configs CLI supports altering topic configs with a '
                               '--bootstrap-server option)')
        if broker and args.partitions is None:
            raise CommandError('Missing required argument "[partitions]"')
        if args.partitions is None and not args.config and not args.delete_config:
            raise CommandError("--alter needs --partitions, --config or --delete-config")
        if args.replication_factor is not None:
            raise CommandError('Option "[replication-factor]" can\'t be used with option "[alter]"')
    elif args.partitions is not None or args.replication_factor is not None or args.replica_assignment:
        raise CommandError(f"--partitions, --replication-factor and --replica-assignment can't be used with --{action}")
    elif args.config and action != "create":
        raise CommandError(f'Option "[config]" can\'t be used with option "[{action}]"')
    return action


# ---------------------------------------------------------------- actions

def _creation(args: argparse.Namespace) -> tuple[dict[str, str], dict[int, list[int]] | None]:
    """What both modes check and say before creating a topic: its name, the collision and
    message.format.version warnings; its configs and replica assignment."""
    topic_rules.validate_topic_name(args.topic)
    warning = topic_rules.collision_warning(args.topic)
    if warning:
        print(warning)
    config = parse_configs(args.config)
    if "message.format.version" in config:
        print(f"WARNING: The configuration message.format.version={config['message.format.version']} is specified. "
              "This configuration will be ignored if the version is newer than the inter.broker.protocol.version "
              "specified in the broker.")
    return config, parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None


class TopicCreator(Protocol):
    """What creates a topic in either mode: ``AdminZkClient`` or, through a broker,
    ``odradek.client.topics_admin.TopicsAdmin``."""
    def create_topic(self, topic: str, partitions: int | None, replication_factor: int | None,
                     config: dict[str, str], replica_assignment: dict[int, list[int]] | None, /) -> object: ...


def do_create(admin: TopicCreator, args: argparse.Namespace) -> None:
    topic = args.topic
    config, assignment = _creation(args)
    try:
        admin.create_topic(topic, args.partitions, args.replication_factor, config, assignment)
    except KafkaError as exc:
        if args.if_not_exists and exc.code.name == "TOPIC_ALREADY_EXISTS":
            return
        raise
    print(f"Created topic {topic}.")


def do_list(admin: AdminZkClient, args: argparse.Namespace) -> None:
    for topic in select_topics(admin.all_topics(), args.topic, args.exclude_internal):
        print(f"{topic} - marked for deletion" if admin.is_marked_for_deletion(topic) else topic)


def do_delete(admin: AdminZkClient, args: argparse.Namespace) -> None:
    topics = select_topics(admin.all_topics(), args.topic, args.exclude_internal)
    ensure_topics(topics, args.topic, not args.if_exists)
    for topic in topics:
        if topic_rules.is_internal(topic):
            raise CommandError(f"Topic {topic} is a kafka internal topic and is not allowed to be marked for deletion.")
        try:
            admin.delete_topic(topic)
        except TopicAlreadyMarkedForDeletion:
            print(f"Topic {topic} is already marked for deletion.")
            continue
        print(f"Topic {topic} is marked for deletion.")
        print("Note: This will have no impact if delete.topic.enable is not set to true.")


def do_alter(admin: AdminZkClient, args: argparse.Namespace) -> None:
    topics = select_topics(admin.all_topics(), args.topic, args.exclude_internal)
    ensure_topics(topics, args.topic, not args.if_exists)
    to_add = parse_configs(args.config)
    for topic in topics:
        if args.config or args.delete_config:
            print("WARNING: Altering topic configuration from this script has been deprecated and may be removed "
                  "in future releases.")
            print("         Going forward, please use kafka-configs.sh for this functionality")
            config = admin.fetch_topic_config(topic)
            config.update(to_add)
            for name in args.delete_config:
                config.pop(name.strip(), None)
            admin.change_topic_config(topic, config)
            print(f"Updated config for topic {topic}.")
        if args.partitions is not None:
            if topic_rules.is_internal(topic):
                raise CommandError(f"The number of partitions for the internal topic {topic} cannot be changed.")
            print("WARNING: If partitions are increased for a topic that has a key, the partition logic or ordering "
                  "of the messages will be affected")
            existing = admin.topic_assignment(topic)
            new = None
            if args.replica_assignment:
                full = parse_replica_assignment(args.replica_assignment)
                new = {p: r for p, r in full.items() if p >= len(existing)} or None
            admin.add_partitions(topic, args.partitions, new)
            print("Adding partitions succeeded!")


class ShownPartition(Protocol):
    """A partition as --describe shows it (``zk.admin.PartitionDescription``,
    ``client.topics_admin.AdminPartition``)."""
    @property
    def partition(self) -> int: ...
    @property
    def leader(self) -> int | None: ...
    @property
    def replicas(self) -> list[int]: ...
    @property
    def isr(self) -> list[int]: ...


class ShownTopic(Protocol):
    """A topic as --describe shows it (``zk.admin.TopicDescription``, ``client.topics_admin.AdminTopic``)."""
    @property
    def name(self) -> str: ...
    @property
    def topic_id(self) -> str | None: ...
    @property
    def partitions(self) -> Sequence[ShownPartition]: ...
    @property
    def config(self) -> dict[str, str]: ...
    @property
    def marked_for_deletion(self) -> bool: ...


Moving = dict[int, tuple[list[int], list[int]]]   # partition -> (adding, removing) replicas


def _replication_factor(p: ShownPartition, moving: Moving) -> int:
    """kafka-topics' count: while a reassignment moves replicas, those being added do not count."""
    adding, removing = moving.get(p.partition, ([], []))
    if set(p.replicas) & (set(adding) | set(removing)):
        return len(set(p.replicas) - set(adding))
    return len(p.replicas)


def describe_lines(desc: ShownTopic, live: set[int], args: argparse.Namespace, min_isr: int | None,
                   moving: Moving | None = None) -> list[str]:
    """kafka-topics --describe lines for one topic: ``min_isr`` is its min.insync.replicas where
    known, ``moving`` its reassignments in progress (only through a broker)."""
    moving = moving or {}
    partition_filters = (args.under_replicated_partitions or args.unavailable_partitions
                         or args.under_min_isr_partitions or args.at_min_isr_partitions)
    describe_configs = not partition_filters
    describe_partitions = not args.topics_with_overrides
    deletion = "\tMarkedForDeletion: true" if desc.marked_for_deletion else ""
    lines = []
    if describe_configs and (not args.topics_with_overrides or desc.config):
        configs = ",".join(f"{k}={v}" for k, v in desc.config.items())
        topic_id = f"\tTopicId: {desc.topic_id}" if desc.topic_id else ""
        replication_factor = _replication_factor(desc.partitions[0], moving) if desc.partitions else 0
        lines.append(f"Topic: {desc.name}{topic_id}\tPartitionCount: {len(desc.partitions)}"
                     f"\tReplicationFactor: {replication_factor}\tConfigs: {configs}{deletion}")
    if describe_partitions:
        for p in sorted(desc.partitions, key=lambda p: p.partition):
            if describe_configs or _partition_selected(p, live, min_isr, moving, args):
                reassigning = ""
                if p.partition in moving:
                    adding, removing = moving[p.partition]
                    reassigning = (f"\tAdding Replicas: {','.join(map(str, adding))}"
                                   f"\tRemoving Replicas: {','.join(map(str, removing))}")
                lines.append(f"\tTopic: {desc.name}\tPartition: {p.partition}"
                             f"\tLeader: {p.leader if p.leader is not None else 'none'}"
                             f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
                             f"{reassigning}{deletion}")
    return lines


def _partition_selected(p: ShownPartition, live: set[int], min_isr: int | None, moving: Moving,
                        args: argparse.Namespace) -> bool:
    return ((args.under_replicated_partitions and _replication_factor(p, moving) > len(p.isr))
            or (args.unavailable_partitions and (p.leader is None or p.leader not in live))
            or (args.under_min_isr_partitions and (p.leader is None or (min_isr is not None and len(p.isr) < min_isr)))
            or (args.at_min_isr_partitions and min_isr is not None and len(p.isr) == min_isr))


def do_describe(admin: AdminZkClient, args: argparse.Namespace) -> None:
    topics = select_topics(admin.all_topics(), args.topic, args.exclude_internal)
    ensure_topics(topics, args.topic, not args.if_exists)
    live = {b.id for b in admin.live_brokers()}
    for topic in topics:
        try:
            desc = admin.describe_topic(topic)
        except KafkaError:
            print(f"Topic {topic} doesn't exist!")
            continue
        min_isr = int(desc.config["min.insync.replicas"]) if "min.insync.replicas" in desc.config else None
        for line in describe_lines(desc, live, args, min_isr):
            print(line)


HANDLERS = {"create": do_create, "list": do_list, "delete": do_delete, "alter": do_alter, "describe": do_describe}


# ---------------------------------------------------------------- actions through a broker
# (kafka-topics.sh's AdminClientTopicService: ``admin`` is odradek.client.topics_admin.TopicsAdmin)

def list_through_broker(admin: Any, args: argparse.Namespace) -> None:
    print("\n".join(select_topics(admin.topics(), args.topic, args.exclude_internal)))


def delete_through_broker(admin: Any, args: argparse.Namespace) -> None:
    topics = select_topics(admin.topics(), args.topic, args.exclude_internal)
    ensure_topics(topics, args.topic, not args.if_exists)
    _refuse_internal(topics, "Topic {} is a kafka internal topic and is not allowed to be marked for deletion.")
    if topics:
        admin.delete(topics)


def alter_through_broker(admin: Any, args: argparse.Namespace) -> None:
    topics = select_topics(admin.topics(), args.topic, args.exclude_internal)
    ensure_topics(topics, args.topic, not args.if_exists)
    _refuse_internal(topics, "The number of partitions for the internal topic {} cannot be changed.")
    if topics:
        admin.add_partitions(topics, args.partitions, parse_replica_assignment(args.replica_assignment)
                             if args.replica_assignment else None)


def describe_through_broker(admin: Any, args: argparse.Namespace) -> None:
    topics = select_topics(admin.topics(), args.topic, args.exclude_internal)
    ensure_topics(topics, args.topic, not args.if_exists)
    if topics:
        live, described = admin.describe(topics)
        for desc in described:
            for line in describe_lines(desc, live, args, desc.min_isr, desc.moving):
                print(line)


def _refuse_internal(topics: list[str], message: str) -> None:
    """What the ZooKeeper mode refuses, refused through a broker too, before anything changes
    (kafka-topics.sh 2.8 lets DeleteTopics and CreatePartitions reach the broker, which takes
    them: a deleted __consumer_offsets loses every group's offsets)."""
    internal = [t for t in topics if topic_rules.is_internal(t)]
    if internal:
        raise CommandError(message.format(internal[0]))


THROUGH_BROKER = {"create": do_create, "list": list_through_broker, "delete": delete_through_broker,
                  "alter": alter_through_broker, "describe": describe_through_broker}


def through_broker(action: str, args: argparse.Namespace) -> None:
    """Run ``action`` through the broker at --bootstrap-server; a refusal is one CommandError line."""
    backend = importlib.import_module("odradek.client.topics_admin")
    try:
        admin = backend.TopicsAdmin(args.bootstrap_server, args.command_config)
        try:
            THROUGH_BROKER[action](admin, args)
        finally:
            admin.close()
    except KafkaError as exc:   # the broker's message, without the topic name the client puts in front
        message = (exc.message or "").removeprefix(f"{args.topic}: ")
        raise CommandError(message or exc.code.name) from None
    except backend.USER_ERRORS as exc:
        raise CommandError(str(exc)) from None
    finally:
        sys.stdout.flush()


@contextmanager
def zookeeper_session(zookeeper: str | None, timeout: float) -> Iterator[KazooClient]:
    """A kazoo session for one admin command: ZooKeeper found as every tool finds it, kazoo's
    connection chatter silenced, any admin or ZooKeeper error turned into one CommandError
    line, and the session closed afterwards."""
    connect = resolve_zookeeper(zookeeper)
    kazoo_log = logging.getLogger("kazoo")
    if not kazoo_log.handlers:
        kazoo_log.addHandler(logging.NullHandler())
    try:
        zk = open_zk(connect, timeout=timeout)
    except AdminOperationError as exc:
        raise CommandError(str(exc)) from None
    try:
        yield zk
    except KafkaError as exc:
        raise CommandError(exc.message or exc.code.name) from None
    except AdminOperationError as exc:
        raise CommandError(str(exc)) from None
    except KazooException as exc:
        raise CommandError(f"ZooKeeper error: {type(exc).__name__} {exc}".rstrip()) from None
    finally:
        zk.stop()
        zk.close()
        sys.stdout.flush()


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    action = check_args(args)
    if args.bootstrap_server:
        through_broker(action, args)
        return 0
    with zookeeper_session(args.zookeeper, args.zookeeper_timeout) as zk:
        HANDLERS[action](AdminZkClient(zk), args)
    return 0
