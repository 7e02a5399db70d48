"""``odradek reassign-partitions``: kafka-reassign-partitions.sh of Kafka 2.8 (KIP-455).

Invariant: one tool, two ways to the cluster, the same plans and the same report lines as
Kafka's ReassignPartitionsCommand: ``--bootstrap-server`` goes through a broker's admin API
(AlterPartitionReassignments, ListPartitionReassignments, IncrementalAlterConfigs, and for the
``log_dirs`` of a reassignment AlterReplicaLogDirs and DescribeLogDirs; the backend in
``odradek.client.reassign_partitions_admin``, loaded by name as the console script table loads
it), ``--zookeeper`` (deprecated in Kafka 2.8 too) writes /admin/reassign_partitions and the
throttle configs itself and lets the controller act (it refuses log dir moves, as Kafka).
``--generate`` only prints; ``--execute`` sets the throttles it is given (leader throttles on the
moving partitions' current replicas, follower throttles on their new ones, the rate on every
broker involved; the log dir move rate on every broker with a move) before it starts the
reassignments, then starts the log dir moves, retrying those whose replica is not on its broker
yet until ``--timeout``; ``--verify`` reports each partition and each log dir move and, once
none is moving, removes every throttle (unless ``--preserve-throttles``). Every user error is ONE line via ``CommandError``
(exit code 1), never a traceback; nothing is changed when the arguments or the JSON are bad.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import time
from typing import Any, Iterable, NoReturn, Protocol

from kazoo.exceptions import NodeExistsError, NoNodeError

from odradek.protocol.errors import KafkaError
from odradek.zk import assignment as assign
from odradek.zk.admin import AdminOperationError, AdminZkClient, open_zk
from odradek.zk.cli import CommandError
from odradek.zk.config_entities import BROKERS, TOPICS, EntityConfigs
from odradek.zk.znodes import ReassignPartitionsZNode, TopicZNode

TopicPartition = tuple[str, int]
Replica = tuple[str, int, int]    # topic, partition, broker (Kafka's TopicPartitionReplica)
Ongoing = dict[TopicPartition, tuple[list[int], list[int], list[int]]]   # replicas, adding, removing

RATE_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LOG_DIR_RATE_CONFIG = "replica.alter.log.dirs.io.max.bytes.per.second"
ANY_LOG_DIR = "any"
NEEDS_BOOTSTRAP = "bootstrap-server needs to be provided when replica reassignments are present."
REPLICA_CONFIGS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
EXISTING = ("Cannot execute because there is an existing partition assignment.  Use --additional to override "
            "this and create a new partition assignment in addition to the existing one. The --additional flag "
            "can also be used to change the throttle by resubmitting the current reassignment.")
VERIFY_WARNING = ("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
                  "throttle is removed.")


class Backend(Protocol):
    """The cluster as the tool sees it, the same for both modes."""
    def brokers(self) -> list[int]: ...
    def topic_assignments(self, topics: list[str]) -> dict[str, dict[int, list[int]]]: ...
    def ongoing(self) -> Ongoing: ...
    def alter(self, reassignments: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, str]: ...
    def set_configs(self, entity_type: str, name: str, configs: dict[str, str], delete: Iterable[str]) -> None: ...
    def alter_log_dirs(self, moves: dict[Replica, str]) -> dict[Replica, str | None]: ...
    def replica_log_dirs(self, replicas: list[Replica]) -> dict[Replica, tuple[str | None, str | None]]: ...
    def close(self) -> None: ...


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CommandError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="odradek reassign-partitions",
                description="Move partitions' replicas between brokers (like kafka-reassign-partitions.sh).")
    for action, what in (("generate", "propose an assignment of --topics-to-move-json-file onto --broker-list"),
                         ("execute", "start the reassignment of --reassignment-json-file"),
                         ("verify", "report the reassignment of --reassignment-json-file; clear throttles when done"),
                         ("cancel", "cancel the reassignments of --reassignment-json-file (with --bootstrap-server)"),
                         ("list", "list the ongoing reassignments (with --bootstrap-server)")):
        p.add_argument(f"--{action}", action="store_true", help=what)
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="go through a broker's admin API")
    p.add_argument("--command-config", metavar="FILE", help="client properties for --bootstrap-server")
    p.add_argument("--zookeeper", metavar="HOST:PORT[,...]", help="go through ZooKeeper (deprecated, as in Kafka)")
    p.add_argument("--zookeeper-timeout", type=float, default=float(os.environ.get("ODRADEK_ZK_TIMEOUT", 10)),
                   metavar="SECONDS", help="give up connecting to ZooKeeper after this long (default 10)")
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help='{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}')
    p.add_argument("--topics-to-move-json-file", metavar="FILE", help='{"version":1,"topics":[{"topic":"t"}]}')
    p.add_argument("--broker-list", metavar="1,2,3", help="the brokers --generate may place replicas on")
    p.add_argument("--disable-rack-aware", action="store_true", help="(odradek's placement ignores racks)")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES/S",
                   help="replication throttle for the moving replicas during --execute")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1, metavar="BYTES/S",
                   help="rate of the log dir moves (between a broker's log dirs) during --execute")
    p.add_argument("--additional", action="store_true", help="--execute while other reassignments run")
    p.add_argument("--preserve-throttles", action="store_true", help="--verify and --cancel keep the throttles")
    p.add_argument("--timeout", type=int, default=10000, metavar="MS",
                   help="how long --execute retries starting log dir moves whose replica is not there yet")
    return p


def check_args(args: argparse.Namespace) -> str:
    actions = [a for a in ("generate", "execute", "verify", "cancel", "list") if getattr(args, a)]
    if len(actions) != 1:
        raise CommandError("Command must include exactly one action: --generate, --execute, --verify, --cancel, "
                           "or --list")
    action = actions[0]
    if bool(args.bootstrap_server) == bool(args.zookeeper):
        raise CommandError("Please specify either --bootstrap-server or --zookeeper" if not args.bootstrap_server
                           else "Only one of --bootstrap-server or --zookeeper must be specified")
    if args.command_config and not args.bootstrap_server:
        raise CommandError("--command-config can only be used with --bootstrap-server")
    if args.zookeeper and action in ("cancel", "list"):
        raise CommandError(f"--{action} is only supported with --bootstrap-server")
    if args.zookeeper and args.additional:
        raise CommandError("--additional is only supported with --bootstrap-server")
    needs = {"generate": ("topics_to_move_json_file", "broker_list"), "execute": ("reassignment_json_file",),
             "verify": ("reassignment_json_file",), "cancel": ("reassignment_json_file",), "list": ()}[action]
    missing = [n for n in needs if not getattr(args, n)]
    if missing:
        raise CommandError(f"Missing required argument: --{missing[0].replace('_', '-')}")
    if args.throttle >= 0 and action != "execute":
        raise CommandError("--throttle is only used with --execute")
    if args.replica_alter_log_dirs_throttle >= 0 and action != "execute":
        raise CommandError("--replica-alter-log-dirs-throttle is only used with --execute")
    return action


# ------------------------------------------------------------ JSON files

def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CommandError(f"{path} is not JSON: {exc}") from None


def parse_reassignment(path: str) -> dict[TopicPartition, list[int]]:
    """The partitions and target replicas of a reassignment JSON file (Kafka's checks)."""
    return parse_reassignment_data(path)[0]


def parse_reassignment_data(path: str) -> tuple[dict[TopicPartition, list[int]], dict[Replica, str]]:
    """The partitions and target replicas of a reassignment JSON file, and the replicas whose
    ``log_dirs`` entry names a dir rather than "any" (Kafka's checks)."""
    obj = _read_json(path)
    try:
        entries = [((str(e["topic"]), int(e["partition"])), [int(b) for b in e["replicas"]],
                    e.get("log_dirs")) for e in obj["partitions"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise CommandError(f"{path} is not a reassignment ({{\"version\":1,\"partitions\":[{{\"topic\":..,"
                           f"\"partition\":..,\"replicas\":[..]}}]}}): {exc!r}") from None
    if not entries:
        raise CommandError("Partition reassignment list cannot be empty")
    parts = [tp for tp, _, _ in entries]
    dups = sorted({tp for tp in parts if parts.count(tp) > 1})
    if dups:
        raise CommandError("Partition reassignment contains duplicate topic partitions: " + ",".join(_name(tp) for tp in dups))
    for tp, replicas, log_dirs in entries:
        if len(set(replicas)) != len(replicas):
            raise CommandError(f"Partition replica lists may not contain duplicate entries: {_name(tp)} contains "
                               f"{','.join(map(str, replicas))}")
        if not replicas:
            raise CommandError(f"Partition {_name(tp)} has an empty replica list")
        if log_dirs is not None and (not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs)):
            raise CommandError(f"{path}: the log_dirs of {_name(tp)} must be a list of strings")
        if log_dirs is not None and len(log_dirs) != len(replicas):
            raise CommandError(f"Size of replicas list {_seq(replicas)} is different from size of log dirs list "
                               f"{_seq(log_dirs)} for partition {_name(tp)}")
    moves = {(tp[0], tp[1], b): d for tp, replicas, log_dirs in entries
             for b, d in zip(replicas, log_dirs or ()) if d != ANY_LOG_DIR}
    return {tp: replicas for tp, replicas, _ in entries}, moves


def _seq(items: Iterable[Any]) -> str:
    return f"List({', '.join(map(str, items))})"


def _replica(r: Replica) -> str:
    return f"{r[2]}-{r[0]}-{r[1]}"


def _replicas(rs: Iterable[Replica]) -> str:
    return ",".join(_replica(r) for r in sorted(rs, key=lambda r: (r[2], r[0], r[1])))


def reassignment_json(assignment: dict[TopicPartition, list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _names(tps: Iterable[TopicPartition]) -> str:
    return ",".join(_name(tp) for tp in sorted(tps))


# ------------------------------------------------------------ actions

def generate(backend: Backend, topics_file: str, broker_list: str) -> int:
    obj = _read_json(topics_file)
    try:
        topics = [str(e["topic"]) for e in obj["topics"]]
    except (KeyError, TypeError) as exc:
        raise CommandError(f"{topics_file} is not a topic list ({{\"version\":1,\"topics\":[{{\"topic\":..}}]}}): "
                           f"{exc!r}") from None
    dups = sorted({t for t in topics if topics.count(t) > 1})
    if dups:
        raise CommandError(f"List of topics to reassign contains duplicate entries: {','.join(dups)}")
    try:
        brokers = [int(b) for b in broker_list.split(",")]
    except ValueError:
        raise CommandError(f"--broker-list {broker_list!r} is not a comma-separated list of broker ids") from None
    dup_brokers = sorted({b for b in brokers if brokers.count(b) > 1})
    if dup_brokers:
        raise CommandError(f"Broker list contains duplicate entries: {','.join(map(str, dup_brokers))}")
    unknown = sorted(set(brokers) - set(backend.brokers()))
    if unknown:
        raise CommandError(f"Unknown broker id(s): {','.join(map(str, unknown))}")
    current = backend.topic_assignments(topics)
    proposed: dict[TopicPartition, list[int]] = {}
    for topic, parts in current.items():
        rf = len(next(iter(parts.values())))
        try:
            placed = assign.assign_replicas_to_brokers(len(parts), rf, sorted(brokers))
        except KafkaError as e:
            raise CommandError(f"cannot place {topic}: {e.message}") from None
        proposed.update({(topic, p): placed[i] for i, p in enumerate(sorted(parts))})
    print("Current partition replica assignment")
    print(reassignment_json({(t, p): r for t, parts in current.items() for p, r in parts.items()}))
    print()
    print("Proposed partition reassignment configuration")
    print(reassignment_json(proposed))
    return 0


def execute(backend: Backend, path: str, throttle: int, additional: bool, log_dir_throttle: int = -1,
            timeout_ms: int = 10000) -> int:
    proposed, moves = parse_reassignment_data(path)
    ongoing = backend.ongoing()
    if ongoing and not additional:
        raise CommandError(EXISTING)
    unknown = sorted({b for r in proposed.values() for b in r} - set(backend.brokers()))
    if unknown:
        raise CommandError(f"Unknown broker id {unknown[0]}")
    current = _current(backend, proposed)
    print("Current partition replica assignment\n")
    print(reassignment_json(current))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0 or log_dir_throttle >= 0:
        print(VERIFY_WARNING)
    if throttle >= 0:
        _set_throttles(backend, proposed, current, ongoing, throttle)
        print(f"The inter-broker throttle limit was set to {throttle} B/s")
    if log_dir_throttle >= 0:
        for b in sorted({r[2] for r in moves}):
            backend.set_configs(BROKERS, str(b), {LOG_DIR_RATE_CONFIG: str(log_dir_throttle)}, ())
        print(f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s")
    errors = backend.alter(dict(proposed))
    if errors:
        raise CommandError("Error reassigning partition(s): " + "; ".join(
            f"{_name(tp)}: {errors[tp]}" for tp in sorted(errors)))
    print(f"Successfully started partition reassignment{'' if len(proposed) == 1 else 's'} for {_names(proposed)}")
    if moves:
        _execute_moves(backend, moves, timeout_ms)
    return 0


def _execute_moves(backend: Backend, moves: dict[Replica, str], timeout_ms: int) -> None:
    """Kafka's executeMoves: AlterReplicaLogDirs until every move started; a replica not on its
    broker yet (REPLICA_NOT_AVAILABLE: a reassignment is bringing it) is asked again until
    ``timeout_ms``; its broker keeps the dir for the replica's creation meanwhile."""
    deadline = time.monotonic() + timeout_ms / 1000.0
    pending = dict(moves)
    while True:
        results = backend.alter_log_dirs(pending)
        failed = {r: e for r, e in results.items() if e is not None and e != "REPLICA_NOT_AVAILABLE"}
        if failed:
            r = min(failed, key=lambda r: (r[2], r[0], r[1]))
            raise CommandError(f"Failed to alter dir for {_replica(r)}: {failed[r]}")
        started = [r for r, e in results.items() if e is None and r in pending]
        if started:
            print(f"Successfully started log directory move{'' if len(started) == 1 else 's'} for: {_replicas(started)}")
        for r in started:
            del pending[r]
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise CommandError(f"Timed out before log directory move{'' if len(pending) == 1 else 's'} could be "
                               f"started for: {_replicas(pending)}")
        time.sleep(0.1)


def _current(backend: Backend, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, list[int]]:
    wanted = sorted(set(partitions))
    assignments = backend.topic_assignments(sorted({t for t, _ in wanted}))
    missing = [tp for tp in wanted if tp[1] not in assignments.get(tp[0], {})]
    if missing:
        raise CommandError(f"Unable to find partition: {_name(missing[0])}")
    return {tp: assignments[tp[0]][tp[1]] for tp in wanted}


def _set_throttles(backend: Backend, proposed: dict[TopicPartition, list[int]],
                   current: dict[TopicPartition, list[int]], ongoing: Ongoing, rate: int) -> None:
    """Kafka's modifyReassignmentThrottle: per topic, leader throttles on the moving partitions'
    source replicas and follower throttles on their new ones; the rate on every broker involved."""
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    brokers: set[int] = set()
    for tp, target in proposed.items():
        sources = current[tp]
        if tp in ongoing:   # a reassignment in progress moves from its origin replicas
            replicas, adding, _ = ongoing[tp]
            sources = [b for b in replicas if b not in adding]
        if sources == target:
            continue
        leader.setdefault(tp[0], set()).update(f"{tp[1]}:{b}" for b in sources)
        follower.setdefault(tp[0], set()).update(f"{tp[1]}:{b}" for b in target if b not in sources)
        brokers.update(sources, target)
    for topic in sorted(leader):
        backend.set_configs(TOPICS, topic, {REPLICA_CONFIGS[0]: ",".join(sorted(leader[topic])),
                                            REPLICA_CONFIGS[1]: ",".join(sorted(follower[topic]))}, ())
    for b in sorted(brokers):
        backend.set_configs(BROKERS, str(b), {name: str(rate) for name in RATE_CONFIGS}, ())


def verify(backend: Backend, path: str, preserve_throttles: bool) -> int:
    targets, moves = parse_reassignment_data(path)
    ongoing = backend.ongoing()
    current = _current(backend, targets)
    lines = ["Status of partition reassignment:"]
    moving = False
    for tp in sorted(targets):
        if tp in ongoing:
            moving = True
            lines.append(f"Reassignment of partition {_name(tp)} is still in progress.")
        elif current[tp] == targets[tp]:
            lines.append(f"Reassignment of partition {_name(tp)} is complete.")
        else:
            lines.append(f"There is no active reassignment of partition {_name(tp)}, but replica set is "
                         f"{','.join(map(str, current[tp]))} rather than {','.join(map(str, targets[tp]))}.")
    print("\n".join(lines))
    if moves and not _verify_moves(backend, moves):
        moving = True
    if not moving and not preserve_throttles:
        _clear_throttles(backend, targets)
    return 0


def _verify_moves(backend: Backend, moves: dict[Replica, str]) -> bool:
    """Kafka's verifyReplicaMoves: one line per log dir move; True when none is still moving."""
    found = backend.replica_log_dirs(sorted(moves))
    lines = []
    done = True
    for r in sorted(moves, key=lambda r: (r[2], r[0], r[1])):
        target = moves[r]
        current, future = found.get(r, (None, None))
        if current is None:
            lines.append(f"Partition {r[0]}-{r[1]} is not found in any live log dir on broker {r[2]}. "
                         "There is likely an offline log directory on the broker.")
        elif future is not None:
            done = False
            lines.append(f"Reassignment of replica {_replica(r)} is still in progress." if future == target else
                         f"Partition {r[0]}-{r[1]} on broker {r[2]} is being moved to log dir {future} "
                         f"instead of {target}.")
        elif current == target:
            lines.append(f"Reassignment of replica {_replica(r)} completed successfully.")
        else:
            lines.append(f"Partition {r[0]}-{r[1]} on broker {r[2]} is not being moved from log dir {current} "
                         f"to {target}.")
    print("\n".join(lines))
    return done


def _clear_throttles(backend: Backend, targets: dict[TopicPartition, list[int]]) -> None:
    """Kafka's clearAllThrottles: the rates on every live broker and every target replica's broker,
    the replica lists on every topic of the file."""
    brokers = sorted(set(backend.brokers()) | {b for r in targets.values() for b in r})
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} {','.join(map(str, brokers))}")
    for b in brokers:
        backend.set_configs(BROKERS, str(b), {}, RATE_CONFIGS + (LOG_DIR_RATE_CONFIG,))
    topics = sorted({t for t, _ in targets})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}")
    for t in topics:
        backend.set_configs(TOPICS, t, {}, REPLICA_CONFIGS)


def cancel(backend: Backend, path: str, preserve_throttles: bool) -> int:
    targets = parse_reassignment(path)
    moving = sorted(tp for tp in backend.ongoing() if tp in targets)
    errors = backend.alter({tp: None for tp in moving}) if moving else {}
    if errors:
        raise CommandError(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} for: " + "; ".join(
            f"{_name(tp)}: {errors[tp]}" for tp in sorted(errors)))
    print(f"Successfully cancelled partition reassignment{'' if len(moving) == 1 else 's'} for: {_names(moving)}")
    if not preserve_throttles:
        _clear_throttles(backend, targets)
    return 0


def list_ongoing(backend: Backend) -> int:
    ongoing = backend.ongoing()
    if not ongoing:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for tp, (replicas, adding, removing) in sorted(ongoing.items()):
        print(f"{_name(tp)}: replicas: {','.join(map(str, replicas))}. adding: {','.join(map(str, adding))}. "
              f"removing: {','.join(map(str, removing))}.")
    return 0


# ------------------------------------------------------------ the ZooKeeper backend

class ZkBackend:
    """--zookeeper: /admin/reassign_partitions for the controller, configs written directly."""

    def __init__(self, connect: str, timeout: float):
        try:
            self.zk = open_zk(connect, timeout=timeout)
        except AdminOperationError as exc:
            raise CommandError(str(exc)) from None
        self.admin = AdminZkClient(self.zk)
        self.configs = EntityConfigs(self.admin)

    def brokers(self) -> list[int]:
        return [b.id for b in self.admin.live_brokers()]

    def topic_assignments(self, topics: list[str]) -> dict[str, dict[int, list[int]]]:
        out = {}
        for t in topics:
            try:
                out[t] = self.admin.topic_assignment(t)
            except KafkaError:
                raise CommandError(f"Topic {t} not found") from None
        return out

    def ongoing(self) -> Ongoing:
        """Reassignments in the topics' znodes, then the legacy /admin/reassign_partitions (a
        topic deleted meanwhile, or the node removed as the controller completes it, is none)."""
        out: Ongoing = {}
        for t in self.admin.all_topics():
            data = self._get(TopicZNode.path(t))
            for p, ra in (TopicZNode.decode_full(data) if data is not None else {}).items():
                if ra.is_being_reassigned:
                    out[(t, p)] = (ra.replicas, ra.adding_replicas, ra.removing_replicas)
        legacy = self._get(ReassignPartitionsZNode.path)
        if legacy is not None:
            for tp, replicas in ReassignPartitionsZNode.decode(legacy).items():
                out.setdefault(tp, (replicas, [], []))
        return out

    def _get(self, path: str) -> bytes | None:
        try:
            return self.zk.get(path)[0]
        except NoNodeError:
            return None

    def alter(self, reassignments: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, str]:
        try:
            self.zk.create(ReassignPartitionsZNode.path, ReassignPartitionsZNode.encode(
                {tp: r for tp, r in reassignments.items() if r is not None}), makepath=True)
        except NodeExistsError:
            raise CommandError("There is an existing assignment running.") from None
        return {}

    def set_configs(self, entity_type: str, name: str, configs: dict[str, str], delete: Iterable[str]) -> None:
        current = self.configs.fetch(entity_type, name)
        new = {k: v for k, v in current.items() if k not in set(delete)}
        new.update(configs)
        if new != current:
            try:
                self.configs.change(entity_type, name, new)
            except KafkaError as e:
                raise CommandError(e.message or e.code.name) from None

    def alter_log_dirs(self, moves: dict[Replica, str]) -> dict[Replica, str | None]:
        raise CommandError(NEEDS_BOOTSTRAP)

    def replica_log_dirs(self, replicas: list[Replica]) -> dict[Replica, tuple[str | None, str | None]]:
        raise CommandError(NEEDS_BOOTSTRAP)

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    action = check_args(args)
    if args.zookeeper and action in ("execute", "verify") and parse_reassignment_data(args.reassignment_json_file)[1]:
        raise CommandError(NEEDS_BOOTSTRAP)
    if args.bootstrap_server:
        module = importlib.import_module("odradek.client.reassign_partitions_admin")
        backend: Backend = module.open_backend(args.bootstrap_server, args.command_config, CommandError)
    else:
        backend = ZkBackend(args.zookeeper, args.zookeeper_timeout)
    try:
        if action == "generate":
            return generate(backend, args.topics_to_move_json_file, args.broker_list)
        if action == "execute":
            return execute(backend, args.reassignment_json_file, args.throttle, args.additional,
                           args.replica_alter_log_dirs_throttle, args.timeout)
        if action == "verify":
            return verify(backend, args.reassignment_json_file, args.preserve_throttles)
        if action == "cancel":
            return cancel(backend, args.reassignment_json_file, args.preserve_throttles)
        return list_ongoing(backend)
    finally:
        backend.close()
