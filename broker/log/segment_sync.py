"""SegmentSync: the fsync of some of a log's segments, prepared on the reactor, run anywhere.

Invariant: what is prepared is exactly the segments' files as they are at that moment: each
segment's pending index entries are written first, then its log file is held by a copy of its
descriptor (``os.dup``), and its index files and any other file named (a producer snapshot) by
descriptors opened then. A sync run on a thread
therefore never reaches another file that reused a closed descriptor's number or a renamed path,
and a segment deleted or renamed meanwhile (retention, a truncation, a topic's deletion) is
synced harmlessly. The descriptors are closed by ``run`` whatever happens, or by ``discard`` if it
never runs. ``offset`` and
``truncations`` say what the sync makes durable: every offset below ``offset`` of the log as it
was while no truncation had happened since (``Log.synced`` checks that before it moves the
recovery point).
"""
from __future__ import annotations

import os
from typing import Any, Iterable


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
