"""``odradek leader-election``: preferred replica election through ZooKeeper, or preferred and
unclean elections through a broker (``--bootstrap-server``: ElectLeaders, in
``odradek.client.leader_election_cli``, loaded by name as the console script table loads it).

Invariant: in ZooKeeper mode, like kafka-preferred-replica-election.sh (and kafka-leader-election.sh
--election-type preferred), the tool only writes ``/admin/preferred_replica_election``
(refusing if one is in progress) and lets the controller do the election; it then
waits, on a watch, until the controller deleted the znode and reports from the
state znodes which partitions moved, which already had their preferred leader and
which could not be elected. Every user error is ONE line via ``CommandError``
(exit code 1), never a traceback; failed elections also exit 1.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import threading
import time
from typing import NoReturn

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from odradek.zk.admin import AdminZkClient
from odradek.zk.cli import CommandError
from odradek.zk.znodes import PreferredReplicaElectionZNode

TopicPartition = tuple[str, int]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CommandError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="odradek leader-election",
                description="Move partition leadership back to the preferred replicas "
                            "(like kafka-leader-election.sh --election-type preferred, through ZooKeeper).")
    p.add_argument("--preferred", action="store_true", help="preferred replica election (the only type)")
    p.add_argument("--election-type", metavar="preferred|unclean",
                   help="'preferred', or 'unclean' (with --bootstrap-server)")
    p.add_argument("--topic", help="the topic of the partition to elect (with --partition)")
    p.add_argument("--partition", type=int, help="the partition to elect (with --topic)")
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    p.add_argument("--path-to-json-file", metavar="FILE",
                   help='{"partitions": [{"topic": "t", "partition": 0}, ...]}')
    p.add_argument("--zookeeper", metavar="HOST:PORT[,...]",
                   help="ZooKeeper connect string (default: $ODRADEK_ZOOKEEPER, or the local cluster's)")
    p.add_argument("--zookeeper-timeout", type=float, default=float(os.environ.get("ODRADEK_ZK_TIMEOUT", 10)),
                   metavar="SECONDS", help="give up connecting to ZooKeeper after this long (default 10)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="how long to wait for the controller to finish the election (default 60)")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT",
                   help="go through a broker's admin API (ElectLeaders) instead of ZooKeeper")
    p.add_argument("--admin.config", dest="admin_config", metavar="FILE",
                   help="client properties for --bootstrap-server (security.protocol, ssl.*, sasl.*)")
    return p


def check_args(args: argparse.Namespace) -> None:
    if args.bootstrap_server and args.zookeeper:
        raise CommandError("Only one of --bootstrap-server or --zookeeper must be specified")
    if args.admin_config and not args.bootstrap_server:
        raise CommandError("--admin.config can only be used with --bootstrap-server")
    election = (args.election_type or "").strip().lower()
    if election not in ("", "preferred", "unclean"):
        raise CommandError(f"Unsupported election type {args.election_type!r}: preferred or unclean")
    if election == "unclean" and not args.bootstrap_server:
        raise CommandError("unclean elections go through a broker's admin API: give --bootstrap-server")
    if not (args.preferred or election):
        raise CommandError("Missing required option(s) [election-type]: give --preferred "
                           "(or --election-type preferred)")
    chosen = [bool(args.all_topic_partitions), args.topic is not None, args.path_to_json_file is not None]
    if sum(chosen) != 1:
        raise CommandError("One and only one of the following options is required: "
                           "all-topic-partitions, topic, path-to-json-file")
    if args.topic is not None and args.partition is None:
        raise CommandError("Missing required option(s) [partition]")
    if args.partition is not None and args.topic is None:
        raise CommandError("Option [partition] is only allowed with [topic]")


def partitions_from_json(path: str) -> list[TopicPartition]:
    """The partitions of a kafka-leader-election / preferred-replica-election JSON file."""
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
        parts = [(str(e["topic"]), int(e["partition"])) for e in obj["partitions"]]
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise CommandError(f"{path} is not a valid partition list "
                           f'({{"partitions": [{{"topic": "t", "partition": 0}}]}}): {exc}') from None
    dups = sorted({tp for tp in parts if parts.count(tp) > 1})
    if dups:
        raise CommandError("Replica election data contains duplicate partitions: "
                           + ", ".join(_name(tp) for tp in dups))
    return parts


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def requested_partitions(admin: AdminZkClient, args: argparse.Namespace) -> list[TopicPartition]:
    if args.all_topic_partitions:
        return [(t, p) for t in admin.all_topics() for p in sorted(admin.topic_assignment(t))]
    if args.topic is not None:
        return [(args.topic, args.partition)]
    return partitions_from_json(args.path_to_json_file)


def wait_until_deleted(zk: KazooClient, path: str, timeout: float) -> bool:
    """Block until ``path`` does not exist (a watch wakes us), or False after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        changed = threading.Event()
        if zk.exists(path, watch=lambda _e: changed.set()) is None:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        changed.wait(left)


