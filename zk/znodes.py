"""Kafka 2.8's ZooKeeper data model: one class per znode, with path, encode, decode.

Invariant: the bytes written here are the JSON Kafka 2.8 (ZkData.scala) writes,
so a real Kafka tool reading our ZooKeeper sees its own data. Timestamps are
strings, partition keys in topic znodes are strings, /cluster/id's version is a
string, /controller_epoch is a plain ASCII integer.
"""
from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _loads(data: bytes | None) -> Any:
    if not data:
        return None
    return json.loads(data.decode())


def now_ms_str() -> str:
    return str(int(time.time() * 1000))


def _partitions_json(partitions: list[tuple[str, int]]) -> bytes:
    """{"version":1,"partitions":[{"topic":t,"partition":p}]}: the shape of several admin znodes."""
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def _partitions_from_json(data: bytes) -> list[tuple[str, int]]:
    obj = _loads(data) or {}
    return [(e["topic"], int(e["partition"])) for e in obj.get("partitions", [])]


# --------------------------------------------------------------------- brokers

class BrokerIdsZNode:
    path = "/brokers/ids"


@dataclass
class Endpoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def uri(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


@dataclass
class BrokerInfo:
    """The content of /brokers/ids/<id>; ``epoch`` is the znode's czxid (not encoded)."""
    id: int
    endpoints: list[Endpoint]
    rack: str | None = None
    jmx_port: int = -1
    timestamp: str = field(default_factory=now_ms_str)
    epoch: int = -1

    def endpoint(self, listener: str | None = None) -> Endpoint:
        if listener is None:
            return self.endpoints[0]
        for ep in self.endpoints:
            if ep.listener == listener:
                return ep
        raise KeyError(listener)


class BrokerIdZNode:
    """Ephemeral /brokers/ids/<id>, version 5 JSON."""
    version = 5

    @staticmethod
    def path(broker_id: int) -> str:
        return f"/brokers/ids/{broker_id}"

    @staticmethod
    def encode(info: BrokerInfo) -> bytes:
        plaintext = [e for e in info.endpoints if e.security_protocol == "PLAINTEXT"]
        obj: dict[str, Any] = {
            "version": BrokerIdZNode.version,
            "host": plaintext[0].host if plaintext else None,
            "port": plaintext[0].port if plaintext else -1,
            "jmx_port": info.jmx_port,
            "timestamp": info.timestamp,
            "endpoints": [e.uri() for e in info.endpoints],
            "listener_security_protocol_map": {e.listener: e.security_protocol for e in info.endpoints},
            "features": {},
        }
        if info.rack is not None:
            obj["rack"] = info.rack
        return _dumps(obj)

    @staticmethod
    def decode(broker_id: int, data: bytes, czxid: int = -1) -> BrokerInfo:
        obj = _loads(data)
        protocol_map = obj.get("listener_security_protocol_map") or {}
        endpoints = []
        for uri in obj.get("endpoints", []):
            listener, rest = uri.split("://", 1)
            host, _, port = rest.rpartition(":")
            endpoints.append(Endpoint(listener, host.strip("[]"), int(port), protocol_map.get(listener, listener)))
        if not endpoints and obj.get("host") is not None:
            endpoints.append(Endpoint("PLAINTEXT", obj["host"], int(obj["port"])))
        return BrokerInfo(id=broker_id, endpoints=endpoints, rack=obj.get("rack"),
                          jmx_port=obj.get("jmx_port", -1), timestamp=str(obj.get("timestamp", "")),
                          epoch=czxid)


class BrokerSequenceIdZNode:
    path = "/brokers/seqid"


# ------------------------------------------------------------------ controller

class ControllerZNode:
    """Ephemeral /controller."""
    path = "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp: str | None = None) -> bytes:
        return _dumps({"version": 1, "brokerid": broker_id, "timestamp": timestamp or now_ms_str()})

    @staticmethod
    def decode(data: bytes) -> int | None:
        obj = _loads(data)
        return None if obj is None else int(obj["brokerid"])


class ControllerEpochZNode:
    """/controller_epoch: a plain integer, created as 0."""
    path = "/controller_epoch"
    initial = 0

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode()

    @staticmethod
    def decode(data: bytes) -> int:
        return int(data.decode())


# ---------------------------------------------------------------------- topics

class TopicsZNode:
    path = "/brokers/topics"


@dataclass
class ReplicaAssignment:
    """One partition's replicas as /brokers/topics/<t> holds them (Kafka's ReplicaAssignment).

    During a reassignment (KIP-455) ``replicas`` is the full set, origin then target replicas
    in order and without duplicates; ``adding_replicas`` the target replicas not in the
    origin, ``removing_replicas`` the origin replicas not in the target."""
    replicas: list[int]
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)

    @property
    def origin_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding_replicas]

    @property
    def target_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing_replicas]

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def reassign_to(self, target: list[int]) -> "ReplicaAssignment":
        """The assignment that moves this partition's origin replicas to ``target``."""
        origin = self.origin_replicas
        full = list(dict.fromkeys([*target, *origin]))
        return ReplicaAssignment(full, [r for r in full if r not in origin], [r for r in full if r not in target])


