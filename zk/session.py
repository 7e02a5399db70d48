"""KafkaZkClient: the broker's and controller's Kafka operations on ZooKeeper's znodes.

Invariant: every method blocks (call it off the reactor thread, e.g. through
``deferToThread``); every write the controller makes after its election is in a
``multi(check(/controller_epoch, epoch_zk_version), op, ...)``, so a controller that
lost its epoch can never change ZooKeeper (the failed check raises
``ControllerMovedError``). Many writes at once go in multis, each op with the result it
would have had alone (``odradek.zk.multi_ops``). Data is encoded and decoded only through
``odradek.zk.znodes``. The session, watch and connection-loss retry rules are those of
``odradek.zk.zookeeper_client.ZooKeeperClient``, which this class extends (callers
re-register their watches after ``on_new_session``).
"""
from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from typing import Callable, Iterable

from kazoo.exceptions import (BadVersionError, ConnectionLoss, NodeExistsError, NoNodeError,
                              NotEmptyError, OperationTimeoutError, SessionExpiredError)

from odradek.zk import znodes as zn
from odradek.zk.multi_ops import ControllerMovedError, each, read_existing
from odradek.zk.znodes import BrokerInfo, LeaderIsrAndControllerEpoch
from odradek.zk.zookeeper_client import RETRIABLE_ERRORS, Watch, ZooKeeperClient

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class BrokerIdInUseError(Exception):
    """Another live broker holds /brokers/ids/<id>."""


class UpdateResult:
    """Outcome of a conditional batch update of partition state znodes."""

    def __init__(self) -> None:
        self.succeeded: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.bad_version: list[TopicPartition] = []   # retry after re-reading
        self.failed: dict[TopicPartition, Exception] = {}


