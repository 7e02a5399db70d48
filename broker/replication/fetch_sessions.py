"""Incremental fetch sessions (KIP-227), the leader's side: Kafka's ``FetchSessionCache``.

A fetcher that names a session (Fetch v7+) sends only the partitions it adds or changes and
lists those it forgets; the leader keeps the rest. Epochs: -1 (FINAL) is sessionless and closes
the session named; 0 (INITIAL) is a full fetch that closes the session named and opens a new one
if a slot is free or a less valuable session can be evicted; above 0 is incremental and needs the
session to exist (else FETCH_SESSION_ID_NOT_FOUND) at exactly that epoch (else
INVALID_FETCH_SESSION_EPOCH), and an error changes nothing.

Invariants: every session partition is read on every fetch of its session (so a follower's
position is recorded for each, as in Kafka), but an incremental answer carries only partitions
whose answer changed since the last one sent: records, a moved high watermark, last stable
offset or log start offset, an error, or a diverging epoch. Answered partitions move to the end
of the session's order, so an answer cut by ``max_bytes`` starves none. Eviction is Kafka's: a
session unused for ``eviction_ms`` goes first; else a new follower session evicts the smallest
consumer session, and a new consumer session the smallest consumer session smaller than itself.
Better than Kafka: a session answers only the fetcher that opened it (same replica id and
principal); Kafka serves anyone who names its id.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Iterable

from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_session_handler import (FINAL_EPOCH, INITIAL_EPOCH, INT32_MAX, INVALID_SESSION_ID,
                                                    next_epoch)

from .delayed import FetchPartition

TopicPartition = tuple[str, int]
Owner = tuple[int, str]     # (replica id, principal)
FetchResult = tuple[FetchPartition, dict]


@dataclass(eq=False)
class CachedPartition:
    """A session partition: its last request, and what the last answer sent of it."""
    request: FetchPartition
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def must_answer(self, r: dict) -> bool:
        """Does result ``r`` say anything the fetcher does not know? Records what it says."""
        hw, lso, start = r["high_watermark"], r["last_stable_offset"], r["log_start_offset"]
        moved = hw != self.high_watermark or lso != self.last_stable_offset or start != self.log_start_offset
        if moved:
            self.high_watermark, self.last_stable_offset, self.log_start_offset = hw, lso, start
        return moved or bool(r["records"]) or bool(r["error_code"]) or "diverging_epoch" in r


@dataclass(eq=False)
class FetchSession:
    id: int
    owner: Owner
    partitions: dict[TopicPartition, CachedPartition]  # in answer order
    epoch: int                                         # the epoch the next fetch must carry
    last_used_ms: int

    @property
    def privileged(self) -> bool:
        """A follower's session (replica id >= 0): evicted only when stale."""
        return self.owner[0] >= 0

    def update(self, requested: Iterable[FetchPartition], forgotten: Iterable[TopicPartition]) -> None:
        for tp in forgotten:
            self.partitions.pop(tp, None)
        for fp in requested:
            cached = self.partitions.get(fp.tp)
            if cached is None:
                self.partitions[fp.tp] = CachedPartition(fp)
            else:
                cached.request = fp


@dataclass(eq=False)
class FetchContext:
    """One fetch through the cache: ``partitions`` to read, ``answer(results)`` for the response."""
    cache: FetchSessionCache
    partitions: list[FetchPartition]
    owner: Owner
    session: FetchSession | None = None    # None: a full fetch, which may open one when answered
    now_ms: int = 0

    def answer(self, results: list[FetchResult]) -> tuple[int, list[FetchResult]]:
        """(session id, the results the response carries)."""
        session = self.session
        if session is None:
            opened = self.cache.open(self.owner, results, self.now_ms)
            return (INVALID_SESSION_ID if opened is None else opened.id), results
        out: list[FetchResult] = []
        for fp, r in results:
            cached = session.partitions.get(fp.tp)
            if cached is None:          # not a session partition (cannot happen): answer it
                out.append((fp, r))
            elif cached.must_answer(r):
                out.append((fp, r))
                del session.partitions[fp.tp]     # to the end of the order
                session.partitions[fp.tp] = cached
        return session.id, out


@dataclass
class FetchSessionCache:
    """Sessions by id, at most ``max_slots`` of them (``max.incremental.fetch.session.cache.slots``)."""
    max_slots: int = 1000
    eviction_ms: int = 120_000
    sessions: dict[int, FetchSession] = field(default_factory=dict)
    evictions: int = 0

    def context(self, session_id: int, epoch: int, requested: list[FetchPartition],
                forgotten: list[TopicPartition], owner: Owner, now_ms: int) -> FetchContext | ErrorCode | None:
        """The context of a fetch naming ``session_id`` at ``epoch``; None: sessionless (read
        ``requested`` and answer everything); an ErrorCode: answer it and change nothing."""
        if epoch == FINAL_EPOCH or epoch == INITIAL_EPOCH:
            self._close(session_id, owner)
            if epoch == FINAL_EPOCH:
                return None
            return FetchContext(self, requested, owner, now_ms=now_ms)
        session = self.sessions.get(session_id)
        if session is None or session.owner != owner:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if session.epoch != epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH
        session.update(requested, forgotten)
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        return FetchContext(self, [c.request for c in session.partitions.values()], owner, session, now_ms)

    def open(self, owner: Owner, results: list[FetchResult], now_ms: int) -> FetchSession | None:
        """A new session of ``owner`` holding the partitions of a full fetch's ``results``
        (answered in full), or None when there is no slot for it."""
        if not self._make_room(owner[0] >= 0, len(results), now_ms):
            return None
        session_id = random.randint(1, INT32_MAX)
        while session_id in self.sessions:
            session_id = random.randint(1, INT32_MAX)
        session = FetchSession(session_id, owner, {}, next_epoch(INITIAL_EPOCH), now_ms)
        for fp, r in results:
            cached = session.partitions[fp.tp] = CachedPartition(fp)
            cached.must_answer(r)
        self.sessions[session_id] = session
        return session

    def _close(self, session_id: int, owner: Owner) -> None:
        session = self.sessions.get(session_id)
        if session is not None and session.owner == owner:
            del self.sessions[session_id]

    def _make_room(self, privileged: bool, size: int, now_ms: int) -> bool:
        if len(self.sessions) < self.max_slots:
            return True
        if not self.sessions:
            return False
        oldest = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now_ms - oldest.last_used_ms > self.eviction_ms:
            victim: FetchSession | None = oldest
        else:
            consumers = [s for s in self.sessions.values() if not s.privileged]
            smallest = min(consumers, key=lambda s: len(s.partitions), default=None)
            victim = smallest if smallest is not None and (privileged or len(smallest.partitions) < size) else None
        if victim is None:
            return False
        del self.sessions[victim.id]
        self.evictions += 1
        return True

    @property
    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for s in self.sessions.values())
