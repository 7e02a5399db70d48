"""The partitions hosted on this broker, and produce/fetch against them.

Invariant: partitions change role only through ``become_leader_or_follower`` and
leave only through ``stop_replicas`` (both from the controller, rejected for a
stale controller epoch). Produce appends only on the leader; acks=-1 responses
wait in the produce purgatory until the HW covers the append; fetches that find
fewer than min_bytes wait in the fetch purgatory; both are re-checked whenever a
partition's LEO/HW or role changes. Sans-IO: the scheduler (``callLater``) and
the log manager are injected; record bytes are never decoded here.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

from odradek.protocol.errors import ErrorCode, KafkaError

from .delayed import (DelayedFetch, DelayedProduce, FetchParams, FetchPartition, ProducePartitionStatus,
                      Purgatory)
from .metadata_cache import MetadataCache, PartitionState
from .partition import Partition

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1


def produce_error(code: ErrorCode | int) -> dict:
    return {"error_code": int(code), "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1}


def fetch_error(code: ErrorCode | int) -> dict:
    return {"error_code": int(code), "high_watermark": -1, "last_stable_offset": -1,
            "log_start_offset": -1, "records": b""}


class ReplicaManager:
    """Hosted partitions, the produce and fetch purgatories, HW checkpoints."""

    def __init__(self, broker_id: int, config: Any, log_manager: Any, metadata_cache: MetadataCache,
                 scheduler: Any, log_config_for: Callable[[str], Any] | None = None):
        self.broker_id = broker_id
        self.config = config
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.scheduler = scheduler
        self.partitions: dict[TopicPartition, Partition] = {}
        self.controller_epoch = -1
        self.log_configs: dict[str, Any] = {}
        self._log_config_for = log_config_for
        self.produce_purgatory = Purgatory("produce", scheduler)
        self.fetch_purgatory = Purgatory("fetch", scheduler)
        self._checkpoint_hws: dict[TopicPartition, int] = {}
        # Hooks for the replica fetcher (issue 3): called with lists of Partitions.
        self.on_become_follower: Callable[[list[Partition]], None] = lambda parts: None
        self.on_stop_following: Callable[[list[TopicPartition]], None] = lambda tps: None

    def startup(self) -> None:
        try:
            self._checkpoint_hws = dict(self.log_manager.read_high_watermarks())
        except Exception:
            log.exception("could not read high-watermark checkpoints; starting from log start offsets")
            self._checkpoint_hws = {}

    def shutdown(self) -> None:
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()
        self.checkpoint_high_watermarks()

    # ------------------------------------------------------------------ lookups

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def leader_partition(self, tp: TopicPartition) -> Partition:
        """The partition if this broker leads it, else KafkaError with Kafka's code."""
        p = self.partitions.get(tp)
        if p is None or p.log is None:
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

    def min_insync_replicas(self, topic: str) -> int:
        cfg = self.log_config(topic)
        if cfg is not None:
            return int(cfg["min.insync.replicas"])
        return int(self.config["min.insync.replicas"])

    # --------------------------------------------------- controller requests

    def become_leader_or_follower(self, controller_epoch: int, states: Iterable[PartitionState],
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
        leaders: list[PartitionState] = []
        followers: list[PartitionState] = []
        for st in states:
            tp = (st.topic, st.partition)
            current = self.partitions.get(tp)
            current_epoch = current.leader_epoch if current is not None else -1
            if st.leader_epoch <= current_epoch:
                log.info("ignoring LeaderAndIsr for %s-%d: leader epoch %d is not newer than %d",
                         st.topic, st.partition, st.leader_epoch, current_epoch)
                errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
            elif self.broker_id not in st.replicas:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                (leaders if st.leader == self.broker_id else followers).append(st)
        new_followers: list[Partition] = []
        for st in leaders + followers:
            tp = (st.topic, st.partition)
            try:
                log_ = self._get_or_create_log(tp)
                p = self.partitions.get(tp) or Partition(st.topic, st.partition, self.broker_id)
                hw = self._checkpoint_hws.pop(tp, None)
                if st.leader == self.broker_id:
                    p.make_leader(st, log_, hw)
                    log.info("became leader of %s-%d at epoch %d (isr %s, LEO %d, HW %d)", st.topic,
                             st.partition, st.leader_epoch, st.isr, p.log_end_offset, p.high_watermark)
                else:
                    p.make_follower(st, log_, hw)
                    new_followers.append(p)
                    log.info("became follower of %s-%d at epoch %d (leader %d)", st.topic, st.partition,
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
        leader_tps = [(s.topic, s.partition) for s in leaders if errors.get((s.topic, s.partition)) == 0]
        if leader_tps:
            self.on_stop_following(leader_tps)
        if new_followers:
            self.become_follower(new_followers)
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
            if p is not None and epoch not in (EPOCH_DURING_DELETE, NO_EPOCH) and epoch <= p.leader_epoch:
                errors[tp] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            stopped.append(tp)
            errors[tp] = ErrorCode.NONE
        if stopped:
            self.on_stop_following(stopped)
        for tp, delete, _ in partitions:
            if errors.get(tp) != ErrorCode.NONE or not delete:
                continue
            self.partitions.pop(tp, None)
            self._checkpoint_hws.pop(tp, None)
            try:
                if self.log_manager.get_log(tp) is not None:
                    self.log_manager.delete_log(tp)
                    log.info("deleted log of %s-%d", *tp)
            except Exception:
                log.exception("deleting the log of %s-%d failed", *tp)
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
        for tp in stopped:
            self._wake(tp)
        return ErrorCode.NONE, errors

    def _get_or_create_log(self, tp: TopicPartition) -> Any:
        existing = self.log_manager.get_log(tp)
        if existing is not None:
            return existing
        return self.log_manager.get_or_create_log(tp, self.log_config(tp[0]))

    def _wake(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    # ------------------------------------------------------------------ produce

    def append_records(self, timeout_ms: int, required_acks: int, entries: dict[TopicPartition, bytes],
                       respond: Callable[[dict[TopicPartition, dict]], None]) -> None:
        """Append to leaders; ``respond`` gets per-partition response dicts (maybe later)."""
        results: dict[TopicPartition, dict] = {}
        required: dict[TopicPartition, int] = {}
        for tp, records in entries.items():
            try:
                p = self.leader_partition(tp)
                info = p.append_as_leader(records, required_acks, self.min_insync_replicas(tp[0]))
                results[tp] = {"error_code": 0, "base_offset": info.first_offset,
                               "log_append_time_ms": info.log_append_time,
                               "log_start_offset": info.log_start_offset}
                required[tp] = info.last_offset + 1
                self.fetch_purgatory.check_and_complete(tp)
            except KafkaError as e:
                if e.code not in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    log.info("produce to %s-%d failed: %s", tp[0], tp[1], e)
                results[tp] = produce_error(e.code)
            except Exception:
                log.exception("produce to %s-%d failed", *tp)
                results[tp] = produce_error(ErrorCode.UNKNOWN_SERVER_ERROR)
        if required_acks != -1 or not required:
            respond(results)
            return
        statuses = {tp: ProducePartitionStatus(required.get(tp, -1), res, pending=tp in required)
                    for tp, res in results.items()}
        op = DelayedProduce(timeout_ms, statuses, self._check_replicas_reached, respond)
        self.produce_purgatory.try_complete_else_watch(op, list(required))

    def _check_replicas_reached(self, tp: TopicPartition, required_offset: int) -> tuple[bool, ErrorCode]:
        p = self.partitions.get(tp)
        if p is None:
            return True, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return p.check_enough_replicas_reach_offset(required_offset, self.min_insync_replicas(tp[0]))

    # -------------------------------------------------------------------- fetch

    def fetch_messages(self, params: FetchParams, respond: Callable[[list[tuple[FetchPartition, dict]]], None]
                       ) -> None:
        """Read now, or park until min_bytes are readable or max_wait_ms passes."""
        if params.is_from_follower:  # first, so the response carries the HW this fetch moved
            self._update_follower_fetch_states(params)
        results = self.read_from_local_log(params)
        total = sum(len(r["records"]) for _, r in results)
        errored = any(r["error_code"] for _, r in results)
        if params.max_wait_ms <= 0 or not params.partitions or total >= params.min_bytes or errored:
            respond(results)
            return
        op = DelayedFetch(params, self._fetchable, self.read_from_local_log, respond)
        self.fetch_purgatory.try_complete_else_watch(op, [fp.tp for fp in params.partitions])

    def read_from_local_log(self, params: FetchParams) -> list[tuple[FetchPartition, dict]]:
        from_follower = params.is_from_follower
        remaining = max(params.max_bytes, 0)
        min_one_batch = True
        out: list[tuple[FetchPartition, dict]] = []
        for fp in params.partitions:
            try:
                p = self.leader_partition(fp.tp)
                p.check_leader_epoch(fp.current_leader_epoch)
                log_ = p.log
                start, leo = log_.log_start_offset, log_.log_end_offset
                if fp.fetch_offset < start or fp.fetch_offset > leo:
                    raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                     f"offset {fp.fetch_offset} not in [{start}, {leo}]")
                end = p.fetch_end_offset(from_follower)
                records = b""
                limit = min(fp.max_bytes, remaining)
                if fp.fetch_offset < end and (limit > 0 or min_one_batch):
                    records = log_.read(fp.fetch_offset, limit, max_offset=end, min_one_batch=min_one_batch)
                    if records:
                        min_one_batch = False
                        remaining = max(remaining - len(records), 0)
                hw = p.high_watermark
                out.append((fp, {"error_code": 0, "high_watermark": hw, "last_stable_offset": hw,
                                 "log_start_offset": log_.log_start_offset, "records": records}))
            except KafkaError as e:
                out.append((fp, fetch_error(e.code)))
            except Exception:
                log.exception("fetch from %s-%d failed", *fp.tp)
                out.append((fp, fetch_error(ErrorCode.UNKNOWN_SERVER_ERROR)))
        return out

    def _update_follower_fetch_states(self, params: FetchParams) -> None:
        for fp in params.partitions:
            p = self.partitions.get(fp.tp)
            if p is not None and p.is_leader and p.update_follower_fetch_state(params.replica_id, fp.fetch_offset):
                self._wake(fp.tp)

    def _fetchable(self, params: FetchParams, fp: FetchPartition, needed: int) -> int | None:
        """Bytes now readable for a parked fetch; None = answer at once."""
        p = self.partitions.get(fp.tp)
        if p is None or not p.is_leader:
            return None
        if fp.current_leader_epoch >= 0 and fp.current_leader_epoch != p.leader_epoch:
            return None
        log_ = p.log
        if fp.fetch_offset < log_.log_start_offset or fp.fetch_offset > log_.log_end_offset:
            return None
        end = p.fetch_end_offset(params.is_from_follower)
        if fp.fetch_offset >= end:
            return 0
        if needed <= 1:
            return 1
        # Kafka counts min(bytes up to the end offset, partition max bytes)
        return len(log_.read(fp.fetch_offset, fp.max_bytes, max_offset=end, min_one_batch=True))

    # -------------------------------------------------------------- checkpoints

    def high_watermarks(self) -> dict[TopicPartition, int]:
        hws = dict(self._checkpoint_hws)
        hws.update({tp: p.high_watermark for tp, p in self.partitions.items() if p.log is not None})
        return hws

    def checkpoint_high_watermarks(self) -> None:
        try:
            self.log_manager.write_high_watermarks(self.high_watermarks())
        except Exception:
            log.exception("writing the high-watermark checkpoint failed")
