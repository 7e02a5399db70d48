"""One partition replica on this broker: role, leader epoch, ISR, high watermark.

Invariant: only the controller's LeaderAndIsr changes role and leader epoch
(``make_leader`` / ``make_follower``, accepted only for a newer leader epoch);
the leader itself changes the ISR only through a conditional ZooKeeper write
(``prepare_isr_update`` → ``complete_isr_update``, one at a time). As leader the
high watermark never decreases and is the minimum LEO over the ISR plus the
followers caught up within ``replica.lag.time.max.ms`` (Kafka's
``maybeIncrementLeaderHW``); as follower it is min(leader HW, own LEO). Follower
LEOs and ``lastCaughtUpTimeMs`` are learned from their fetches
(``Replica.updateFetchState``). Appends happen as leader stamped with the current
leader epoch after the idempotent-producer check, or as follower with the
leader's batches as they are. Producer state lives in the Log (rebuilt on recovery
and identical on every replica), so a new leader dedups retried batches. Consumers
read up to the HW, read_committed consumers up to the last stable offset. Every
log write (appends, truncation, the leader-epoch checkpoint) runs under the
``LogDirFailureChannel``'s guard: an I/O error marks the log dir offline and is
answered KAFKA_STORAGE_ERROR. Plain object: no I/O beyond the log; times are passed in (ms).
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Callable, Collection, ContextManager

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.znodes import LeaderIsrAndControllerEpoch

from ..metadata_cache import PartitionMetadata
from ..log.log_dir_failure import LogDirFailureChannel, log_dir_of
from ..log.producer_state import ORIGIN_CLIENT

log = logging.getLogger(__name__)

DEFAULT_LAG_TIME_MAX_MS = 30000
NEVER_MS = -(1 << 62)  # "never caught up" (Kafka uses 0, which only works with wall-clock times)


def epoch_cache_of(log_: Any) -> Any:
    """The log's leader-epoch cache, whatever the Log calls it (None if it has none)."""
    for name in ("leader_epoch_cache", "epoch_cache"):
        cache = getattr(log_, name, None)
        if cache is not None:
            return cache
    return None


@dataclass
class RemoteReplica:
    """The leader's view of one follower (Kafka's ``Replica``)."""
    leo: int = -1
    log_start_offset: int = -1     # as its last fetch said (-1: unknown)
    last_caught_up_time_ms: int = NEVER_MS
    last_fetch_leader_leo: int = -1
    last_fetch_time_ms: int = NEVER_MS

    def update_fetch_state(self, fetch_offset: int, fetch_time_ms: int, leader_leo: int) -> None:
        """``Replica.updateFetchState``: caught up now if at the leader's LEO, or caught up at
        the previous fetch if it reached the LEO the leader had then."""
        if fetch_offset >= leader_leo:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.leo = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_time_ms = fetch_time_ms

    def reset_last_caught_up_time(self, leader_leo: int, now_ms: int, last_caught_up_ms: int) -> None:
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_time_ms = now_ms
        self.last_caught_up_time_ms = last_caught_up_ms


