"""Topic administration through ZooKeeper, mirroring Kafka 2.8's AdminZkClient.

Invariant: writes are exactly Kafka's, in Kafka's order: create writes
``/config/topics/<t>`` THEN creates ``/brokers/topics/<t>`` (the controller
reacts to the latter); delete only creates ``/admin/delete_topics/<t>``;
a config change writes ``/config/topics/<t>`` then a sequential
``/config/changes/config_change_``. JSON comes from ``odradek.zk.znodes``.
Blocking (kazoo); errors are ``KafkaError``s with Kafka's codes, or
``AdminOperationError`` for the few Kafka errors without a code.
"""
from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk import assignment as assign
from odradek.zk import topics as topic_rules
from odradek.zk.security import ZkSecurityError, new_kazoo, start_kazoo, zk_client_security
from odradek.zk.znodes import (BrokerIdsZNode, BrokerIdZNode, BrokerInfo, ConfigEntityChangeNotificationSequenceZNode,
                               ConfigEntityChangeNotificationZNode, ConfigEntityZNode, ControllerZNode,
                               DeleteTopicsTopicZNode, TopicPartitionStateZNode, TopicsZNode, TopicZNode,
                               new_topic_id)

TOPIC = "topics"  # the config entity type of topics


def plan_new_partitions(topic: str, existing: Mapping[int, Sequence[int]], count: int,
                        assignments: Sequence[Sequence[int]] | None,
                        broker_ids: Sequence[int]) -> dict[int, list[int]]:
    """The replicas of the partitions a CreatePartitions request adds (Kafka's
    ZkAdminManager.createPartitions + AdminZkClient.createNewPartitionsAssignment checks).

    ``assignments`` (the request's manual assignment, one replica list per NEW partition) or
    None for Kafka's rack-unaware placement; ``broker_ids`` are the registered brokers.
    """
    if not existing:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
    topic_rules.check_partition_count(count)  # before any assignment is built
    old = len(existing)
    increment = count - old
    if increment < 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                         f"Topic currently has {old} partitions, which is higher than the requested {count}.")
    if increment == 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
    if 0 not in existing:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                         f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is missing.")
    rf = len(existing[0])
    brokers = sorted(broker_ids)
    if assignments is None:
        start = assign.start_index_for_new_partitions(brokers, existing[0][0])
        return assign.assign_replicas_to_brokers(increment, rf, brokers, start, old)
    lists = [[int(b) for b in r] for r in assignments]
    unknown = sorted({b for r in lists for b in r} - set(brokers))
    if unknown:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
    if len(lists) != increment:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Increasing the number of partitions by {increment} but {len(lists)} "
                         "assignments provided.")
    new = {old + i: r for i, r in enumerate(lists)}
    for p, r in new.items():
        if not r:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Cannot have replication factor of 0 for partition id {p}.")
        if len(set(r)) != len(r):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Duplicate brokers not allowed in replica assignment: {', '.join(map(str, r))} "
                             f"for partition id {p}.")
        if len(r) != rf:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Inconsistent replication factor between partitions, partition 0 has {rf} "
                             f"while partition {p} has {len(r)}.")
    return new


class AdminOperationError(Exception):
    """A Kafka admin error that has no protocol error code (AdminOperationException)."""


class TopicAlreadyMarkedForDeletion(AdminOperationError):
    """The topic's /admin/delete_topics/<t> node already exists."""


@dataclass
class PartitionDescription:
    partition: int
    replicas: list[int]
    leader: int | None  # None: no state znode yet, or leader -1
    isr: list[int]
    leader_epoch: int = -1

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    def unavailable(self, live_broker_ids: set[int]) -> bool:
        return self.leader is None or self.leader not in live_broker_ids


@dataclass
class TopicDescription:
    name: str
    partitions: list[PartitionDescription]
    config: dict[str, str] = field(default_factory=dict)
    marked_for_deletion: bool = False
    topic_id: str | None = None

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass
class TopicListing:
    name: str
    marked_for_deletion: bool = False


