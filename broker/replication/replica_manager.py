"""The partitions hosted on this broker, and produce/fetch against them.

Invariant: partitions change role only through ``become_leader_or_follower`` and
leave only through ``stop_replicas`` (both from the controller, rejected for a
stale controller epoch). Produce appends only on the leader; acks=-1 responses
wait in the produce purgatory until the HW covers the append (unless it already
does); fetches that find fewer than min_bytes wait in the fetch purgatory; both
are re-checked whenever a partition's LEO/HW or role changes. As leader it also runs Kafka's ISR tasks:
``isr-expiration`` (every replica.lag.time.max.ms / 2) shrinks, follower fetches
expand, both proposed conditionally on the cached zkVersion through ``isr_writer``
(AlterIsr to the controller, or on the classic path a ZooKeeper write off the
reactor, then ``isr-change-propagation`` every 2.5 s batches them into notifications).
A partition whose log dir failed leaves ``partitions`` for ``offline_partitions``
(``mark_partitions_offline``) and is answered KAFKA_STORAGE_ERROR until restart.
Sans-IO: the scheduler (``callLater``/``seconds``), the log manager and the
ZooKeeper writers are injected; record bytes are never decoded here.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Mapping

from odradek.broker.completion import Completion
from odradek.protocol.errors import ErrorCode, KafkaError

from twisted.internet import defer, task

from .delayed import (DelayedFetch, DelayedProduce, FetchParams, FetchPartition, ProducePartitionStatus,
                      Purgatory, replicated_now)
from ..log.partition_metadata import TopicIdWriter
from ..log.read_buffers import ReadBuffers
from ..metadata_cache import MetadataCache, PartitionMetadata
from ..periodic import items_from_thread
from ..metrics import (FAILED_FETCH, FAILED_PRODUCE, TOTAL_FETCH, TOTAL_PRODUCE, TopicStats, count_append,
                       count_bytes_out, count_failure, count_request)
from .isr_maintenance import IsrMaintenance, log_leader_and_isr
from .isr_propagation import IsrChangePropagation
from .partition import Partition
from .partition_results import _aborted_in, fetch_error, produce_error
from .replication_quota import ReplicationQuota, is_throttled

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1


class ReplicaManager(IsrMaintenance):
    """Hosted partitions, the produce and fetch purgatories, HW checkpoints."""

    def __init__(self, broker_id: int, config: Any, log_manager: Any, metadata_cache: MetadataCache,
                 scheduler: Any, log_config_for: Callable[[str], Any] | None = None,
                 isr_writer: Callable[[dict[TopicPartition, Any]], defer.Deferred] | None = None,
                 isr_notifier: Callable[[list[TopicPartition]], defer.Deferred] | None = None,
                 run_blocking: Callable[..., defer.Deferred] | None = None):
        self.broker_id = broker_id
        self.config = config
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.scheduler = scheduler
        self.read_buffers = ReadBuffers()   # what fetches read large segment chunks into (reused)
        self.partitions: dict[TopicPartition, Partition] = {}
        # replicas whose log dir failed (Kafka's HostedPartition.Offline): answered KAFKA_STORAGE_ERROR
        # until restart (``broker/replication/log_dir_failure_handler.py``)
        self.offline_partitions: set[TopicPartition] = set()
        self.failure_channel = getattr(log_manager, "failure_channel", None)
        self.controller_epoch = -1
        self.log_configs: dict[str, Any] = {}
        self._log_config_for = log_config_for
        self.produce_purgatory = Purgatory("produce", scheduler)
        self.fetch_purgatory = Purgatory("fetch", scheduler)
        self.delete_records_purgatory = Purgatory("delete-records", scheduler)
        # a flush.messages group commit (``log_syncs.py``) re-checks the produces parked for it
        self.log_syncs = syncs = getattr(log_manager, "syncs", None)
        self._sync_groups: dict = {} if syncs is None else syncs.running   # (acks=1 waits while one runs)
        if syncs is not None:
            syncs.on_synced = lambda log_: self.produce_purgatory.check_and_complete(log_.topic_partition)
        self._checkpoint_hws: dict[TopicPartition, int] = {}
        # partition.metadata written in one batch per LeaderAndIsr on a thread (``run_blocking``)
        self.topic_ids = TopicIdWriter(run_blocking)
        self.run_blocking, self._removals = run_blocking, 0   # (removals: partitions deleted or offline)
        # Hooks for the replica fetcher manager: called with lists of Partitions / tps.
        self.on_become_follower: Callable[[list[Partition]], None] = lambda parts: None
        self.on_stop_following: Callable[[list[TopicPartition]], None] = lambda tps: None
        # Hooks for the group coordinator (Kafka's onLeadershipChange / StopReplica resignation):
        # (partitions now led, partitions now followed) after LeaderAndIsr; tps after StopReplica.
        self.on_leadership_change: Callable[[list[Partition], list[Partition]], None] = lambda ls, fs: None
        self.on_stop_replicas: Callable[[list[TopicPartition]], None] = lambda tps: None
        self.cleaner: Any = None         # the log cleaner, told of follower truncations (or None)
        self.log_dir_mover: Any = None   # moves between log dirs (``log_dir_mover``), or None
        # ISR changes: ({tp: LeaderIsrAndControllerEpoch}) -> Deferred[{tp: new zk_version | None |
        # Exception}] (AlterIsr, or the classic ZooKeeper write), and for the classic path only
        # (tps) -> Deferred (one /isr_change_notification node); None = none.
        self.isr_writer = isr_writer
        self.isr_notifier = isr_notifier
        self.lag_time_max_ms = int(config["replica.lag.time.max.ms"])
        self.isr_propagation = IsrChangePropagation(self.now_ms())
        self.leader_endpoints: dict[int, tuple[str, int]] = {}  # from LeaderAndIsr live_leaders
        # inter-broker replication throttles (``replication_quota``; limits from dynamic broker configs)
        self.leader_quota = ReplicationQuota()
        self.follower_quota = ReplicationQuota()
        self._loops: list[task.LoopingCall] = []
        self.topic_stats: TopicStats | None = None   # Kafka's BrokerTopicStats when metrics are on
        self.isr_changes = [0, 0]   # ISR expansions, shrinks written by this leader (Kafka's meters)

    def now_ms(self) -> int:
        return int(self.scheduler.seconds() * 1000)

    def startup(self) -> None:
        try:
            self._checkpoint_hws = dict(self.log_manager.read_high_watermarks())
        except Exception:
            log.exception("could not read high-watermark checkpoints; starting from log start offsets")
            self._checkpoint_hws = {}
        self.isr_propagation = IsrChangePropagation(self.now_ms())
        self._loops = self.isr_tasks()

    def shutdown(self) -> None:
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops = []
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()
        self.delete_records_purgatory.shutdown()
        self.topic_ids.write_pending()
        self.checkpoint_high_watermarks()

    # ------------------------------------------------------------------ lookups

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def leader_partition(self, tp: TopicPartition) -> Partition:
        """The partition if this broker leads it, else KafkaError with Kafka's code."""
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            if tp in self.offline_partitions:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"the log dir of {tp[0]}-{tp[1]} is offline")
            if self.metadata_cache.partition_state(*tp) is not None:
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not p.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return p

    def log_config(self, topic: str) -> Any:
        cfg = self.log_configs.get(topic)
        if cfg is None and self._log_config_for is not None:
            cfg = self._log_config_for(topic)
        return cfg

    def is_throttled(self, side: str, tp: TopicPartition) -> bool:
        """Does the topic's ``<side>.replication.throttled.replicas`` throttle ``tp`` on this broker?"""
        cfg = self.log_config(tp[0])
        return cfg is not None and is_throttled(cfg[f"{side}.replication.throttled.replicas"], tp[1], self.broker_id)

    def _leader_throttled(self, p: Partition, replica_id: int) -> bool:
        """Kafka's shouldLeaderThrottle but for the rate: a follower outside the ISR of a throttled
        partition (it gets no data while the leader-side quota is exceeded)."""
        return self.leader_quota.enabled and replica_id not in p.isr and self.is_throttled("leader", p.tp)

    def min_insync_replicas(self, topic: str) -> int:
        cfg = self.log_config(topic)
        if cfg is not None:
            return int(cfg["min.insync.replicas"])
        return int(self.config["min.insync.replicas"])

    # --------------------------------------------------- controller requests

    def become_leader_or_follower(self, controller_epoch: int, states: Iterable[PartitionMetadata],
                                  log_configs: dict[str, Any] | None = None
                                  ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Apply a LeaderAndIsr request; returns (top-level error, per-partition errors)."""
        states = list(states)
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH, {(s.topic, s.partition): ErrorCode.STALE_CONTROLLER_EPOCH
                                                      for s in states}
        self.controller_epoch = controller_epoch
        if log_configs:
            self.log_configs.update(log_configs)
        errors: dict[TopicPartition, ErrorCode] = {}
        leaders: list[PartitionMetadata] = []
        followers: list[PartitionMetadata] = []
        for st in states:
            tp = (st.topic, st.partition)
            current = self.partitions.get(tp)
            current_epoch = current.leader_epoch if current is not None else -1
            if tp in self.offline_partitions:
                log.warning("LeaderAndIsr for %s-%d: its log dir is offline", st.topic, st.partition)
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
            elif st.leader_epoch <= current_epoch:
                log.debug("ignoring LeaderAndIsr for %s-%d: leader epoch %d is not newer than %d",
                          st.topic, st.partition, st.leader_epoch, current_epoch)
                errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
            elif self.broker_id not in st.replicas:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                (leaders if st.leader == self.broker_id else followers).append(st)
        new_leaders: list[Partition] = []
        new_followers: list[Partition] = []
        for st in leaders + followers:
            tp = (st.topic, st.partition)
            try:
                log_ = self._get_or_create_log(tp, st.is_new)
                if st.topic_id is not None:
                    self.topic_ids.confirm(log_, st.topic_id)
                p = self.partitions.get(tp) or Partition(st.topic, st.partition, self.broker_id,
                                                         self.lag_time_max_ms)
                p.on_truncate = self._on_truncate
                p.failure_channel = self.failure_channel
                hw = self._checkpoint_hws.pop(tp, None)
                if st.leader == self.broker_id:
                    if p.make_leader(st, log_, hw, self.now_ms()):
                        new_leaders.append(p)
                    log.debug("became leader of %s-%d at epoch %d (isr %s, LEO %d, HW %d)", st.topic,
                             st.partition, st.leader_epoch, st.isr, p.log_end_offset, p.high_watermark)
                else:
                    if p.make_follower(st, log_, hw):
                        new_followers.append(p)
                    log.debug("became follower of %s-%d at epoch %d (leader %d)", st.topic, st.partition,
                              st.leader_epoch, st.leader)
                self.partitions[tp] = p
                errors[tp] = ErrorCode.NONE
            except KafkaError as e:
                log.error("LeaderAndIsr for %s-%d failed: %s", st.topic, st.partition, e)
                errors[tp] = e.code
            except Exception:
                log.exception("LeaderAndIsr for %s-%d failed", st.topic, st.partition)
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
            self._wake(tp)
        self.topic_ids.flush()
        leader_tps = [(s.topic, s.partition) for s in leaders if errors.get((s.topic, s.partition)) == 0]
        if leader_tps:
            self.on_stop_following(leader_tps)
        if new_followers:
            self.become_follower(new_followers)
        done = [self.partitions[(s.topic, s.partition)] for s in leaders + followers
                if errors.get((s.topic, s.partition)) == 0]
        # The coordinators hear of new leaderships and leader changes only, as Kafka's
        # onLeadershipChange: a leader told again (an ISR shrink bumps the leader epoch) keeps
        # its loaded group and transaction state instead of reloading it.
        try:
            self.on_leadership_change(new_leaders, new_followers)
        except Exception:
            log.exception("leadership change hook failed")
        log_leader_and_isr(self.broker_id, controller_epoch, len(states), errors, done)
        return ErrorCode.NONE, errors

    def become_follower(self, partitions: list[Partition]) -> None:
        """Hook for the replica fetcher: start fetching these partitions from their leaders."""
        self.on_become_follower(partitions)

    def stop_replicas(self, controller_epoch: int,
                      partitions: Iterable[tuple[TopicPartition, bool, int]]
                      ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Apply StopReplica: (tp, delete, leader_epoch) per partition."""
        partitions = list(partitions)
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH, {tp: ErrorCode.STALE_CONTROLLER_EPOCH
                                                      for tp, _, _ in partitions}
        self.controller_epoch = controller_epoch
        errors: dict[TopicPartition, ErrorCode] = {}
        stopped: list[TopicPartition] = []
        for tp, delete, epoch in partitions:
            p = self.partitions.get(tp)
            if tp in self.offline_partitions:
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if p is not None and epoch not in (EPOCH_DURING_DELETE, NO_EPOCH) and epoch <= p.leader_epoch:
                errors[tp] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            stopped.append(tp)
            errors[tp] = ErrorCode.NONE
        if stopped:
            self.on_stop_following(stopped)
            try:
                self.on_stop_replicas(stopped)
            except Exception:
                log.exception("stop replica hook failed")
        for tp, delete, _ in partitions:
            if errors.get(tp) != ErrorCode.NONE or not delete:
                continue
            self.partitions.pop(tp, None)
            self._checkpoint_hws.pop(tp, None)
            self._removals += 1
            try:
                lg = self.log_manager.get_log(tp)
                if lg is not None:
                    self.topic_ids.forget(lg.dir)
                    self.log_manager.delete_log(tp)
                    log.info("deleted log of %s-%d", *tp)
            except Exception:
                log.exception("deleting the log of %s-%d failed", *tp)
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
        for tp in stopped:
            self._wake(tp)
        return ErrorCode.NONE, errors

    def mark_partitions_offline(self, tps: Iterable[TopicPartition]) -> None:
        """Their log dir failed: no longer led or followed here, KAFKA_STORAGE_ERROR until restart."""
        for tp in tps:
            p = self.partitions.pop(tp, None)
            if p is not None:
                p.log = None
            self.offline_partitions.add(tp)
            self._checkpoint_hws.pop(tp, None)
            self._removals += 1

    def wake(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self._wake(tp)

    def _get_or_create_log(self, tp: TopicPartition, is_new: bool) -> Any:
        existing = self.log_manager.get_log(tp)
        if existing is not None:
            return existing
        return self.log_manager.get_or_create_log(tp, self.log_config(tp[0]), is_new)

    def _on_truncate(self, tp: TopicPartition, offset: int) -> None:
        """A follower log was truncated to ``offset``: cleaning must restart from there at most,
        and a future log (a move between log dirs) is truncated too."""
        if self.log_dir_mover is not None:
            self.log_dir_mover.on_truncate(tp, offset)
        if self.cleaner is not None:
            try:
                self.cleaner.maybe_truncate_checkpoint(tp, offset)
            except Exception:
                log.exception("updating the cleaner checkpoint of %s-%d failed", *tp)

    def _wake(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)

    # ------------------------------------------------------------------ produce

    def append_records(self, timeout_ms: int, required_acks: int, entries: Mapping[TopicPartition, bytes | memoryview],
                       origin: str = "client") -> Completion[dict[TopicPartition, dict]]:
        """Append to leaders; completes with per-partition response dicts (later for acks=-1).
        ``origin`` "coordinator" lets the group/txn coordinators write transactional batches
        without sequence numbers (base sequence -1)."""
        return self._append_and_wait(timeout_ms, required_acks, entries, self._records_append(required_acks, origin),
                                     self.topic_stats)

    def append_one(self, timeout_ms: int, required_acks: int, tp: TopicPartition, records: bytes | memoryview,
                   origin: str = "client") -> dict | Completion[dict[TopicPartition, dict]]:
        """``append_records`` of one partition: its response dict when it is known at once, else
        (acks=-1 waiting for the ISR, acks=1 for a group commit) the Completion it would return."""
        result, required = self._append_partition(tp, records, self._records_append(required_acks, origin),
                                                  self.topic_stats)
        if required < 0 or required_acks == 0 or (required_acks == 1 and not self._sync_groups):
            return result   # (_waiting's first test, without its dicts)
        if required_acks == -1:   # replicated_now of one partition, without its dicts
            reached, code = self._check_replicas_reached(tp, required)
            if reached:
                result["error_code"] = int(code)
                return result
            return self._park(timeout_ms, self._check_replicas_reached, {tp: result}, {tp: required})
        waiting = self._waiting(timeout_ms, required_acks, {tp: result}, {tp: required})
        return result if waiting is None else waiting

    def _records_append(self, required_acks: int, origin: str
                        ) -> Callable[[TopicPartition, Partition, bytes | memoryview], Any]:
        def append(tp: TopicPartition, p: Partition, records: bytes | memoryview) -> Any:
            # min.insync.replicas matters to acks=-1 only (a topic config lookup per partition)
            min_isr = self.min_insync_replicas(tp[0]) if required_acks == -1 else 1
            return p.append_as_leader(records, required_acks, min_isr, self.now_ms(), origin)
        return append

    def append_txn_markers(self, timeout_ms: int, markers: dict[TopicPartition, tuple[int, int, bool, int]]
                           ) -> Completion[dict[TopicPartition, dict]]:
        """Append end-transaction markers (producer_id, producer_epoch, commit, coordinator_epoch)
        as leader and answer once they are replicated (acks=-1), like a produce."""
        def append(tp: TopicPartition, p: Partition, marker: tuple[int, int, bool, int]) -> Any:
            return p.append_marker_as_leader(*marker, self.min_insync_replicas(tp[0]), self.now_ms())
        return self._append_and_wait(timeout_ms, -1, markers, append)

    def _append_and_wait(self, timeout_ms: int, required_acks: int, entries: Mapping[TopicPartition, Any],
                         append: Callable[[TopicPartition, Partition, Any], Any], stats: TopicStats | None = None
                         ) -> Completion[dict[TopicPartition, dict]]:
        results: dict[TopicPartition, dict] = {}
        required: dict[TopicPartition, int] = {}
        for tp, item in entries.items():
            results[tp], offset = self._append_partition(tp, item, append, stats)
            if offset >= 0:
                required[tp] = offset
        waiting = self._waiting(timeout_ms, required_acks, results, required)
        return Completion.completed(results) if waiting is None else waiting

    def _append_partition(self, tp: TopicPartition, item: Any, append: Callable[[TopicPartition, Partition, Any], Any],
                          stats: TopicStats | None) -> tuple[dict, int]:
        """One partition's append as leader: (its response dict, the offset acks=-1 waits for, or -1
        when nothing was appended)."""
        counts = count_request(stats, tp[0], TOTAL_PRODUCE)
        try:
            p = self.partitions.get(tp)
            if p is None or p.leader_id != self.broker_id or p.log is None:   # is_leader, in place
                p = self.leader_partition(tp)   # raises Kafka's error for it
            info = append(tp, p, item)
            count_append(counts, info.last_offset - info.first_offset + 1, len(item))
            self.fetch_purgatory.check_and_complete(tp)
            return {"error_code": 0, "base_offset": info.first_offset, "log_append_time_ms": info.log_append_time,
                    "log_start_offset": info.log_start_offset}, info.last_offset + 1
        except KafkaError as e:
            if e.code not in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                log.info("produce to %s-%d failed: %s", tp[0], tp[1], e)
            count_failure(counts, FAILED_PRODUCE, e.code)
            return produce_error(e.code, e), -1
        except Exception:
            log.exception("produce to %s-%d failed", *tp)
            count_failure(counts, FAILED_PRODUCE, ErrorCode.UNKNOWN_SERVER_ERROR)
            return produce_error(ErrorCode.UNKNOWN_SERVER_ERROR), -1

    def _waiting(self, timeout_ms: int, required_acks: int, results: dict[TopicPartition, dict],
                 required: dict[TopicPartition, int]) -> Completion[dict[TopicPartition, dict]] | None:
        """None when ``results`` are answered now, else their Completion once each ``required`` offset
        is replicated to the ISR (acks=-1) or synced by the leader's group commit (acks=1 with
        ``flush.messages``: ``log_syncs.py``), or time is up."""
        if not required or required_acks == 0 or (required_acks == 1 and not self._sync_groups):
            return None
        check = self._check_replicas_reached if required_acks == -1 else self._check_synced
        if replicated_now(check, results, required):
            return None
        return self._park(timeout_ms, check, results, required)

    def _park(self, timeout_ms: int, check: Callable[[TopicPartition, int], tuple[bool, ErrorCode]],
              results: dict[TopicPartition, dict], required: dict[TopicPartition, int]
              ) -> Completion[dict[TopicPartition, dict]]:
        """A DelayedProduce for ``results``, watched on each ``required`` partition (``check`` found
        one of them short already)."""
        done: Completion[dict[TopicPartition, dict]] = Completion()
        statuses = {tp: ProducePartitionStatus(required.get(tp, -1), res, pending=tp in required)
                    for tp, res in results.items()}
        op = DelayedProduce(timeout_ms, statuses, check, done.complete)
        self.produce_purgatory.watch(op, list(required))   # (replicated_now found it incomplete)
        return done

    def _check_replicas_reached(self, tp: TopicPartition, required_offset: int) -> tuple[bool, ErrorCode]:
        p = self.partitions.get(tp)
        if p is None:
            return True, (ErrorCode.KAFKA_STORAGE_ERROR if tp in self.offline_partitions
                          else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return p.check_enough_replicas_reach_offset(required_offset, lambda: self.min_insync_replicas(tp[0]))

    def _check_synced(self, tp: TopicPartition, required_offset: int) -> tuple[bool, ErrorCode]:
        """acks=1: done once the leader's log has no group commit due below ``required_offset``."""
        p = self.partitions.get(tp)
        if p is None or not p.is_leader:
            return self._check_replicas_reached(tp, required_offset)   # the error to answer
        return not p.log.awaits_sync(required_offset), ErrorCode.NONE

    # -------------------------------------------------------------------- fetch

    def fetch_messages(self, params: FetchParams) -> Completion[list[tuple[FetchPartition, dict]]]:
        """Read now, or park until min_bytes are readable or max_wait_ms passes."""
        results = self.read_from_local_log(params, record_follower=params.is_from_follower)
        total = sum(len(r["records"]) for _, r in results)
        errored = any(r["error_code"] or "diverging_epoch" in r for _, r in results)
        stats = self.topic_stats
        if params.max_wait_ms <= 0 or not params.partitions or total >= params.min_bytes or errored:
            if stats is not None:
                count_bytes_out(stats, results, params.is_from_follower)
            return Completion.completed(results)
        done: Completion[list[tuple[FetchPartition, dict]]] = Completion()
        if stats is not None:
            done.add_callback(lambda res: count_bytes_out(stats, res, params.is_from_follower))
        # nothing found: kept as the answer unless a key fires (a quota may lift with none firing)
        empty = results if total == 0 and not self.leader_quota.enabled else None
        op = DelayedFetch(params, self._fetchable, self.read_from_local_log, done.complete, empty_results=empty)
        keys = [fp.tp for fp in params.partitions]
        if empty is None:
            self.fetch_purgatory.try_complete_else_watch(op, keys)
        else:
            self.fetch_purgatory.watch(op, keys)   # just read: nothing to check again this turn
        return done

    def read_from_local_log(self, params: FetchParams, record_follower: bool = False
                            ) -> list[tuple[FetchPartition, dict]]:
        """Each partition's answer. ``record_follower``: also record the fetching follower's
        position in each partition first (once per request, not again when a parked fetch
        is read), so that the answer carries the HW this fetch moved."""
        from_follower = params.is_from_follower
        remaining = max(params.max_bytes, 0)
        min_one_batch = True
        out: list[tuple[FetchPartition, dict]] = []
        stats = self.topic_stats
        now = self.now_ms() if record_follower else 0
        expand: list[Partition] = []
        for fp in params.partitions:
            counts = count_request(stats, fp.topic, TOTAL_FETCH)
            try:
                p = self.leader_partition(fp.tp)
                p.check_leader_epoch(fp.current_leader_epoch)
                log_ = p.log
                if fp.last_fetched_epoch >= 0:
                    diverged = p.diverging_epoch(fp.last_fetched_epoch, fp.fetch_offset)
                    if diverged is not None:   # no data: the fetcher truncates first (KIP-595)
                        out.append((fp, {"error_code": 0, "high_watermark": p.high_watermark,
                                         "last_stable_offset": p.last_stable_offset,
                                         "log_start_offset": log_.log_start_offset, "records": b"",
                                         "diverging_epoch": diverged}))
                        continue
                if not log_.offset_in_range(fp.fetch_offset):
                    raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {fp.fetch_offset} not in "
                                     f"[{log_.log_start_offset}, {log_.log_end_offset}]")
                if record_follower:   # a LEO of this log, in this leader's epoch: the follower's position
                    if p.update_follower_fetch_state(params.replica_id, fp.fetch_offset, now, fp.log_start_offset):
                        self._wake(fp.tp)
                    self.delete_records_purgatory.check_and_complete(fp.tp)
                    if p.needs_expand_isr(params.replica_id):
                        expand.append(p)
                end = p.fetch_end_offset(from_follower, params.isolation_level)
                records = b""
                limit = min(fp.max_bytes, remaining)
                throttled = from_follower and self._leader_throttled(p, params.replica_id)
                held = throttled and self.leader_quota.is_exceeded(self.scheduler.seconds())
                if fp.fetch_offset < end and not held and (limit > 0 or min_one_batch):
                    with p.io_guard("reading"):
                        records = log_.read(fp.fetch_offset, limit, end, min_one_batch, self.read_buffers)
                    if records:
                        min_one_batch = False
                        remaining = max(remaining - len(records), 0)
                        if throttled:
                            self.leader_quota.record(len(records), self.scheduler.seconds())
                result = {"error_code": 0, "high_watermark": p.high_watermark,
                          "last_stable_offset": p.last_stable_offset,
                          "log_start_offset": log_.log_start_offset, "records": records}
                if params.isolation_level == 1 and not from_follower:
                    result["aborted_transactions"] = _aborted_in(log_, fp.fetch_offset, records)
                out.append((fp, result))
            except KafkaError as e:
                out.append((fp, fetch_error(e.code)))
                count_failure(counts, FAILED_FETCH, e.code)
            except Exception:
                log.exception("fetch from %s-%d failed", *fp.tp)
                out.append((fp, fetch_error(ErrorCode.UNKNOWN_SERVER_ERROR)))
                count_failure(counts, FAILED_FETCH, ErrorCode.UNKNOWN_SERVER_ERROR)
        if expand:
            self.expand_isr(expand, params.replica_id)
        return out

    def _fetchable(self, params: FetchParams, fp: FetchPartition, needed: int) -> int | None:
        """Bytes now readable for a parked fetch; None = answer at once."""
        p = self.partitions.get(fp.tp)
        if p is None or not p.is_leader:
            return None
        if fp.current_leader_epoch >= 0 and fp.current_leader_epoch != p.leader_epoch:
            return None
        log_ = p.log
        if not log_.offset_in_range(fp.fetch_offset):
            return None
        if fp.last_fetched_epoch >= 0 and p.has_diverged(fp.last_fetched_epoch, fp.fetch_offset):
            return None   # the fetcher must hear of the divergence now (Kafka's DelayedFetch)
        end = p.fetch_end_offset(params.is_from_follower, params.isolation_level)
        if fp.fetch_offset >= end:
            return 0
        if (params.is_from_follower and self._leader_throttled(p, params.replica_id)
                and self.leader_quota.is_exceeded(self.scheduler.seconds())):
            return 0   # throttled data does not complete a parked follower fetch (Kafka's DelayedFetch)
        if needed <= 1:
            return 1
        # Kafka counts min(bytes up to the end offset, partition max bytes), from positions; it
        # answers at once when the two offsets are in different segments (a roll, a truncation)
        try:
            with p.io_guard("reading"):
                span = log_.bytes_between(fp.fetch_offset, end)
        except KafkaError:
            return None   # answered at once: the read gives the partition's error
        return None if span is None else min(span, fp.max_bytes)

    # -------------------------------------------------------------- checkpoints

    def high_watermarks(self) -> dict[TopicPartition, int]:
        """Hosted partitions' HWs, and the checkpointed ones of those not hosted; safe on a thread."""
        hws = dict(items_from_thread(self._checkpoint_hws))
        hws.update({tp: p.high_watermark for tp, p in items_from_thread(self.partitions) if p.log is not None})
        return hws

    def checkpoint_high_watermarks(self) -> None:
        """Write ``replication-offset-checkpoint`` (on a thread, in the broker); again if a partition was
        deleted meanwhile, so that a topic created again never starts from the old one's HW."""
        for _ in range(3):
            removals = self._removals
            try:
                self.log_manager.write_high_watermarks(self.high_watermarks())
            except Exception:
                log.exception("writing the high-watermark checkpoint failed")
                return
            if self._removals == removals:
                return