def new_topic_id() -> uuid.UUID:
    """A random topic id (Kafka's Uuid.randomUuid: never the zero UUID)."""
    while True:
        u = uuid.uuid4()
        if u.int:
            return u


def topic_id_string(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def topic_id_from_string(s: str) -> uuid.UUID:
    """Kafka's Uuid.fromString; ValueError if ``s`` is not one."""
    raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a topic id: {s!r}")
    return uuid.UUID(bytes=raw)


class TopicZNode:
    """/brokers/topics/<t>: the replica assignment (v2 JSON; first replica is preferred), with the
    replicas being added and removed by an ongoing reassignment, and (v3) the topic id."""
    version = 2

    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}"

    @staticmethod
    def encode(assignment: "Mapping[int, list[int] | ReplicaAssignment]",
               topic_id: uuid.UUID | None = None) -> bytes:
        full = {p: r if isinstance(r, ReplicaAssignment) else ReplicaAssignment(list(r))
                for p, r in sorted(assignment.items())}
        obj: dict[str, Any] = {
            "version": 3 if topic_id is not None else TopicZNode.version,
            "partitions": {str(p): list(a.replicas) for p, a in full.items()},
            "adding_replicas": {str(p): list(a.adding_replicas) for p, a in full.items() if a.adding_replicas},
            "removing_replicas": {str(p): list(a.removing_replicas) for p, a in full.items()
                                  if a.removing_replicas},
        }
        if topic_id is not None:
            obj["topic_id"] = topic_id_string(topic_id)
        return _dumps(obj)

    @staticmethod
    def decode_topic_id(data: bytes | None) -> uuid.UUID | None:
        """The topic id (None: a topic created without one, by an older version)."""
        raw = (_loads(data) or {}).get("topic_id")
        try:
            return topic_id_from_string(raw) if isinstance(raw, str) else None
        except ValueError:
            return None

    @staticmethod
    def decode(data: bytes) -> dict[int, list[int]]:
        return {p: a.replicas for p, a in TopicZNode.decode_full(data).items()}

    @staticmethod
    def decode_full(data: bytes) -> dict[int, ReplicaAssignment]:
        obj = _loads(data) or {}

        def ints(section: str, p: str) -> list[int]:
            return [int(b) for b in (obj.get(section) or {}).get(p) or []]
        return {int(p): ReplicaAssignment([int(b) for b in r], ints("adding_replicas", p),
                                          ints("removing_replicas", p))
                for p, r in (obj.get("partitions") or {}).items()}


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}"


@dataclass
class LeaderIsrAndControllerEpoch:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = -1  # the state znode's stat.version (not encoded)


class TopicPartitionStateZNode:
    """/brokers/topics/<t>/partitions/<p>/state."""

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}/state"

    @staticmethod
    def encode(state: LeaderIsrAndControllerEpoch) -> bytes:
        return _dumps({"controller_epoch": state.controller_epoch, "leader": state.leader,
                       "version": 1, "leader_epoch": state.leader_epoch, "isr": list(state.isr)})

    @staticmethod
    def decode(data: bytes, zk_version: int = -1) -> LeaderIsrAndControllerEpoch:
        obj = _loads(data)
        return LeaderIsrAndControllerEpoch(int(obj["leader"]), int(obj["leader_epoch"]),
                                           [int(b) for b in obj["isr"]], int(obj["controller_epoch"]),
                                           zk_version)


# ---------------------------------------------------------------------- admin

class DeleteTopicsZNode:
    path = "/admin/delete_topics"


class DeleteTopicsTopicZNode:
    """/admin/delete_topics/<t>: empty; its existence requests deletion."""

    @staticmethod
    def path(topic: str) -> str:
        return f"/admin/delete_topics/{topic}"


class PreferredReplicaElectionZNode:
    """/admin/preferred_replica_election: the partitions whose preferred replica should lead."""
    path = "/admin/preferred_replica_election"

    @staticmethod
    def encode(partitions: list[tuple[str, int]]) -> bytes:
        return _partitions_json(partitions)

    @staticmethod
    def decode(data: bytes) -> list[tuple[str, int]]:
        return _partitions_from_json(data)


