"""One partition replica on this broker: role, leader epoch, ISR, high watermark.

Invariant: only the controller's LeaderAndIsr changes role, leader epoch and ISR
(``make_leader`` / ``make_follower``, accepted only for a newer leader epoch);
the high watermark never decreases while leader and equals the minimum LEO over
the ISR (this broker's LEO is its log's). Follower LEOs are learned from their
fetch offsets. Appends happen only as leader, stamped with the current leader
epoch, after the idempotent-producer check. Plain object: no I/O beyond the log.
"""
from __future__ import annotations

import logging
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import HEADER_SIZE, parse_header, peek_offset_and_length

from .metadata_cache import PartitionState
from .producer_state import ProducerStateManager

log = logging.getLogger(__name__)


def epoch_cache_of(log_: Any) -> Any:
    """The log's leader-epoch cache, whatever the Log calls it (None if it has none)."""
    for name in ("leader_epoch_cache", "epoch_cache"):
        cache = getattr(log_, name, None)
        if cache is not None:
            return cache
    return None


class Partition:
    """A replica of (topic, partition) on broker ``broker_id``."""

    def __init__(self, topic: str, partition: int, broker_id: int):
        self.topic = topic
        self.partition = partition
        self.broker_id = broker_id
        self.log: Any = None
        self.leader_id = -1
        self.leader_epoch = -1
        self.controller_epoch = -1
        self.zk_version = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self._high_watermark = 0
        self.follower_leos: dict[int, int] = {}
        self.producer_state = ProducerStateManager()

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        self._high_watermark = value
        if self.log is not None:  # mirrored into the Log for readers that only see the log
            self.log.update_high_watermark(value)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id and self.log is not None

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={self.isr}, hw={self.high_watermark})")

    # ------------------------------------------------------------- role changes

    def _apply_state(self, state: PartitionState) -> None:
        self.controller_epoch = state.controller_epoch
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.zk_version = state.zk_version
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)

    def make_leader(self, state: PartitionState, log_: Any, checkpoint_hw: int | None = None) -> bool:
        """Become leader at ``state.leader_epoch``; True if this broker was not leader before."""
        was_leader = self.is_leader
        self.log = log_
        self._apply_state(state)
        leo = log_.log_end_offset
        cache = epoch_cache_of(log_)
        if cache is not None:
            cache.assign(state.leader_epoch, leo)
        if not was_leader:
            # Remote LEOs are unknown until the followers fetch again; producer
            # state from an earlier leadership may be stale.
            self.follower_leos = {r: -1 for r in self.replicas if r != self.broker_id}
            self.producer_state.clear()
            if checkpoint_hw is not None:
                self.high_watermark = max(self.high_watermark, checkpoint_hw)
        else:
            self.follower_leos = {r: self.follower_leos.get(r, -1)
                                  for r in self.replicas if r != self.broker_id}
        self.high_watermark = min(max(self.high_watermark, log_.log_start_offset), leo)
        self.maybe_increment_high_watermark()
        return not was_leader

    def make_follower(self, state: PartitionState, log_: Any, checkpoint_hw: int | None = None) -> bool:
        """Follow ``state.leader``; True if the leader changed."""
        changed = self.leader_id != state.leader or self.log is None
        self.log = log_
        self._apply_state(state)
        self.follower_leos = {}
        if checkpoint_hw is not None:
            self.high_watermark = max(self.high_watermark, checkpoint_hw)
        self.high_watermark = min(max(self.high_watermark, log_.log_start_offset), log_.log_end_offset)
        return changed

    # ---------------------------------------------------------------- leader

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320 fencing: a client's epoch must equal ours (-1 = not checked)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
        raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    def append_as_leader(self, records: bytes, required_acks: int, min_insync_replicas: int) -> Any:
        """Append a producer's batch; returns the log's LogAppendInfo (or a duplicate's)."""
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                             f"ISR {self.isr} is smaller than min.insync.replicas {min_insync_replicas}")
        header = None
        if len(records) >= HEADER_SIZE and records[16] == 2:
            header = parse_header(records, 0)
            dup = self.producer_state.check(header)
            if dup is not None:
                return _DuplicateAppend(dup.first_offset, dup.last_offset, dup.log_append_time,
                                        self.log.log_start_offset)
        info = self.log.append_as_leader(records, self.leader_epoch)
        if header is not None and header.producer_id >= 0:
            self.producer_state.update(header, info.first_offset, info.last_offset, info.log_append_time)
        self.maybe_increment_high_watermark()
        return info

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int) -> bool:
        """A follower fetched at ``fetch_offset`` (its LEO); True if the HW advanced."""
        if replica_id not in self.follower_leos:
            return False
        self.follower_leos[replica_id] = fetch_offset
        return self.maybe_increment_high_watermark()

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the ISR; only moves forward. True if it moved."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        for r in self.isr:
            if r != self.broker_id:
                leo = self.follower_leos.get(r, -1)
                if leo < new_hw:
                    new_hw = leo
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def check_enough_replicas_reach_offset(self, required_offset: int,
                                           min_insync_replicas: int) -> tuple[bool, ErrorCode]:
        """For DelayedProduce: (done, error) once HW ≥ ``required_offset``."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark >= required_offset:
            if len(self.isr) < min_insync_replicas:
                return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, ErrorCode.NONE
        return False, ErrorCode.NONE

    # ----------------------------------------------------------------- reads

    def fetch_end_offset(self, from_follower: bool) -> int:
        """Followers read to the LEO, consumers to the HW (LSO = HW: no transactions)."""
        return self.log.log_end_offset if from_follower else self.high_watermark

    def last_offset_for_leader_epoch(self, requested_epoch: int) -> tuple[int, int]:
        cache = epoch_cache_of(self.log)
        if cache is None:
            return -1, -1
        return cache.end_offset_for(requested_epoch, self.log.log_end_offset)


class _DuplicateAppend:
    """What a duplicate idempotent batch gets back: the original batch's offsets."""
    __slots__ = ("first_offset", "last_offset", "log_append_time", "log_start_offset")

    def __init__(self, first_offset: int, last_offset: int, log_append_time: int, log_start_offset: int):
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset


def batch_count_is_one(records: bytes) -> bool:
    """v3+ produce requests carry exactly one batch per partition (Kafka's validateRecords)."""
    if len(records) < 12:
        return True  # too short to tell: the log's validation answers CORRUPT_MESSAGE
    _, length = peek_offset_and_length(records, 0)
    return 12 + length >= len(records)