class KafkaZkClient(ZooKeeperClient):
    """Kafka's KafkaZkClient over kazoo (blocking)."""

    def wait_for_broker_registration(self, broker_id: int, should_stop: Callable[[], bool]
                                     ) -> int | None:
        """Block until /brokers/ids/<id> exists and belongs to THIS session; its czxid (epoch).

        None if ``should_stop()`` turned true, the client is closing, or the session was
        lost again (another new-session callback follows then).
        """
        path = zn.BrokerIdZNode.path(broker_id)
        generation = self._session_generation
        while not (self._closing or should_stop()):
            if self._session_generation != generation:
                return None
            changed = threading.Event()
            try:
                stat = self.kazoo.exists(path, watch=lambda _e: changed.set())
            except RETRIABLE_ERRORS:
                self.wait_connected(5.0)
                continue
            except SessionExpiredError:
                return None
            if stat is not None and stat.ephemeralOwner == self.session_id:
                return stat.czxid
            changed.wait(1.0)   # wakes on the znode's creation; re-checks should_stop each second
        return None

    def create_persistent_paths(self) -> None:
        for path in zn.PERSISTENT_PATHS:
            self.kazoo.ensure_path(path)

    # ------------------------------------------------------------ cluster / brokers

    def get_or_create_cluster_id(self, proposed: str) -> str:
        data, _ = self.get_data(zn.ClusterIdZNode.path)
        if data:
            return zn.ClusterIdZNode.decode(data)
        try:
            self.kazoo.create(zn.ClusterIdZNode.path, zn.ClusterIdZNode.encode(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            data, _ = self.get_data(zn.ClusterIdZNode.path)
            return zn.ClusterIdZNode.decode(data)

    def register_broker(self, info: BrokerInfo) -> int:
        """Create the ephemeral /brokers/ids/<id>; return the broker epoch (czxid)."""
        path = zn.BrokerIdZNode.path(info.id)
        data = zn.BrokerIdZNode.encode(info)
        deadline = time.monotonic() + self.session_timeout_ms / 1000.0 + 5.0
        while True:
            try:
                _, stat = self.kazoo.create(path, data, ephemeral=True, makepath=True, include_data=True)
                info.epoch = stat.czxid
                return stat.czxid
            except (ConnectionLoss, OperationTimeoutError, SessionExpiredError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)  # kazoo reconnects; then we find the node (ours) or create it
                continue
            except NodeExistsError:
                old, stat = self.get_data(path)
                if stat is None:
                    continue
                if stat.ephemeralOwner == self.session_id:
                    info.epoch = stat.czxid
                    return stat.czxid  # ours (a retried create)
                try:
                    same = zn.BrokerIdZNode.decode(info.id, old).endpoints == info.endpoints
                except Exception:
                    same = False
                if not same:
                    raise BrokerIdInUseError(
                        f"broker id {info.id} is registered by another live broker at {path}")
                if time.monotonic() > deadline:
                    raise BrokerIdInUseError(
                        f"{path} from a previous session of broker {info.id} did not expire")
                gone = threading.Event()
                if self.kazoo.exists(path, watch=lambda _e: gone.set()) is not None:
                    gone.wait(max(0.0, min(1.0, deadline - time.monotonic())))

    def get_all_broker_ids(self, watch: Watch | None = None) -> list[int]:
        return sorted(int(c) for c in self.get_children(zn.BrokerIdsZNode.path, watch))

    def get_all_brokers(self, watch: Watch | None = None) -> dict[int, BrokerInfo]:
        """Live brokers with ``epoch`` = czxid; ``watch`` is a child watch on /brokers/ids."""
        out: dict[int, BrokerInfo] = {}
        ids = self.get_all_broker_ids(watch)
        results = [(b, self.kazoo.get_async(zn.BrokerIdZNode.path(b))) for b in ids]
        for b, res in results:
            try:
                data, stat = res.get()
            except NoNodeError:
                continue
            out[b] = zn.BrokerIdZNode.decode(b, data, stat.czxid)
        return out

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        data, _ = self.get_data(zn.ConfigEntityZNode.path(entity_type, name))
        return zn.ConfigEntityZNode.decode(data)

    def allocate_producer_id_block(self, broker_id: int) -> tuple[int, int]:
        size = zn.ProducerIdBlockZNode.block_size
        path = zn.ProducerIdBlockZNode.path
        while True:
            data, stat = self.get_data(path)
            if stat is None:
                try:
                    self.kazoo.create(path, zn.ProducerIdBlockZNode.encode(broker_id, 0, size - 1),
                                      makepath=True)
                    return 0, size - 1
                except NodeExistsError:
                    continue
            prev = zn.ProducerIdBlockZNode.decode(data)
            start = 0 if prev is None else prev[2] + 1
            end = start + size - 1
            try:
                self.kazoo.set(path, zn.ProducerIdBlockZNode.encode(broker_id, start, end),
                               version=stat.version)
                return start, end
            except BadVersionError:
                continue

    # ------------------------------------------------------------ controller election

    def get_controller_id(self, watch: Watch | None = None) -> int | None:
        """The active controller's id (``watch`` fires on create, change or delete)."""
        stat = self.kazoo.exists(zn.ControllerZNode.path, watch=self._wrap(watch))
        if stat is None:
            return None
        try:
            data, _ = self.kazoo.get(zn.ControllerZNode.path)
        except NoNodeError:
            return None
        return zn.ControllerZNode.decode(data)

    def broker_registered_by_this_session(self, broker_id: int) -> bool:
        """True if /brokers/ids/<id> exists and is the ephemeral node of THIS session."""
        stat = self.kazoo.exists(zn.BrokerIdZNode.path(broker_id))
        return stat is not None and stat.ephemeralOwner == self.session_id

    def controller_held_by_this_session(self) -> bool:
        """True if /controller exists and is the ephemeral node of THIS session."""
        stat = self.kazoo.exists(zn.ControllerZNode.path)
        return stat is not None and stat.ephemeralOwner == self.session_id

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, zk_version) or None if /controller_epoch does not exist."""
        data, stat = self.get_data(zn.ControllerEpochZNode.path)
        return None if stat is None else (zn.ControllerEpochZNode.decode(data), stat.version)

    def get_controller_state(self, broker_id: int) -> tuple[int, int, int]:
        """(controller id, controller epoch, broker epoch of ``broker_id``) as ZooKeeper has them
        now; -1 for what does not exist (no controller elected, broker not registered by this
        session). /controller and /controller_epoch change together (one multi), so the epoch
        is read on both sides of /controller until it did not move."""
        while True:
            before = self.get_controller_epoch()
            controller = self.get_controller_id()
            after = self.get_controller_epoch()
            if before == after:
                break
        stat = self.kazoo.exists(zn.BrokerIdZNode.path(broker_id))
        broker_epoch = stat.czxid if stat is not None and stat.ephemeralOwner == self.session_id else -1
        return (-1 if controller is None else controller, -1 if after is None else after[0], broker_epoch)

    def register_controller_and_increment_epoch(self, broker_id: int) -> tuple[int, int]:
        """One multi: create ephemeral /controller + bump /controller_epoch at its version."""
        current = self.get_controller_epoch()
        if current is None:
            try:
                self.kazoo.create(zn.ControllerEpochZNode.path,
                                  zn.ControllerEpochZNode.encode(zn.ControllerEpochZNode.initial))
            except NodeExistsError:
                pass
            current = self.get_controller_epoch()
            assert current is not None
        epoch, version = current
        new_epoch = epoch + 1
        while True:
            txn = self.kazoo.transaction()
            txn.create(zn.ControllerZNode.path, zn.ControllerZNode.encode(broker_id), ephemeral=True)
            txn.set_data(zn.ControllerEpochZNode.path, zn.ControllerEpochZNode.encode(new_epoch),
                         version=version)
            try:
                results = txn.commit()
            except RETRIABLE_ERRORS:
                # Did the multi reach the server before the connection dropped? Retry it as is
                # (same epoch): the version check keeps a retry from bumping twice.
                if not self.wait_connected():
                    raise
                results = [ConnectionLoss()]
            if not any(isinstance(r, Exception) for r in results):
                return new_epoch, version + 1
            # A retried multi may already have won for us (Kafka's checkControllerAndEpoch).
            stat = self.kazoo.exists(zn.ControllerZNode.path)
            if stat is not None and self.get_controller_id() == broker_id:
                now = self.get_controller_epoch()
                if now is not None and now[0] == new_epoch:
                    return now
            if stat is None and isinstance(results[0], ConnectionLoss):
                now = self.get_controller_epoch()
                if now is not None and now == (epoch, version):
                    continue   # nothing happened: run the multi again
            raise ControllerMovedError(f"controller election lost by broker {broker_id}: {results}")

    def delete_controller_if_ours(self, broker_id: int) -> None:
        data, stat = self.get_data(zn.ControllerZNode.path)
        if stat is not None and zn.ControllerZNode.decode(data) == broker_id:
            try:
                self.kazoo.delete(zn.ControllerZNode.path, version=stat.version)
            except (NoNodeError, BadVersionError):
                pass

    # ------------------------------------------------------------ epoch-checked writes

    def _checked_one(self, epoch_zk_version: int, op: tuple):
        """One epoch-checked op: its result, or its error raised."""
        res = self._checked_many(epoch_zk_version, {0: op})[0]
        if isinstance(res, Exception):
            raise res
        return res

    def _checked_many(self, epoch_zk_version: int, ops: dict) -> dict:
        """Every op epoch-checked, as if each ran alone: {key: result or Exception}."""
        return each(self.kazoo, ops, ("check", zn.ControllerEpochZNode.path, epoch_zk_version))

    # ------------------------------------------------------------ features (KIP-584)

    def get_feature(self, watch: Watch | None = None) -> tuple[int, dict[str, tuple[int, int]], int] | None:
        """/feature as (status, finalized features, zk version = their epoch); None if absent."""
        data, stat = self.get_data(zn.FeatureZNode.path, watch)
        return None if stat is None else (*zn.FeatureZNode.decode(data), stat.version)

    def set_finalized_features(self, features: dict[str, tuple[int, int]], version: int) -> int:
        """Write /feature enabled with ``features`` at zk ``version`` (-1: create it); its new version."""
        data = zn.FeatureZNode.encode(zn.FeatureZNode.ENABLED, features)
        if version < 0:
            self.kazoo.create(zn.FeatureZNode.path, data)
            return 0
        return int(self.kazoo.set(zn.FeatureZNode.path, data, version=version).version)

    def setup_feature_versioning(self, enabled: bool, epoch_zk_version: int) -> None:
        """Kafka 2.8's controller at failover (epoch-checked): with IBP >= 2.7 /feature is
        created enabled, or a disabled one enabled without its features; below, it is disabled."""
        current = self.get_feature()
        status = zn.FeatureZNode.ENABLED if enabled else zn.FeatureZNode.DISABLED
        features = current[1] if enabled and current is not None and current[0] == status else {}
        data = zn.FeatureZNode.encode(status, features)
        if current is None:
            self._checked_one(epoch_zk_version, ("create", zn.FeatureZNode.path, data))
        elif current[:2] != (status, features):
            self._checked_one(epoch_zk_version, ("set_data", zn.FeatureZNode.path, data, current[2]))

    # ------------------------------------------------------------ topics and partitions

    def get_all_topics(self, watch: Watch | None = None) -> set[str]:
        return set(self.get_children(zn.TopicsZNode.path, watch))

    def get_replica_assignment(self, topics: Iterable[str],
                               watch_factory: Callable[[str], Watch] | None = None
                               ) -> dict[TopicPartition, zn.ReplicaAssignment]:
        """{(t, p): assignment}; ``watch_factory(topic)`` gives a data watch per topic znode."""
        pending = []
        for t in topics:
            watch = self._wrap(watch_factory(t)) if watch_factory else None
            pending.append((t, self.kazoo.get_async(zn.TopicZNode.path(t), watch=watch)))
        out: dict[TopicPartition, zn.ReplicaAssignment] = {}
        for t, res in pending:
            try:
                data, _ = res.get()
            except NoNodeError:
                continue
            for p, assignment in zn.TopicZNode.decode_full(data).items():
                out[(t, p)] = assignment
        return out

    def get_topic_ids(self, topics: Iterable[str]) -> dict[str, uuid.UUID | None]:
        """Each existing topic's id (None for a topic created without one)."""
        paths = {zn.TopicZNode.path(t): t for t in topics}
        return {paths[path]: zn.TopicZNode.decode_topic_id(data)
                for path, (data, _) in read_existing(self.kazoo, list(paths)).items()}

    def set_topic_id(self, topic: str, topic_id: uuid.UUID, epoch_zk_version: int) -> uuid.UUID | None:
        """Give a topic created without an id this one (epoch-checked, at the znode version read);
        the topic's id afterwards (another one if it got one meanwhile), None if it is gone."""
        while True:
            data, stat = self.get_data(zn.TopicZNode.path(topic))
            if stat is None:
                return None
            existing = zn.TopicZNode.decode_topic_id(data)
            if existing is not None:
                return existing
            obj = json.loads(data.decode()) if data else {}
            obj.update(version=3, topic_id=zn.topic_id_string(topic_id))
            try:
                self._checked_one(epoch_zk_version, ("set_data", zn.TopicZNode.path(topic),
                                                     json.dumps(obj, separators=(",", ":")).encode(), stat.version))
                return topic_id
            except BadVersionError:
                continue
            except NoNodeError:
                return None

    def set_replica_assignment(self, topic: str, assignment: dict[int, zn.ReplicaAssignment],
                               epoch_zk_version: int) -> None:
        """Rewrite /brokers/topics/<t> with ``assignment`` (epoch-checked; other fields kept)."""
        data, stat = self.get_data(zn.TopicZNode.path(topic))
        if stat is None:
            raise NoNodeError(zn.TopicZNode.path(topic))
        encoded = json.loads(zn.TopicZNode.encode(assignment).decode())
        old = json.loads(data.decode()) if data else {}
        for key, value in old.items():
            if key not in encoded:   # e.g. topic_id
                encoded[key] = value
        encoded["version"] = max(int(old.get("version", 2)), zn.TopicZNode.version)
        self._checked_one(epoch_zk_version, ("set_data", zn.TopicZNode.path(topic),
                                             json.dumps(encoded, separators=(",", ":")).encode()))

    def get_partition_state(self, tp: TopicPartition, watch: Watch | None = None
                            ) -> LeaderIsrAndControllerEpoch | None:
        """One partition's state, arming ``watch`` (data/existence) on its znode."""
        data, stat = self.get_data(zn.TopicPartitionStateZNode.path(*tp), watch)
        return None if stat is None else zn.TopicPartitionStateZNode.decode(data, stat.version)

    def get_partition_states(self, partitions: Iterable[TopicPartition]
                             ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """The state of each partition whose state znode exists (``multi_ops.read_each``)."""
        paths = {zn.TopicPartitionStateZNode.path(*tp): tp for tp in partitions}
        return {paths[path]: zn.TopicPartitionStateZNode.decode(data, stat.version)
                for path, (data, stat) in read_existing(self.kazoo, list(paths)).items()}

    def create_partition_states(self, states: dict[TopicPartition, LeaderIsrAndControllerEpoch],
                                epoch_zk_version: int) -> dict[TopicPartition, Exception | None]:
        """Create .../partitions[/p]/state (epoch-checked); {tp: None on success or the error}."""
        topics = {t for t, _ in states}
        parents: dict[tuple[str, object], tuple[str, str, bytes]] = {
            ("t", t): ("create", zn.TopicPartitionsZNode.path(t), b"") for t in topics}
        parents.update({("p", tp): ("create", zn.TopicPartitionZNode.path(*tp), b"") for tp in states})
        for key in [k for k in parents if k[0] == "t"]:
            self._checked_many(epoch_zk_version, {key: parents[key]})
        self._checked_many(epoch_zk_version, {k: v for k, v in parents.items() if k[0] == "p"})
        ops = {tp: ("create", zn.TopicPartitionStateZNode.path(*tp),
                    zn.TopicPartitionStateZNode.encode(s)) for tp, s in states.items()}
        results = self._checked_many(epoch_zk_version, ops)
        return {tp: (r if isinstance(r, Exception) else None) for tp, r in results.items()}

    def update_partition_states_conditionally(
            self, states: dict[TopicPartition, LeaderIsrAndControllerEpoch],
            epoch_zk_version: int) -> UpdateResult:
        """setData each state znode at its ``zk_version`` (epoch-checked)."""
        ops = {tp: ("set_data", zn.TopicPartitionStateZNode.path(*tp),
                    zn.TopicPartitionStateZNode.encode(s), s.zk_version) for tp, s in states.items()}
        out = UpdateResult()
        for tp, r in self._checked_many(epoch_zk_version, ops).items():
            if isinstance(r, BadVersionError):
                out.bad_version.append(tp)
            elif isinstance(r, Exception):
                out.failed[tp] = r
            else:
                s = states[tp]
                out.succeeded[tp] = LeaderIsrAndControllerEpoch(
                    s.leader, s.leader_epoch, list(s.isr), s.controller_epoch, r.version)
        return out

    # ------------------------------------------------------------ topic deletion

    def get_topic_deletions(self, watch: Watch | None = None) -> list[str]:
        return sorted(self.get_children(zn.DeleteTopicsZNode.path, watch))

    def _delete_recursive(self, path: str, epoch_zk_version: int) -> None:
        try:
            children = self.kazoo.get_children(path)
        except NoNodeError:
            return
        for c in children:
            self._delete_recursive(f"{path}/{c}", epoch_zk_version)
        try:
            self._checked_one(epoch_zk_version, ("delete", path))
        except NoNodeError:
            pass
        except NotEmptyError:  # a child appeared meanwhile
            self._delete_recursive(path, epoch_zk_version)

    def delete_topic_znodes(self, topic: str, epoch_zk_version: int) -> None:
        """Delete /brokers/topics/<t> (recursively) and /config/topics/<t>, epoch-checked."""
        self._delete_recursive(zn.TopicZNode.path(topic), epoch_zk_version)
        self._delete_recursive(zn.ConfigEntityZNode.path("topics", topic), epoch_zk_version)

    def delete_topic_deletion_flags(self, topics: Iterable[str], epoch_zk_version: int) -> None:
        for t in topics:
            self._delete_recursive(zn.DeleteTopicsTopicZNode.path(t), epoch_zk_version)

    # ------------------------------------------------------------ preferred replica election

    def get_preferred_replica_election(self, watch: Watch | None = None) -> list[TopicPartition] | None:
        """Partitions listed in /admin/preferred_replica_election (None: no such znode).

        ``watch`` is an existence/data watch: it fires on creation, change and deletion.
        """
        data, stat = self.get_data(zn.PreferredReplicaElectionZNode.path, watch)
        if stat is None:
            return None
        try:
            return zn.PreferredReplicaElectionZNode.decode(data)
        except Exception as exc:  # unreadable: Kafka logs and drops the request
            log.error("cannot decode %s: %s", zn.PreferredReplicaElectionZNode.path, exc)
            return []

    def delete_preferred_replica_election(self, epoch_zk_version: int) -> None:
        try:
            self._checked_one(epoch_zk_version, ("delete", zn.PreferredReplicaElectionZNode.path))
        except NoNodeError:
            pass

    # ------------------------------------------------------------ partition reassignment (ZooKeeper path)

    def get_partition_reassignment(self, watch: Watch | None = None
                                   ) -> tuple[dict[TopicPartition, list[int]], int] | None:
        """/admin/reassign_partitions and the zxid that created it (None: no such znode);
        ``watch`` fires on its creation, change and deletion. Unreadable content is logged and
        taken as empty."""
        data, stat = self.get_data(zn.ReassignPartitionsZNode.path, watch)
        if stat is None:
            return None
        try:
            return zn.ReassignPartitionsZNode.decode(data), stat.czxid
        except Exception as exc:
            log.error("cannot decode %s: %s", zn.ReassignPartitionsZNode.path, exc)
            return {}, stat.czxid

    def set_partition_reassignment(self, reassignment: dict[TopicPartition, list[int]],
                                   epoch_zk_version: int) -> None:
        """Rewrite /admin/reassign_partitions (epoch-checked); deleted when nothing is left."""
        path = zn.ReassignPartitionsZNode.path
        try:
            if reassignment:
                self._checked_one(epoch_zk_version, ("set_data", path, zn.ReassignPartitionsZNode.encode(reassignment)))
            else:
                self._checked_one(epoch_zk_version, ("delete", path))
        except NoNodeError:
            pass

    # ------------------------------------------------------------ isr change notifications

    def get_isr_change_notifications(self, watch: Watch | None = None) -> list[str]:
        return sorted(self.get_children(zn.IsrChangeNotificationZNode.path, watch))

    def get_partitions_from_isr_change_notifications(self, names: Iterable[str]
                                                     ) -> list[TopicPartition]:
        out: list[TopicPartition] = []
        for n in names:
            data, stat = self.get_data(f"{zn.IsrChangeNotificationZNode.path}/{n}")
            if stat is not None:
                out.extend(zn.IsrChangeNotificationSequenceZNode.decode(data))
        return out

    def delete_isr_change_notifications(self, names: Iterable[str], epoch_zk_version: int) -> None:
        ops = {n: ("delete", f"{zn.IsrChangeNotificationZNode.path}/{n}") for n in names}
        if ops:
            self._checked_many(epoch_zk_version, ops)  # NoNode results are fine

    def create_isr_change_notification(self, partitions: list[TopicPartition]) -> str:
        """Broker side (classic ISR propagation): one sequential node."""
        return self.kazoo.create(zn.IsrChangeNotificationSequenceZNode.path,
                                 zn.IsrChangeNotificationSequenceZNode.encode(partitions),
                                 sequence=True, makepath=True)

    # ------------------------------------------------------------ log dir event notifications

    def create_log_dir_event_notification(self, broker_id: int) -> str:
        """Broker side (Kafka's propagateLogDirEvent): one sequential node."""
        return self.kazoo.create(zn.LogDirEventNotificationSequenceZNode.path,
                                 zn.LogDirEventNotificationSequenceZNode.encode(broker_id),
                                 sequence=True, makepath=True)

    def get_log_dir_event_notifications(self, watch: Watch | None = None) -> list[str]:
        return sorted(self.get_children(zn.LogDirEventNotificationZNode.path, watch))

    def get_broker_ids_from_log_dir_events(self, names: Iterable[str]) -> list[int]:
        out: list[int] = []
        for n in names:
            data, stat = self.get_data(f"{zn.LogDirEventNotificationZNode.path}/{n}")
            broker = zn.LogDirEventNotificationSequenceZNode.decode(data) if stat is not None else None
            if broker is not None:
                out.append(broker)
        return out

    def delete_log_dir_event_notifications(self, names: Iterable[str], epoch_zk_version: int) -> None:
        ops = {n: ("delete", f"{zn.LogDirEventNotificationZNode.path}/{n}") for n in names}
        if ops:
            self._checked_many(epoch_zk_version, ops)  # NoNode results are fine

    def conditional_update_partition_states(self, states: dict[TopicPartition, LeaderIsrAndControllerEpoch]
                                            ) -> dict[TopicPartition, int | None | Exception]:
        """Broker-side ISR writes (no epoch check; ``multi_ops.each``): per partition its new zk_version,
        None on a version mismatch (or no znode), or the error."""
        ops = {tp: ("set_data", zn.TopicPartitionStateZNode.path(*tp), zn.TopicPartitionStateZNode.encode(state),
                    state.zk_version) for tp, state in states.items()}
        return {tp: (None if isinstance(r, (BadVersionError, NoNodeError)) else r if isinstance(r, Exception)
                     else r.version) for tp, r in each(self.kazoo, ops).items()}