class ReassignPartitionsZNode:
    """/admin/reassign_partitions: reassignments asked through ZooKeeper (the pre-KIP-455 path);
    the controller removes each partition from it once its reassignment completes."""
    path = "/admin/reassign_partitions"

    @staticmethod
    def encode(reassignment: dict[tuple[str, int], list[int]]) -> bytes:
        return _dumps({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in reassignment.items()]})

    @staticmethod
    def decode(data: bytes) -> dict[tuple[str, int], list[int]]:
        obj = _loads(data) or {}
        return {(e["topic"], int(e["partition"])): [int(b) for b in e["replicas"]]
                for e in obj.get("partitions", [])}


# ----------------------------------------------------------------- config

class ConfigEntityTypeZNode:
    @staticmethod
    def path(entity_type: str) -> str:
        return f"/config/{entity_type}"


class ConfigEntityZNode:
    """/config/<type>/<name>, e.g. /config/topics/<t>: all values are strings."""

    @staticmethod
    def path(entity_type: str, name: str) -> str:
        return f"/config/{entity_type}/{name}"

    @staticmethod
    def encode(config: dict[str, str]) -> bytes:
        return _dumps({"version": 1, "config": {k: str(v) for k, v in config.items()}})

    @staticmethod
    def decode(data: bytes | None) -> dict[str, str]:
        obj = _loads(data) or {}
        return {k: str(v) for k, v in (obj.get("config") or {}).items()}


class ConfigEntityChangeNotificationZNode:
    path = "/config/changes"


class ConfigEntityChangeNotificationSequenceZNode:
    prefix = "config_change_"
    path = "/config/changes/config_change_"

    @staticmethod
    def encode(entity_path: str) -> bytes:
        return _dumps({"version": 2, "entity_path": entity_path})

    @staticmethod
    def decode(data: bytes) -> str:
        return _loads(data)["entity_path"]


# ------------------------------------------------------------- notifications

class IsrChangeNotificationZNode:
    path = "/isr_change_notification"


class IsrChangeNotificationSequenceZNode:
    prefix = "isr_change_"
    path = "/isr_change_notification/isr_change_"
    encode = staticmethod(_partitions_json)
    decode = staticmethod(_partitions_from_json)


class LogDirEventNotificationZNode:
    path = "/log_dir_event_notification"


class LogDirEventNotificationSequenceZNode:
    """``log_dir_event_<seq>``: broker ``broker`` lost a log dir (Kafka's LogDirFailureEvent = 1)."""
    prefix = "log_dir_event_"
    path = "/log_dir_event_notification/log_dir_event_"
    LOG_DIR_FAILURE_EVENT = 1

    @staticmethod
    def encode(broker_id: int) -> bytes:
        return _dumps({"version": 1, "broker": broker_id,
                       "event": LogDirEventNotificationSequenceZNode.LOG_DIR_FAILURE_EVENT})

    @staticmethod
    def decode(data: bytes | None) -> int | None:
        """The broker id of a log dir failure event (None for another or malformed event)."""
        try:
            obj = _loads(data)
            if obj.get("event", LogDirEventNotificationSequenceZNode.LOG_DIR_FAILURE_EVENT) \
                    != LogDirEventNotificationSequenceZNode.LOG_DIR_FAILURE_EVENT:
                return None
            return int(obj["broker"])
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


class ProducerIdBlockZNode:
    """/latest_producer_id_block: blocks of 1000 producer ids."""
    path = "/latest_producer_id_block"
    block_size = 1000

    @staticmethod
    def encode(broker_id: int, block_start: int, block_end: int) -> bytes:
        return _dumps({"version": 1, "broker": broker_id,
                       "block_start": str(block_start), "block_end": str(block_end)})

    @staticmethod
    def decode(data: bytes | None) -> tuple[int, int, int] | None:
        obj = _loads(data)
        if obj is None:
            return None
        return int(obj["broker"]), int(obj["block_start"]), int(obj["block_end"])


# ------------------------------------------------------------------ cluster

class ClusterIdZNode:
    path = "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _dumps({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes) -> str:
        return _loads(data)["id"]


class FeatureZNode:
    """/feature (KIP-584): {"version":1,"status":<0 disabled|1 enabled>,"features":{<name>:
    {"min_version_level":n,"max_version_level":m}}}; its zk version is the finalized features' epoch."""
    path = "/feature"
    DISABLED, ENABLED = 0, 1

    @staticmethod
    def encode(status: int, features: dict[str, tuple[int, int]]) -> bytes:
        return _dumps({"version": 1, "status": status, "features": {
            name: {"min_version_level": lo, "max_version_level": hi} for name, (lo, hi) in features.items()}})

    @staticmethod
    def decode(data: bytes) -> tuple[int, dict[str, tuple[int, int]]]:
        obj = _loads(data) or {}
        features = obj.get("features") or {}
        return int(obj.get("status", FeatureZNode.DISABLED)), {
            name: (int(r["min_version_level"]), int(r["max_version_level"])) for name, r in features.items()}