class Partition:
    """A replica of (topic, partition) on broker ``broker_id``."""

    def __init__(self, topic: str, partition: int, broker_id: int,
                 lag_time_max_ms: int = DEFAULT_LAG_TIME_MAX_MS):
        self.topic = topic
        self.partition = partition
        self.name = f"{topic}-{partition}"
        self.broker_id = broker_id
        self.lag_time_max_ms = lag_time_max_ms
        self.log: Any = None
        self.leader_id = -1
        self.leader_epoch = -1
        self.controller_epoch = -1
        self.zk_version = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.pending_isr: list[int] | None = None   # ISR being written to ZooKeeper
        self.leader_epoch_start_offset: int | None = None
        self._high_watermark = 0
        self.remote: dict[int, RemoteReplica] = {}
        # told (tp, offset) after a truncation (the log cleaner's checkpoint must follow)
        self.on_truncate: Callable[[tuple[str, int], int], None] | None = None
        # where an I/O error on this replica's log dir is reported (None: errors pass through)
        self.failure_channel: LogDirFailureChannel | None = None
        self._guards: dict[str, tuple[Any, LogDirFailureChannel, str, ContextManager[None]]] = {}   # io_guard's

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def io_guard(self, what: str, log_: Any = None) -> ContextManager[None]:
        """Guard a log write: an OSError marks the log dir offline -> KAFKA_STORAGE_ERROR. A guard
        holds nothing between uses, so one per (what, log) is kept (it is on every produce's path)."""
        log_ = log_ if log_ is not None else self.log
        channel = self.failure_channel
        if channel is None or log_ is None:
            return contextlib.nullcontext()
        kept = self._guards.get(what)
        if kept is not None and kept[0] is log_ and kept[1] is channel and kept[2] == log_.dir:
            return kept[3]
        guard = channel.guard(log_dir_of(log_.dir), what, self.name)
        self._guards[what] = (log_, channel, log_.dir, guard)
        return guard

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        if self.log is not None:  # mirrored into the Log (clamped to [log start, LEO])
            value = self.log.update_high_watermark(value)
        self._high_watermark = value

    @property
    def producer_state(self) -> Any:
        """The log's producer state (None before a log is attached)."""
        return getattr(self.log, "producer_state", None)

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id and self.log is not None

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def maximal_isr(self) -> Collection[int]:
        """The ISR counting a pending change's additions (what the HW must respect): the ISR's
        own list while no change is pending (no sets built on every append)."""
        pending = self.pending_isr
        return self.isr if pending is None else set(self.isr) | set(pending)

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={self.isr}, hw={self.high_watermark})")

    # ------------------------------------------------------------- role changes

    def _apply_state(self, state: PartitionMetadata) -> None:
        self.controller_epoch = state.controller_epoch
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.zk_version = state.zk_version
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)
        self.pending_isr = None

    def make_leader(self, state: PartitionMetadata, log_: Any, checkpoint_hw: int | None = None,
                    now_ms: int = 0) -> bool:
        """Become leader at ``state.leader_epoch``; True if this broker was not leader before."""
        was_leader = self.is_leader
        if checkpoint_hw is not None and self.log is None:
            self.log = log_
            self.high_watermark = checkpoint_hw
        self.log = log_
        self._apply_state(state)
        leo = log_.log_end_offset
        cache = epoch_cache_of(log_)
        if cache is not None:
            cache.assign(state.leader_epoch, leo)
        self.leader_epoch_start_offset = leo
        old = self.remote
        self.remote = {}
        for r in self.replicas:
            if r == self.broker_id:
                continue
            st = RemoteReplica(leo=old[r].leo if (was_leader and r in old) else -1)
            st.reset_last_caught_up_time(leo, now_ms, now_ms if r in self.isr else NEVER_MS)
            if not was_leader:  # remote LEOs are unknown until the followers fetch again
                st.update_fetch_state(-1, NEVER_MS, -1)
            self.remote[r] = st
        self.high_watermark = self._high_watermark
        self.maybe_increment_high_watermark(now_ms)
        return not was_leader

    def make_follower(self, state: PartitionMetadata, log_: Any, checkpoint_hw: int | None = None) -> bool:
        """Follow ``state.leader``; True if the leader or the leader epoch changed (the
        fetcher must restart, with truncation)."""
        changed = self.leader_id != state.leader or self.log is None or state.leader_epoch > self.leader_epoch
        if checkpoint_hw is not None and self.log is None:
            self.log = log_
            self.high_watermark = checkpoint_hw
        self.log = log_
        self._apply_state(state)
        self.remote = {}
        self.leader_epoch_start_offset = None
        self.high_watermark = self._high_watermark
        return changed

    # ---------------------------------------------------------------- leader

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320 fencing: a client's epoch must equal ours (-1 = not checked)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
        raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    def _check_can_append(self, required_acks: int, min_insync_replicas: int) -> None:
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                             f"ISR {self.isr} is smaller than min.insync.replicas {min_insync_replicas}")

    def append_as_leader(self, records: bytes | memoryview, required_acks: int, min_insync_replicas: int,
                         now_ms: int = 0, origin: str = ORIGIN_CLIENT) -> Any:
        """Append a producer's batch; returns the log's LogAppendInfo (or a duplicate's)."""
        self._check_can_append(required_acks, min_insync_replicas)
        with self.io_guard("appending to"):
            info = self.log.append_as_leader(records, self.leader_epoch, origin)
        self.maybe_increment_high_watermark(now_ms)
        return info

    def append_marker_as_leader(self, producer_id: int, producer_epoch: int, commit: bool,
                                coordinator_epoch: int, min_insync_replicas: int, now_ms: int = 0) -> Any:
        """Append an end-transaction marker (acks=-1 semantics: NOT_ENOUGH_REPLICAS checked)."""
        self._check_can_append(-1, min_insync_replicas)
        with self.io_guard("appending a marker to"):
            info = self.log.append_marker_as_leader(producer_id, producer_epoch, commit, coordinator_epoch,
                                                    self.leader_epoch)
        self.maybe_increment_high_watermark(now_ms)
        return info

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, now_ms: int = 0,
                                    log_start_offset: int = -1) -> bool:
        """A follower fetched at ``fetch_offset`` (its LEO) with its log starting at
        ``log_start_offset``; True if the HW advanced."""
        st = self.remote.get(replica_id)
        if st is None or not self.is_leader:
            return False
        st.log_start_offset = log_start_offset
        prev = st.leo
        st.update_fetch_state(fetch_offset, now_ms, self.log.log_end_offset)
        if prev == st.leo:
            return False
        return self.maybe_increment_high_watermark(now_ms)

    def maybe_increment_high_watermark(self, now_ms: int = 0) -> bool:
        """HW = min LEO over the (maximal) ISR and recently caught-up followers; only moves
        forward. True if it moved."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        if self.remote:
            isr = self.maximal_isr
            for r, st in self.remote.items():
                if st.leo < new_hw and (r in isr or now_ms - st.last_caught_up_time_ms <= self.lag_time_max_ms):
                    new_hw = st.leo
        if new_hw > self._high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def low_watermark(self, alive: set[int]) -> int:
        """Kafka's lowWatermarkIfLeader: the lowest log start offset of this log and of the
        replicas on live brokers (-1 while one of them has not said)."""
        low = self.log.log_start_offset
        for r, st in self.remote.items():
            if r in alive:
                low = min(low, st.log_start_offset)
        return low

    def check_enough_replicas_reach_offset(self, required_offset: int,
                                           min_insync_replicas: Callable[[], int]) -> tuple[bool, ErrorCode]:
        """For DelayedProduce: (done, error) once HW ≥ ``required_offset`` and this log's group
        commit (``flush.messages``, ``log_syncs.py``) has synced it. ``min_insync_replicas`` is
        asked only then (a config lookup, skipped on every "not yet")."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark >= required_offset and not self.log.awaits_sync(required_offset):
            if len(self.maximal_isr) < min_insync_replicas():
                return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, ErrorCode.NONE
        return False, ErrorCode.NONE

    # ------------------------------------------------------------ ISR changes

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> set[int]:
        """ISR followers whose LEO != the leader's and that have not caught up for longer
        than ``max_lag_ms`` (``getOutOfSyncReplicas``); empty while an update is pending."""
        if not self.is_leader or self.pending_isr is not None:
            return set()
        leo = self.log.log_end_offset
        out = set()
        for r in self.isr:
            if r == self.broker_id:
                continue
            st = self.remote.get(r)
            if st is None or (st.leo != leo and now_ms - st.last_caught_up_time_ms > max_lag_ms):
                out.add(r)
        return out

    def needs_expand_isr(self, replica_id: int) -> bool:
        """A follower not in the ISR whose LEO reached the HW and the current epoch's start."""
        if not self.is_leader or self.pending_isr is not None or replica_id in self.isr:
            return False
        st = self.remote.get(replica_id)
        if st is None or self.leader_epoch_start_offset is None:
            return False
        return st.leo >= self.high_watermark and st.leo >= self.leader_epoch_start_offset

    def prepare_isr_update(self, new_isr: list[int]) -> LeaderIsrAndControllerEpoch:
        """Mark ``new_isr`` pending; the state to write conditionally on our zkVersion."""
        self.pending_isr = list(new_isr)
        return LeaderIsrAndControllerEpoch(self.broker_id, self.leader_epoch, list(new_isr),
                                           self.controller_epoch, self.zk_version)

    def complete_isr_update(self, leader_epoch: int, new_isr: list[int], new_zk_version: int | None,
                            now_ms: int = 0) -> bool:
        """Apply the write's outcome; True if the ISR changed (record it and re-check the HW).

        Ignored when leadership or the epoch moved meanwhile (the controller's
        LeaderAndIsr then carries the truth)."""
        if not self.is_leader or leader_epoch != self.leader_epoch or self.pending_isr != list(new_isr):
            return False
        self.pending_isr = None
        if new_zk_version is None:
            log.info("Cached zkVersion %d of %s-%d not equal to that in zookeeper, skip updating ISR",
                     self.zk_version, self.topic, self.partition)
            return False
        log.debug("ISR of %s-%d changed from %s to %s", self.topic, self.partition, self.isr, new_isr)
        self.isr = list(new_isr)
        self.zk_version = new_zk_version
        return True

    # -------------------------------------------------------------- follower

    def append_as_follower(self, records: bytes | memoryview, leader_hw: int, leader_log_start: int) -> int:
        """Append the leader's batches, then HW = min(leader HW, LEO); returns the new LEO."""
        if records:
            with self.io_guard("appending replicated records to"):
                self.log.append_as_follower(records)  # producer state follows in the log
        self.high_watermark = min(leader_hw, self.log.log_end_offset)
        if leader_log_start > self.log.log_start_offset:
            try:
                with self.io_guard("moving the log start offset of"):
                    self.log.maybe_increment_log_start_offset(min(leader_log_start, self.high_watermark))
            except KafkaError:
                pass
        return self.log.log_end_offset

    def truncate_to(self, offset: int) -> None:
        """Follower truncation: drop everything from ``offset`` (log, HW, producer state)."""
        with self.io_guard("truncating"):
            truncated = self.log.truncate_to(offset)
        if truncated:
            if self.on_truncate is not None:
                self.on_truncate(self.tp, offset)
        self.high_watermark = min(self._high_watermark, self.log.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        with self.io_guard("truncating"):
            self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset
        if self.on_truncate is not None:
            self.on_truncate(self.tp, offset)

    # ----------------------------------------------------------------- reads

    def fetch_end_offset(self, from_follower: bool, isolation_level: int = 0) -> int:
        """Followers read to the LEO, consumers to the HW, read_committed consumers to the LSO."""
        if from_follower:
            return self.log.log_end_offset
        return self.last_stable_offset if isolation_level == 1 else self.high_watermark

    def last_offset_for_leader_epoch(self, requested_epoch: int) -> tuple[int, int]:
        cache = epoch_cache_of(self.log)
        if cache is None:
            return -1, -1
        return cache.end_offset_for(requested_epoch, self.log.log_end_offset)

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """Fetch v12 (Kafka 2.8's Partition.readRecords): (epoch, end offset) of the fetcher's
        last fetched epoch in this log when the fetcher's log diverged from it (that epoch ends
        before ``fetch_offset``, or this log never had it), else None (read as usual). An
        epoch this log cannot place, or an offset below its log start, is OFFSET_OUT_OF_RANGE."""
        epoch, end = self.last_offset_for_leader_epoch(last_fetched_epoch)
        if epoch < 0 or end < 0:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, "Could not determine the end offset of the "
                             f"last fetched epoch {last_fetched_epoch} from the request")
        if fetch_offset < self.log.log_start_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {fetch_offset} is below the log "
                             f"start offset {self.log.log_start_offset}")
        if epoch < last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    def has_diverged(self, last_fetched_epoch: int, fetch_offset: int) -> bool:
        """Whether a fetch must be answered at once for its last fetched epoch (diverged or refused)."""
        try:
            return self.diverging_epoch(last_fetched_epoch, fetch_offset) is not None
        except KafkaError:
            return True