class AdminZkClient:
    """Kafka's AdminZkClient over a started ``KazooClient``. With ``read_timeout`` (seconds) a
    read that gets no answer in time raises kazoo's ``KazooTimeoutError`` (a reader that must
    keep going while ZooKeeper is down); without, a read waits for ZooKeeper as kazoo does."""

    def __init__(self, zk: KazooClient, read_timeout: float | None = None):
        self.zk = zk
        self.read_timeout = read_timeout

    def _get(self, path: str) -> tuple[bytes, ZnodeStat]:
        return self.zk.get_async(path).get(timeout=self.read_timeout)

    def _children(self, path: str) -> list[str]:
        return self.zk.get_children_async(path).get(timeout=self.read_timeout)

    def _exists(self, path: str) -> ZnodeStat | None:
        return self.zk.exists_async(path).get(timeout=self.read_timeout)

    # ------------------------------------------------------------- reads
    def live_brokers(self) -> list[BrokerInfo]:
        """Registered brokers (/brokers/ids), sorted by id."""
        try:
            ids = sorted(int(c) for c in self._children(BrokerIdsZNode.path))
        except NoNodeError:
            return []
        brokers = []
        for broker_id in ids:
            try:
                data, stat = self._get(BrokerIdZNode.path(broker_id))
            except NoNodeError:
                continue  # went away between the listing and the read
            brokers.append(BrokerIdZNode.decode(broker_id, data, stat.czxid))
        return brokers

    def controller_id(self) -> int | None:
        try:
            data, _ = self._get(ControllerZNode.path)
        except NoNodeError:
            return None
        return ControllerZNode.decode(data)

    def all_topics(self) -> list[str]:
        try:
            return sorted(self._children(TopicsZNode.path))
        except NoNodeError:
            return []

    def topic_exists(self, topic: str) -> bool:
        return self._exists(TopicZNode.path(topic)) is not None

    def is_marked_for_deletion(self, topic: str) -> bool:
        return self._exists(DeleteTopicsTopicZNode.path(topic)) is not None

    def list_topics(self) -> list[TopicListing]:
        return [TopicListing(t, self.is_marked_for_deletion(t)) for t in self.all_topics()]

    def topic_assignment(self, topic: str) -> dict[int, list[int]]:
        """The replica assignment of /brokers/topics/<t>; UNKNOWN_TOPIC_OR_PARTITION if absent."""
        return TopicZNode.decode(self._get_topic(topic)[0])

    def fetch_topic_config(self, topic: str) -> dict[str, str]:
        try:
            data, _ = self._get(ConfigEntityZNode.path(TOPIC, topic))
        except NoNodeError:
            return {}
        return ConfigEntityZNode.decode(data)

    def partition_state(self, topic: str, partition: int) -> tuple[int | None, list[int], int]:
        """(leader or None, isr, leader_epoch) from the state znode; (None, [], -1) if none yet."""
        try:
            data, stat = self._get(TopicPartitionStateZNode.path(topic, partition))
        except NoNodeError:
            return None, [], -1
        if not data:
            return None, [], -1
        state = TopicPartitionStateZNode.decode(data, stat.version)
        return (None if state.leader < 0 else state.leader), state.isr, state.leader_epoch

    def describe_topic(self, topic: str) -> TopicDescription:
        data, _ = self._get_topic(topic)
        partitions = []
        for p, replicas in sorted(TopicZNode.decode(data).items()):
            leader, isr, epoch = self.partition_state(topic, p)
            partitions.append(PartitionDescription(p, replicas, leader, isr, epoch))
        raw = json.loads(data.decode()) if data else {}
        return TopicDescription(topic, partitions, self.fetch_topic_config(topic),
                                self.is_marked_for_deletion(topic), raw.get("topic_id"))

    # ------------------------------------------------------------- writes
    def create_topic(self, topic: str, partitions: int | None, replication_factor: int | None,
                     config: Mapping[str, str] | None = None,
                     replica_assignment: Mapping[int, Sequence[int]] | None = None) -> dict[int, list[int]]:
        """Create a topic; returns its assignment. ``replica_assignment`` overrides partitions/RF."""
        topic_rules.validate_topic_name(topic)
        config = {k: str(v) for k, v in (config or {}).items()}
        topic_rules.validate_topic_config(config)
        if replica_assignment is None:
            if partitions is None or replication_factor is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "partitions and replication factor are required without a replica assignment")
            broker_ids = [b.id for b in self.live_brokers()]
            replica_assignment = assign.assign_replicas_to_brokers(partitions, replication_factor, broker_ids)
        assignment = {int(p): [int(b) for b in r] for p, r in replica_assignment.items()}
        self.create_topic_with_assignment(topic, config, assignment)
        return assignment

    def validate_topic_create(self, topic: str, assignment: Mapping[int, Sequence[int]],
                              config: Mapping[str, str]) -> None:
        """Kafka's ``validateTopicCreate``."""
        topic_rules.validate_topic_name(topic)
        if self.is_marked_for_deletion(topic):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' is marked for deletion.")
        if self.topic_exists(topic):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
        if topic_rules.has_collision_chars(topic):
            colliding = topic_rules.colliding_topics(topic, self.all_topics())
            if colliding:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{topic}' collides with existing topics: {', '.join(colliding)}")
        assign.validate_topic_assignment(assignment)
        topic_rules.validate_topic_config(config)

    def create_topic_with_assignment(self, topic: str, config: Mapping[str, str],
                                     assignment: Mapping[int, Sequence[int]], validate: bool = True) -> uuid.UUID:
        """Write the topic's config, then its assignment with a new topic id; the id."""
        if validate:
            self.validate_topic_create(topic, assignment, config)
        # Not transactional, as in Kafka: the config first, then the assignment the controller watches.
        self._set_or_create_entity_config(TOPIC, topic, config)
        topic_id = new_topic_id()
        try:
            self.zk.create(TopicZNode.path(topic), TopicZNode.encode({p: list(r) for p, r in assignment.items()},
                                                                     topic_id), makepath=True)
        except NodeExistsError:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f'Topic "{topic}" already exists.') from None
        return topic_id

    def delete_topic(self, topic: str) -> None:
        """Request deletion: create /admin/delete_topics/<t> (the controller does the rest)."""
        if not self.topic_exists(topic):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic `{topic}` to delete does not exist")
        try:
            self.zk.create(DeleteTopicsTopicZNode.path(topic), b"", makepath=True)
        except NodeExistsError:
            raise TopicAlreadyMarkedForDeletion(f"topic {topic} is already marked for deletion") from None

    def add_partitions(self, topic: str, num_partitions: int,
                       replica_assignment: Mapping[int, Sequence[int]] | None = None,
                       validate_only: bool = False) -> dict[int, list[int]]:
        """Grow a topic to ``num_partitions`` (Kafka's ``addPartitions``); returns the full assignment.

        ``replica_assignment`` gives the replicas of the NEW partitions only (keyed by partition id).
        """
        data, stat = self._get_topic(topic)
        existing = TopicZNode.decode(data)
        if 0 not in existing:
            raise AdminOperationError(f"Unexpected existing replica assignment for topic '{topic}', "
                                      f"partition id 0 is missing. Assignment: {existing}")
        to_add = num_partitions - len(existing)
        if to_add <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             "The number of partitions for a topic can only be increased. "
                             f"Topic {topic} currently has {len(existing)} partitions, "
                             f"{num_partitions} would not be an increase.")
        p0 = existing[0]
        broker_ids = [b.id for b in self.live_brokers()]
        if replica_assignment:
            new = {int(p): [int(b) for b in r] for p, r in replica_assignment.items()}
            assign.validate_new_assignment(new, len(p0), set(broker_ids))
        else:
            start = assign.start_index_for_new_partitions(broker_ids, p0[0])
            new = assign.assign_replicas_to_brokers(to_add, len(p0), broker_ids, start, len(existing))
        full = {**existing, **new}
        if not validate_only:
            self.zk.set(TopicZNode.path(topic), self._encode_preserving(data, full), version=stat.version)
        return full

    def create_partitions(self, topic: str, count: int, assignments: Sequence[Sequence[int]] | None = None,
                          validate_only: bool = False) -> dict[int, list[int]]:
        """The CreatePartitions API's write: grow ``topic`` to ``count``; the NEW partitions' replicas.

        ``assignments`` has one replica list per new partition (None: automatic placement).
        The topic znode is updated at the version read, so a concurrent change is not lost.
        """
        data, stat = self._get_topic(topic)
        raw = json.loads(data.decode()) if data else {}
        if raw.get("adding_replicas") or raw.get("removing_replicas"):
            raise KafkaError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                             f"A partition reassignment is in progress for the topic '{topic}'.")
        existing = TopicZNode.decode(data)
        new = plan_new_partitions(topic, existing, count, assignments, [b.id for b in self.live_brokers()])
        encoded = self._encode_preserving(data, {**existing, **new})
        topic_rules.check_znode_size(encoded, ErrorCode.INVALID_PARTITIONS, "replica assignment")
        if not validate_only:
            try:
                self.zk.set(TopicZNode.path(topic), encoded, version=stat.version)
            except BadVersionError:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                                 f"The partitions of topic '{topic}' changed concurrently; retry.") from None
            except NoNodeError:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"The topic '{topic}' does not exist.") from None
        return new

    def change_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Replace a topic's config overrides and notify the brokers (/config/changes)."""
        if not self.topic_exists(topic):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{topic}' does not exist.")
        config = {k: str(v) for k, v in config.items()}
        topic_rules.validate_topic_config(config)
        self._set_or_create_entity_config(TOPIC, topic, config)
        self.zk.ensure_path(ConfigEntityChangeNotificationZNode.path)
        self.zk.create(ConfigEntityChangeNotificationSequenceZNode.path,
                       ConfigEntityChangeNotificationSequenceZNode.encode(f"{TOPIC}/{topic}"), sequence=True)

    # ------------------------------------------------------------- internals
    def _get_topic(self, topic: str) -> tuple[bytes, ZnodeStat]:
        try:
            return self._get(TopicZNode.path(topic))
        except NoNodeError:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{topic}' does not exist.") from None

    def _set_or_create_entity_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        path, data = ConfigEntityZNode.path(entity_type, name), ConfigEntityZNode.encode(dict(config))
        try:
            self.zk.set(path, data)
        except NoNodeError:
            try:
                self.zk.create(path, data, makepath=True)
            except NodeExistsError:
                self.zk.set(path, data)

    @staticmethod
    def _encode_preserving(old: bytes, assignment: dict[int, list[int]]) -> bytes:
        """TopicZNode JSON for ``assignment``, keeping the old znode's reassignment and topic_id fields."""
        new = TopicZNode.encode(assignment)
        old_obj = json.loads(old.decode()) if old else {}
        kept = {k: old_obj[k] for k in ("adding_replicas", "removing_replicas", "topic_id") if old_obj.get(k)}
        if not kept:
            return new
        obj = json.loads(new.decode())
        obj.update(kept)
        if "topic_id" in kept:
            obj["version"] = max(obj["version"], 3)
        return json.dumps(obj, separators=(",", ":")).encode()