class ConsumerPathZNode:
    path = "/consumers"


PERSISTENT_PATHS = (
    ConsumerPathZNode.path,
    BrokerIdsZNode.path,
    TopicsZNode.path,
    ConfigEntityChangeNotificationZNode.path,
    DeleteTopicsZNode.path,
    BrokerSequenceIdZNode.path,
    IsrChangeNotificationZNode.path,
    ProducerIdBlockZNode.path,
    LogDirEventNotificationZNode.path,
    *(ConfigEntityTypeZNode.path(t) for t in ("topics", "clients", "users", "brokers", "ips")),
)


# --------------------------------------------------------------------- ACLs (AclAuthorizer)
# Literal patterns live under /kafka-acl/<Type>/<name>, prefixed ones under
# /kafka-acl-extended/prefixed/<Type>/<name>; both hold {"version":1,"acls":[...]}. A change to a
# literal pattern is announced by /kafka-acl-changes/acl_changes_<seq> = "TOPIC:name", to any other
# by /kafka-acl-extended-changes/acl_changes_<seq> = {"version":1,"resourceType":"TOPIC",...}.
from odradek.protocol import acl  # noqa: E402  (this section's model; protocol is below zk)


class AclZNode:
    """The root of each specific pattern type's ACLs (ZkAclStore.aclPath)."""
    literal_path = "/kafka-acl"
    extended_path = "/kafka-acl-extended"

    @classmethod
    def root(cls, pattern_type) -> str:
        if pattern_type == acl.PatternType.LITERAL:
            return cls.literal_path
        if pattern_type == acl.PatternType.PREFIXED:
            return f"{cls.extended_path}/{pattern_type.name.lower()}"
        raise ValueError(f"no ACL store for pattern type {pattern_type.name}")

    @classmethod
    def type_path(cls, pattern_type, resource_type) -> str:
        return f"{cls.root(pattern_type)}/{resource_type.zk_name}"


class ResourceZNode:
    """One resource pattern's ACLs: ``{"version":1,"acls":[{"principal","permissionType","operation","host"}]}``."""

    @staticmethod
    def path(pattern) -> str:
        return f"{AclZNode.type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"

    @staticmethod
    def encode(entries) -> bytes:
        return _dumps({"version": 1, "acls": [
            {"principal": e.principal, "permissionType": e.permission_type.zk_name,
             "operation": e.operation.zk_name, "host": e.host} for e in sorted(entries)]})

    @staticmethod
    def decode(data: bytes | None) -> frozenset:
        obj = _loads(data)
        if not obj:
            return frozenset()
        if int(obj.get("version", 1)) != 1:
            raise ValueError(f"unsupported ACL znode version {obj.get('version')}")
        return frozenset(acl.AccessControlEntry(e["principal"], e["host"], acl.AclOperation.parse(e["operation"]),
                                                acl.AclPermissionType.parse(e["permissionType"]))
                         for e in obj.get("acls", []))


class AclChangeNotificationZNode:
    """Literal patterns' change notifications: data ``<RESOURCE_TYPE>:<name>`` (Kafka writes the
    enum name, reads any case)."""
    path = "/kafka-acl-changes"
    prefix = "acl_changes_"

    @staticmethod
    def encode(pattern) -> bytes:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()

    @staticmethod
    def decode(data: bytes):
        kind, sep, name = data.decode().partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:ResourceName, got {data!r}")
        return acl.ResourcePattern(acl.ResourceType.parse(kind), name, acl.PatternType.LITERAL)


class ExtendedAclChangeNotificationZNode:
    """Other patterns' change notifications (ExtendedAclChangeEvent JSON)."""
    path = "/kafka-acl-extended-changes"
    prefix = "acl_changes_"

    @staticmethod
    def encode(pattern) -> bytes:
        return _dumps({"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
                       "patternType": pattern.pattern_type.name})

    @staticmethod
    def decode(data: bytes):
        obj = _loads(data)
        if int(obj.get("version", 1)) > 1:
            raise ValueError(f"unsupported ACL change event version {obj.get('version')}")
        return acl.ResourcePattern(acl.ResourceType.parse(obj["resourceType"]), obj["name"],
                                   acl.PatternType.parse(obj["patternType"]))


def acl_change_znode(pattern_type):
    """The change-notification znode class for a pattern type."""
    return AclChangeNotificationZNode if pattern_type == acl.PatternType.LITERAL \
        else ExtendedAclChangeNotificationZNode
