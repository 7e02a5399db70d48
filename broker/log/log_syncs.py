"""LogSyncs: where a broker's log fsyncs run, and ``flush.messages`` as a group commit.

Invariant: until the broker gives it a thread (``run_in``: while loading, in tools and tests) each
sync runs in place, on its caller. From then on each is prepared on the reactor
(``Log.sync_below``), run on a pool thread, and its recovery point moved back on the reactor
(``segment_sync.sync_in_thread``), as Kafka's scheduler thread runs a roll's flush and the
``flush.ms`` flusher. A failed sync takes its log dir offline (``failed``).

A flush that ``flush.messages`` makes due (``Log._maybe_flush``) is a group commit: at most one
such sync of a log runs at a time, to the log end offset of when it started; the appends that
find one running are covered by one more, started when it ends. Whoever appended waits meanwhile:
a Produce stays parked until the log's recovery point covers its records
(``Log.awaits_sync``; ``on_synced`` re-checks the produce purgatory after each sync), a follower
sends its next fetch only once ``wait`` fires. So an acknowledged Produce is on disk on the leader
and, with acks=all, on every ISR follower, as in Kafka, where the append itself fsyncs and
the request handler thread waits. Here the reactor never waits for the disk, and one fsync covers
every append made meanwhile.
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.internet import defer

from .segment_sync import SegmentSync, sync_in_thread


class LogSyncs:
    """Where the fsyncs of a LogManager's logs run; a Log made without one gets its own, which
    syncs in place."""

    def __init__(self, failed: Callable[[Any, OSError], None] | None = None) -> None:
        self._failed = failed   # a thread's sync failed: (log, error); needed only with run_in
        self.run_in_thread: Callable[..., defer.Deferred] | None = None
        self.on_synced: Callable[[Any], None] | None = None   # after each group sync: the replica manager's check
        self.running: dict[Any, list[tuple[int, defer.Deferred]]] = {}   # log -> its waiters, while a group sync runs
        self._again: set[Any] = set()   # logs whose appends made another flush due meanwhile
        self._broken: set[Any] = set()  # logs whose last sync failed

    def run_in(self, run_in_thread: Callable[..., defer.Deferred]) -> None:
        """From now on syncs run through ``run_in_thread`` (a Deferred of the call on a pool thread)."""
        assert self._failed is not None, "syncs on a thread need to know where a failure goes"
        self.run_in_thread = run_in_thread

    def prepare(self, log: Any, offset: int, *files: str) -> SegmentSync | None:
        """A sync of ``log`` below ``offset`` and of ``files`` to run on the thread; without a thread
        it is done here, and there is nothing to run (None, as when nothing needs a sync)."""
        if self.run_in_thread is None:
            log.flush(offset, *files)
            return None
        return log.sync_below(offset, *files)

    def start(self, syncs: list[tuple[Any, SegmentSync]]) -> defer.Deferred:
        """Run ``(log, sync)`` pairs on the thread; a Deferred of their completion on the reactor."""
        assert self.run_in_thread is not None
        return sync_in_thread(self.run_in_thread, syncs, self._fail)

    def rolled(self, log: Any, offset: int, *files: str) -> None:
        """``Log.roll``'s flush of the segments below ``offset`` and of ``files`` (its snapshot)."""
        sync = self.prepare(log, offset, *files)
        if sync is not None:
            self.start([(log, sync)])

    def flush_due(self, log: Any) -> None:
        """``flush.messages`` made a flush of ``log`` due: now in place, or a group sync (see the
        module invariant)."""
        if self.run_in_thread is None:
            log.flush()
        elif log in self.running:
            self._again.add(log)
        else:
            self._start_group(log, [])

    def wait(self, log: Any) -> defer.Deferred | None:
        """A Deferred fired once what ``log`` holds now is synced, or once no sync running or due
        can cover it (a failure, a truncation); None when nothing is waited for."""
        end = log.log_end_offset
        if log not in self.running or not log.awaits_sync(end):
            return None
        d: defer.Deferred = defer.Deferred()
        self.running[log].append((end, d))
        return d

    def _start_group(self, log: Any, waiters: list[tuple[int, defer.Deferred]]) -> None:
        sync = log.sync_below(log.log_end_offset)
        if sync is None:
            self._fire(waiters)
            return
        self.running[log] = waiters
        self.start([(log, sync)]).addBoth(self._group_done, log)

    def _group_done(self, result: object, log: Any) -> object:
        waiters = self.running.pop(log)
        again = log in self._again and log not in self._broken
        self._again.discard(log)
        self._broken.discard(log)
        synced = log.recovery_point
        self._fire([w for w in waiters if w[0] <= synced])
        rest = [w for w in waiters if w[0] > synced]
        if again and log.awaits_sync(log.log_end_offset):
            self._start_group(log, rest)
        else:
            self._fire(rest)
        if self.on_synced is not None:
            self.on_synced(log)
        return result   # (an error of the sync's bookkeeping stays the Deferred's, to be logged)

    def _fail(self, log: Any, e: OSError) -> None:
        if log in self.running:
            self._broken.add(log)
        assert self._failed is not None
        self._failed(log, e)

    @staticmethod
    def _fire(waiters: list[tuple[int, defer.Deferred]]) -> None:
        for _, d in waiters:
            d.callback(None)