# ------------------------------------------------------------- sessions

class ZooKeeperUnavailable(AdminOperationError):
    """No ZooKeeper session could be established in time."""


def open_zk(connect_string: str, timeout: float = 10.0, read_only: bool = False,
            environ: Mapping[str, str] | None = None) -> KazooClient:
    """A started KazooClient, or ZooKeeperUnavailable (one line) after ``timeout`` seconds.

    Like Kafka's tools, it logs in with the JAAS ``Client`` section named by ``KAFKA_OPTS``
    of ``environ`` (default: os.environ), and then creates znodes with Kafka's secure ACLs
    (``JaasUtils.isZkSaslEnabled``); a bad JAAS setup or a refused login is an
    AdminOperationError (one line).
    """
    try:
        security = zk_client_security(environ)
        zk = new_kazoo(connect_string, max(timeout, 4.0), security, security.sasl_enabled, read_only)
    except ZkSecurityError as exc:
        raise AdminOperationError(str(exc)) from None
    try:
        start_kazoo(zk, connect_string, timeout, security)
    except ZkSecurityError as exc:
        raise AdminOperationError(str(exc)) from None
    except Exception as exc:  # KazooTimeoutError, bad host strings, resolution errors...
        _close_zk(zk)
        reason = str(exc) or type(exc).__name__
        raise ZooKeeperUnavailable(f"cannot connect to ZooKeeper at {connect_string} within {timeout:g}s "
                                   f"({reason})") from None
    return zk


def _close_zk(zk: KazooClient) -> None:
    try:
        zk.stop()
    finally:
        zk.close()
