"""ControllerZkWrites: the controller's side of KafkaZkClient — epoch-fenced writes, topics,
partition states, deletions, preferred elections and ISR change notifications.

Invariant: every write here is ``multi(check(/controller_epoch, epoch_zk_version), op)``, so a
controller that lost its epoch never changes ZooKeeper: the failed check raises
``ControllerMovedError``. Mixed into ``KafkaZkClient`` (``zk/session.py``), which owns the kazoo
session, the watches and ``get_data``/``get_children``; every method blocks.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable

from kazoo.exceptions import BadVersionError, NoNodeError, NotEmptyError

from odradek.zk import znodes as zn
from odradek.zk.znodes import LeaderIsrAndControllerEpoch

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Watch = Callable[[], None]


class ControllerMovedError(Exception):
    """The controller epoch check failed (or the election lost): another controller is active."""


class UpdateResult:
    """Outcome of a conditional batch update of partition state znodes."""

    def __init__(self) -> None:
        self.succeeded: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.bad_version: list[TopicPartition] = []   # retry after re-reading
        self.failed: dict[TopicPartition, Exception] = {}


class ControllerZkWrites:
    """The controller's ZooKeeper operations (a mixin of ``KafkaZkClient``)."""

    kazoo: KazooClient

    if TYPE_CHECKING:  # provided by KafkaZkClient
        def _wrap(self, watch: Watch | None) -> Any: ...
        def get_children(self, path: str, watch: Watch | None = None) -> list[str]: ...
        def get_data(self, path: str, watch: Watch | None = None) -> Any: ...

    # ------------------------------------------------------------ epoch-checked writes

    def _checked(self, epoch_zk_version: int, ops: list[tuple], wait: bool = True):
        """Run ``multi(check(/controller_epoch), *ops)``; return the op results (or async)."""
        txn = self.kazoo.transaction()
        txn.check(zn.ControllerEpochZNode.path, epoch_zk_version)
        for op in ops:
            getattr(txn, op[0])(*op[1:])
        return txn.commit() if wait else txn.commit_async()

    @staticmethod
    def _unwrap(results: list) -> list:
        """Raise ControllerMovedError if the epoch check failed; else the ops' results."""
        if isinstance(results[0], BadVersionError) or isinstance(results[0], NoNodeError):
            raise ControllerMovedError("controller epoch zk version changed")
        return results[1:]

    def _checked_one(self, epoch_zk_version: int, op: tuple):
        results = self._unwrap(self._checked(epoch_zk_version, [op]))
        res = results[0]
        if isinstance(res, Exception):
            raise res
        return res

    def _checked_many(self, epoch_zk_version: int, ops: dict) -> dict:
        """Pipeline one checked multi per key; {key: result or Exception}."""
        pending = {k: self._checked(epoch_zk_version, [op], wait=False) for k, op in ops.items()}
        out = {}
        moved = False
        for k, res in pending.items():
            results = res.get()
            if isinstance(results[0], (BadVersionError, NoNodeError)):
                moved = True
                continue
            out[k] = results[1]
        if moved:
            raise ControllerMovedError("controller epoch zk version changed")
        return out

    # ------------------------------------------------------------ topics and partitions

    def get_all_topics(self, watch: Watch | None = None) -> set[str]:
        return set(self.get_children(zn.TopicsZNode.path, watch))

    def get_replica_assignment(self, topics: Iterable[str],
                               watch_factory: Callable[[str], Watch] | None = None
                               ) -> dict[TopicPartition, list[int]]:
        """{(t, p): replicas}; ``watch_factory(topic)`` gives a data watch per topic znode."""
        pending = []
        for t in topics:
            watch = self._wrap(watch_factory(t)) if watch_factory else None
            pending.append((t, self.kazoo.get_async(zn.TopicZNode.path(t), watch=watch)))
        out: dict[TopicPartition, list[int]] = {}
        for t, res in pending:
            try:
                data, _ = res.get()
            except NoNodeError:
                continue
            for p, replicas in zn.TopicZNode.decode(data).items():
                out[(t, p)] = replicas
        return out

    def get_partition_states(self, partitions: Iterable[TopicPartition]
                             ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        pending = [(tp, self.kazoo.get_async(zn.TopicPartitionStateZNode.path(*tp)))
                   for tp in partitions]
        out = {}
        for tp, res in pending:
            try:
                data, stat = res.get()
            except NoNodeError:
                continue
            out[tp] = zn.TopicPartitionStateZNode.decode(data, stat.version)
        return out

    def create_partition_states(self, states: dict[TopicPartition, LeaderIsrAndControllerEpoch],
                                epoch_zk_version: int) -> dict[TopicPartition, Exception | None]:
        """Create .../partitions[/p]/state (epoch-checked); {tp: None on success or the error}."""
        topics = {t for t, _ in states}
        parents = {("t", t): ("create", zn.TopicPartitionsZNode.path(t), b"") for t in topics}
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

    def conditional_update_partition_state(self, tp: TopicPartition,
                                           state: LeaderIsrAndControllerEpoch) -> int | None:
        """Broker-side ISR write (no epoch check): new zk_version, or None on version mismatch."""
        try:
            stat = self.kazoo.set(zn.TopicPartitionStateZNode.path(*tp),
                                  zn.TopicPartitionStateZNode.encode(state), version=state.zk_version)
            return stat.version
        except (BadVersionError, NoNodeError):
            return None
