"""partition.metadata: the topic id a partition's log belongs to (Kafka 2.8, KIP-516).

Invariant: the file is Kafka's (``version: 0`` then ``topic_id: <base64 id>``), written
atomically (``checkpoint.write_atomically``: temp file, fsync, rename) the first time a
LeaderAndIsr names the log's topic id, and never changed afterwards: a log whose file names
another id belongs to an older topic of the same name (deleted while this broker was away), and
the replica manager refuses to use it (INCONSISTENT_TOPIC_ID) rather than mix two topics' data.

``TopicIdWriter`` takes the writes off the reactor: a LeaderAndIsr checks each log against the
id on disk *or* the id queued for it in memory (so no log is served without the check, and a
second id for the same log is refused before its file exists), and the queued files are written
in one batch per LeaderAndIsr on a thread (each still temp file, fsync, rename: a crash leaves the
old file or the new one, never a torn one). A file lost to a crash before its batch ran is
written again from the next LeaderAndIsr, which always carries the topic id.
"""
from __future__ import annotations

import errno
import logging
import os
import uuid
import weakref
from typing import Any, Callable

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.znodes import topic_id_from_string, topic_id_string

from .checkpoint import CheckpointError, write_atomically

FILE_NAME = "partition.metadata"
log = logging.getLogger(__name__)


def read_topic_id(log_dir: str) -> uuid.UUID | None:
    """The id in ``log_dir``'s partition.metadata (None: no file); CheckpointError if malformed."""
    path = os.path.join(log_dir, FILE_NAME)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise CheckpointError(f"{path}: not a version 0 partition.metadata file")
    try:
        return topic_id_from_string(fields["topic_id"])
    except ValueError:
        raise CheckpointError(f"{path}: malformed topic id {fields['topic_id']!r}") from None


def write_topic_id(log_dir: str, topic_id: uuid.UUID) -> None:
    write_atomically(os.path.join(log_dir, FILE_NAME), f"version: 0\ntopic_id: {topic_id_string(topic_id)}\n")


def write_topic_ids(batch: list[tuple[str, uuid.UUID]],
                    wanted: Callable[[str, uuid.UUID], bool] = lambda d, i: True) -> list[tuple[str, str]]:
    """Write each (log dir, id) still ``wanted`` (blocking: run it on a thread); returns (log dir,
    error) for the failed ones. A log dir deleted or moved meanwhile is skipped silently."""
    failed: list[tuple[str, str]] = []
    for log_dir, topic_id in batch:
        if not wanted(log_dir, topic_id):
            continue
        try:
            write_topic_id(log_dir, topic_id)
        except OSError as e:
            if e.errno != errno.ENOENT:
                failed.append((log_dir, str(e)))
    return failed


class TopicIdWriter:
    """partition.metadata files queued in memory until a thread has written them; one batch on
    the thread at a time (the next one gathers what is queued meanwhile)."""

    def __init__(self, run_blocking: Callable[..., Any] | None = None):
        # (fn, *args) -> Deferred; None = write inline (sans-IO tests)
        self.run_blocking = run_blocking
        self._pending: dict[str, uuid.UUID] = {}
        self._batch: list[tuple[str, uuid.UUID]] = []
        self._running = False
        # logs whose partition.metadata matched or is queued (not read again at every LeaderAndIsr)
        self._confirmed: weakref.WeakKeyDictionary[Any, uuid.UUID] = weakref.WeakKeyDictionary()

    def confirm(self, log_: Any, topic_id: uuid.UUID) -> None:
        """The log must belong to the topic with this id; a new log is marked with it (queued).
        Its file is read at most once per log object, and not at all for a log this process
        marked: the next LeaderAndIsr of a partition (an ISR change bumps its leader epoch) reads
        no file on the reactor. INCONSISTENT_TOPIC_ID for a log of another topic id."""
        if self._confirmed.get(log_) == topic_id:
            return   # its file said so before, or will (queued), and the file never changes
        stored = self.stored(log_.dir)
        if stored is None:
            self.queue(log_.dir, topic_id)
        elif stored != topic_id:
            raise KafkaError(ErrorCode.INCONSISTENT_TOPIC_ID,
                             f"the log of {log_.topic}-{log_.partition} belongs to topic id "
                             f"{topic_id_string(stored)}, not {topic_id_string(topic_id)} (a topic of the same "
                             "name deleted while this broker was away): remove it to let this broker replicate "
                             "the new topic")
        self._confirmed[log_] = topic_id

    def stored(self, log_dir: str) -> uuid.UUID | None:
        """The id the log is marked with: queued, else on disk (CheckpointError if malformed)."""
        queued = self._pending.get(log_dir)
        return queued if queued is not None else read_topic_id(log_dir)

    def queue(self, log_dir: str, topic_id: uuid.UUID) -> None:
        self._pending[log_dir] = topic_id
        self._batch.append((log_dir, topic_id))

    def forget(self, log_dir: str) -> None:
        """The log is deleted or moved: its queued id is not written (checked again on the thread
        just before each file, so a deleted topic's id never lands in a re-created log)."""
        self._pending.pop(log_dir, None)

    def pending(self) -> int:
        return len(self._pending)

    def write_pending(self) -> None:
        """At shutdown: write whatever is still queued or in flight, here and now (a batch still on
        the thread may write the same file too: same content, each write atomic)."""
        pending = list(self._pending.items())
        self._batch = []
        self._written(pending, write_topic_ids(pending, self._wanted))

    def _wanted(self, log_dir: str, topic_id: uuid.UUID) -> bool:
        return self._pending.get(log_dir) == topic_id   # one dict read: safe from the thread

    def flush(self) -> None:
        """Write the queued files as one batch (on a thread when ``run_blocking`` is set)."""
        if self._running or not self._batch:
            return
        batch, self._batch = self._batch, []
        if self.run_blocking is None:
            self._written(batch, write_topic_ids(batch, self._wanted))
            return
        self._running = True
        d = self.run_blocking(write_topic_ids, batch, self._wanted)
        d.addErrback(lambda f: [(dir_, f.getErrorMessage()) for dir_, _ in batch])
        d.addCallback(lambda failed: self._written(batch, failed))
        d.addErrback(lambda f: log.error("%s bookkeeping failed: %s", FILE_NAME, f.getTraceback()))

    def _written(self, batch: list[tuple[str, uuid.UUID]], failed: list[tuple[str, str]]) -> None:
        self._running = False
        for log_dir, topic_id in batch:
            if self._pending.get(log_dir) == topic_id:
                del self._pending[log_dir]
        for log_dir, error in failed:   # the next LeaderAndIsr checks the disk and queues it again
            log.error("writing %s in %s failed: %s", FILE_NAME, log_dir, error)
            for lg in [lg for lg in self._confirmed if lg.dir == log_dir]:
                del self._confirmed[lg]
        log.debug("wrote %d %s files (%d failed)", len(batch) - len(failed), FILE_NAME, len(failed))
        self.flush()
