"""SegmentSync: the fsync of some of a log's segments, prepared on the reactor, run anywhere;
``sync_in_thread`` runs such syncs on a pool thread, as Kafka's scheduler thread runs a roll's
flush and the ``flush.ms`` flusher.

Invariant: what is prepared is exactly the segments' files as they are at that moment: each
segment's pending index entries are written first, then its log file is held by a copy of its
descriptor (``os.dup``), and its index files and any other file named (a producer snapshot) by
descriptors opened then. A sync run on a thread therefore never reaches another file that reused a
closed descriptor's number or a renamed path, and a segment deleted or renamed meanwhile
(retention, a truncation, a topic's deletion) is synced harmlessly. The descriptors are closed by
``run`` whatever happens, or by ``discard`` if it never runs. ``offset`` and ``truncations`` say
what the sync makes durable: every offset below ``offset`` of the log as it was while no truncation
had happened since (``Log.synced`` checks that before it moves the recovery point).
"""
from __future__ import annotations

import os
from typing import Any, Callable, Iterable


class SegmentSync:
    __slots__ = ("offset", "truncations", "fds")

    def __init__(self, offset: int, truncations: int, segments: Iterable[Any], files: Iterable[str] = ()) -> None:
        self.offset = offset
        self.truncations = truncations
        self.fds: list[int] = []
        try:
            for seg in segments:
                seg.flush_indexes()
                self.fds.append(os.dup(seg.fd))
                for path in (seg.offset_index.path, seg.time_index.path, seg.txn_index.path):
                    try:
                        self.fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
                    except FileNotFoundError:   # a .txnindex exists once a transaction was aborted here
                        pass
            for path in files:
                self.fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
        except BaseException:
            self.discard()
            raise

    def run(self) -> None:
        """fsync every file (on the reactor or a thread); an OSError is raised after every
        descriptor is closed."""
        try:
            for fd in self.fds:
                os.fsync(fd)
        finally:
            self.discard()

    def discard(self) -> None:
        fds, self.fds = self.fds, []
        for fd in fds:
            os.close(fd)


def fsync_path(path: str) -> None:
    """fsync the file or directory at ``path``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_in_thread(run_in_thread: Callable[..., Any], syncs: list[tuple[Any, SegmentSync]],
                   failed: Callable[[Any, OSError], None]) -> Any:
    """Run each ``(log, sync)`` one after another through ``run_in_thread`` (a Deferred of a call
    on a pool thread: Kafka's scheduler thread), then, on the reactor, ``log.synced(sync)`` for
    each that succeeded and ``failed(log, error)`` for each that did not; the Deferred of that."""
    def run_all() -> list[tuple[Any, OSError]]:
        errors = []
        for log, sync in syncs:
            try:
                sync.run()
            except OSError as e:
                errors.append((log, e))
        return errors

    def done(errors: list[tuple[Any, OSError]]) -> None:
        bad = {id(log) for log, _ in errors}
        for log, sync in syncs:
            if id(log) not in bad:
                log.synced(sync)
        for log, e in errors:
            failed(log, e)
    return run_in_thread(run_all).addCallback(done)