def run(zk: KazooClient, args: argparse.Namespace) -> int:
    admin = AdminZkClient(zk)
    requested = requested_partitions(admin, args)
    assignments: dict[str, dict[int, list[int]]] = {}
    unknown: list[TopicPartition] = []
    known: list[TopicPartition] = []
    for tp in requested:
        if tp[0] not in assignments:
            try:
                assignments[tp[0]] = admin.topic_assignment(tp[0])
            except Exception:
                assignments[tp[0]] = {}
        (known if tp[1] in assignments[tp[0]] else unknown).append(tp)
    preferred = {tp: assignments[tp[0]][tp[1]][0] for tp in known}
    before = {tp: admin.partition_state(*tp)[0] for tp in known}
    already = [tp for tp in known if before[tp] == preferred[tp]]
    todo = [tp for tp in known if tp not in already]
    if todo:
        path = PreferredReplicaElectionZNode.path
        try:
            zk.create(path, PreferredReplicaElectionZNode.encode(todo), makepath=True)
        except NodeExistsError:
            try:
                pending = PreferredReplicaElectionZNode.decode(zk.get(path)[0])
            except (NoNodeError, ValueError, KeyError):
                pending = []
            raise CommandError("Preferred replica leader election currently in progress for "
                               f"{', '.join(_name(tp) for tp in pending) or 'some partitions'}. "
                               "Aborting operation") from None
        if not wait_until_deleted(zk, path, args.timeout):
            raise CommandError(f"timed out after {args.timeout:g}s waiting for the controller to finish the "
                               f"election ({path} is still there; is a controller running?)")
    live = {b.id for b in admin.live_brokers()}
    moved, failed = [], []
    for tp in todo:
        leader, isr, _ = admin.partition_state(*tp)
        if leader == preferred[tp]:
            moved.append(tp)
        elif preferred[tp] not in live:
            failed.append((tp, f"preferred replica {preferred[tp]} is not alive"))
        elif preferred[tp] not in isr:
            failed.append((tp, f"preferred replica {preferred[tp]} is not in the ISR "
                               f"[{','.join(map(str, isr))}]"))
        else:
            failed.append((tp, f"the leader is still {leader if leader is not None else 'none'}"))
    failed += [(tp, "This server does not host this topic-partition.") for tp in unknown]
    return report("PREFERRED", moved, already, failed)


def report(election: str, moved: list[TopicPartition], already: list[TopicPartition],
           failed: list[tuple[TopicPartition, str]]) -> int:
    """kafka-leader-election.sh's report (both modes); CommandError if some partition failed."""
    if moved:
        print(f"Successfully completed leader election ({election}) for partitions "
              + ", ".join(_name(tp) for tp in moved))
    if already:
        print("Valid replica already elected for partitions " + ", ".join(_name(tp) for tp in already))
    for tp, reason in failed:
        print(f"Error completing leader election ({election}) for partition: {_name(tp)}: {reason}")
    if failed:
        raise CommandError(f"{len(failed)} replica(s) could not be elected")
    if not (moved or already):
        print("No partitions to elect.")
    return 0


def main(argv: list[str]) -> int:
    from odradek.zk.topics_cli import zookeeper_session

    args = build_parser().parse_args(argv)
    check_args(args)
    if args.bootstrap_server:
        partitions = (None if args.all_topic_partitions else [(args.topic, args.partition)]
                      if args.topic is not None else partitions_from_json(args.path_to_json_file))
        admin_mode = importlib.import_module("odradek.client.leader_election_cli")
        return int(admin_mode.run(args, (args.election_type or "preferred").strip().lower(), partitions, report))
    with zookeeper_session(args.zookeeper, args.zookeeper_timeout) as zk:
        return run(zk, args)
