"""The group coordinator (sans-IO): its interfaces with the broker layer.

Invariant: nothing in ``odradek.broker.group`` does I/O, starts threads or imports
Twisted. The broker drives the ``GroupCoordinator`` with method calls and gives it
three things: a ``Timer`` (``schedule``/``cancel``/``now_ms``), an ``append`` function
(``append(partition, batch) -> Completion[AppendResult]`` writing one RecordBatch to
``__consumer_offsets-<partition>`` with acks=-1; a bare ``ErrorCode`` result is read as
an unknown log position), and the records of a partition when it becomes its leader. Slow answers are ``Completion`` objects: each completes exactly once,
and callbacks added after completion run at once. Result dataclasses carry the field
names of the matching Kafka response, so ``dataclasses.asdict(result)`` fits
``Response.encode``.

Broker usage: ``coord = GroupCoordinator(GroupConfig.from_kafka_config(cfg),
CallLaterTimer(reactor), append)``; ``coord.startup()``; on LeaderAndIsr for
``__consumer_offsets-p``: ``on_elected(p, epoch)``, ``load_batches(p, blob)`` per log read,
``finish_loading(p)``; on becoming follower/StopReplica: ``on_resigned(p, epoch)``.
FindCoordinator uses ``coord.partition_for(group_id)``. Completion-returning handlers:
join, sync, commit, txn commit. Immediate: heartbeat, leave, fetch, list, describe,
delete. After a transaction marker is written to ``__consumer_offsets-p``:
``on_txn_marker_written(p, producer_id, committed)``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Protocol

from odradek.broker.completion import Completion
from odradek.protocol.errors import ErrorCode

__all__ = [
    "Timer", "CallLaterTimer", "AppendResult", "AppendFn", "GroupConfig",
    "JoinGroupMember", "JoinGroupResult", "SyncGroupResult", "LeaveMember", "LeaveGroupResult",
    "CommitOffset", "FetchedOffset", "OffsetFetchResult", "DescribedMember", "DescribedGroup",
    "ListedGroup", "ListGroupsResult", "GroupCoordinator",
]


class Timer(Protocol):
    """Injected time: the reactor in the broker, a fake clock in tests."""

    def now_ms(self) -> int: ...

    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> Any: ...

    def cancel(self, handle: Any) -> None: ...


class CallLaterTimer:
    """A ``Timer`` over anything with ``callLater`` (the reactor, ``task.Clock``)."""

    def __init__(self, scheduler: Any, clock: Callable[[], float] = time.time):
        self._scheduler = scheduler
        self._clock = clock

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> Any:
        return self._scheduler.callLater(max(delay_ms, 0) / 1000.0, callback)

    def cancel(self, handle: Any) -> None:
        if handle is not None and handle.active():
            handle.cancel()


class AppendResult(NamedTuple):
    """The produce outcome of one append: its error and the batch's base offset (-1 unknown)."""

    error: ErrorCode
    base_offset: int = -1


AppendFn = Callable[[int, bytes], Completion[AppendResult]]
"""append(partition, record_batch) -> completion of the produce outcome (acks=-1)."""


@dataclass(frozen=True)
class GroupConfig:
    """The broker settings the coordinator uses (Kafka's names in ``from_kafka_config``)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offsets_partitions: int = 50
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 10080 * 60_000
    offsets_retention_check_interval_ms: int = 600_000
    compression: int = 0

    @classmethod
    def from_kafka_config(cls, cfg: Mapping[str, Any] | Any) -> "GroupConfig":
        return cls(
            min_session_timeout_ms=cfg["group.min.session.timeout.ms"],
            max_session_timeout_ms=cfg["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=cfg["group.initial.rebalance.delay.ms"],
            max_size=cfg["group.max.size"],
            offsets_partitions=cfg["offsets.topic.num.partitions"],
            offset_metadata_max_bytes=cfg["offset.metadata.max.bytes"],
            offsets_retention_ms=cfg["offsets.retention.minutes"] * 60_000,
            offsets_retention_check_interval_ms=cfg["offsets.retention.check.interval.ms"],
            compression=cfg["offsets.topic.compression.codec"],
        )


# --- results (field names = the Kafka response's) -------------------------------------

@dataclass
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass
class JoinGroupResult:
    error_code: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str = ""          # "" when none (JoinGroup v0-6 cannot say null)
    leader: str = ""
    members: list[JoinGroupMember] = field(default_factory=list)  # leader only


@dataclass
class SyncGroupResult:
    error_code: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass
class LeaveMember:
    member_id: str
    group_instance_id: str | None
    error_code: ErrorCode = ErrorCode.NONE


@dataclass
class LeaveGroupResult:
    """``error_code`` is the group-level error; v0-2 responses should send
    ``members[0].error_code`` when it is NONE (see ``legacy_error_code``)."""

    error_code: ErrorCode
    members: list[LeaveMember] = field(default_factory=list)

    @property
    def legacy_error_code(self) -> ErrorCode:
        if self.error_code != ErrorCode.NONE or not self.members:
            return self.error_code
        return self.members[0].error_code


class CommitOffset(NamedTuple):
    """One partition of an OffsetCommit request (``commit_timestamp`` -1 = now)."""

    offset: int
    metadata: str | None = ""
    leader_epoch: int = -1
    commit_timestamp: int = -1


@dataclass
class FetchedOffset:
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str | None = ""
    error_code: ErrorCode = ErrorCode.NONE


@dataclass
class OffsetFetchResult:
    """Group-level error plus one entry per (topic, partition); v0-1 responses carry
    the group-level error in every partition instead."""

    error_code: ErrorCode
    offsets: dict[tuple[str, int], FetchedOffset] = field(default_factory=dict)


@dataclass
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes = b""
    member_assignment: bytes = b""


@dataclass
class DescribedGroup:
    error_code: ErrorCode
    group_id: str
    group_state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""
    members: list[DescribedMember] = field(default_factory=list)


@dataclass
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str


@dataclass
class ListGroupsResult:
    error_code: ErrorCode
    groups: list[ListedGroup] = field(default_factory=list)


from .coordinator import GroupCoordinator  # noqa: E402  (needs the names above)
