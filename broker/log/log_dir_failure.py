"""LogDirFailureChannel: the one place an I/O error on a log directory is recorded.

Invariants (Kafka 2.8's ``LogDirFailureChannel``):
- a log dir goes offline at most once and never comes back while the broker runs
  (only a restart brings it back);
- whoever hits an ``OSError`` (ENOSPC, EIO, EROFS ...) writing, flushing, rolling,
  indexing or checkpointing under a log dir calls ``maybe_add_offline_log_dir`` (or
  uses ``guard``); the first report of a dir calls every listener once with the dir
  (the replica manager stops serving its partitions and tells the controller), later
  reports of the same dir are only logged;
- callers turn the failure into ``KAFKA_STORAGE_ERROR`` (56) for their request
  (``storage_error``), never a traceback.
Thread-safe: the log cleaner and the loading thread may report as well as the reactor;
listeners are called on the reporting thread and must hand work to the reactor.
"""
from __future__ import annotations

import logging
import os
import threading
from functools import lru_cache
from types import TracebackType
from typing import Callable

from odradek.protocol.errors import ErrorCode, KafkaError

logger = logging.getLogger(__name__)

Listener = Callable[[str], None]


def storage_error(message: str) -> KafkaError:
    """The error a request touching an offline log dir is answered with (Kafka's KafkaStorageException)."""
    return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, message)


def is_storage_error(exc: BaseException) -> bool:
    """An OSError, or the KAFKA_STORAGE_ERROR a lower layer already made of one."""
    return isinstance(exc, OSError) or (isinstance(exc, KafkaError) and exc.code == ErrorCode.KAFKA_STORAGE_ERROR)


def log_dir_of(partition_dir: str) -> str:
    """The log dir holding a partition directory ``<log dir>/<topic>-<p>``."""
    if partition_dir.startswith("/"):
        return _log_dir_of_absolute(partition_dir)   # once per directory (on every produce's path)
    return os.path.dirname(os.path.abspath(partition_dir.rstrip("/")))


@lru_cache(maxsize=65536)
def _log_dir_of_absolute(partition_dir: str) -> str:
    return os.path.dirname(os.path.abspath(partition_dir.rstrip("/")))


class LogDirFailureChannel:
    """Offline log dirs of this broker and who to tell when one goes offline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[str, str] = {}     # dir -> the first failure's message
        self._listeners: list[Listener] = []

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    @property
    def offline_dirs(self) -> list[str]:
        with self._lock:
            return sorted(self._offline)

    def is_offline(self, log_dir: str) -> bool:
        return bool(self._offline) and os.path.abspath(log_dir) in self._offline

    def maybe_add_offline_log_dir(self, log_dir: str, message: str, exc: BaseException | None = None) -> None:
        """Record ``log_dir`` as offline; the first report of it tells every listener."""
        log_dir = os.path.abspath(log_dir)
        with self._lock:
            first = log_dir not in self._offline
            if first:
                self._offline[log_dir] = message
        if not first:
            logger.debug("log dir %s already offline: %s (%s)", log_dir, message, exc)
            return
        logger.error("log dir %s is offline: %s: %s", log_dir, message, exc)
        for listener in list(self._listeners):
            try:
                listener(log_dir)
            except Exception:
                logger.exception("log dir failure listener failed for %s", log_dir)

    def guard(self, log_dir: str, what: str, subject: str) -> "_Guard":
        """Run I/O under ``log_dir`` (``with channel.guard(...)``): an OSError (or a lower layer's
        KAFKA_STORAGE_ERROR) marks the dir offline and leaves as KafkaError(KAFKA_STORAGE_ERROR),
        its message "<what> <subject>: ..." (joined only then)."""
        return _Guard(self, log_dir, what, subject)


class _Guard:
    """``LogDirFailureChannel.guard``'s context manager (a class: it is on every produce's path)."""

    __slots__ = ("channel", "log_dir", "what", "subject")

    def __init__(self, channel: LogDirFailureChannel, log_dir: str, what: str, subject: str) -> None:
        self.channel, self.log_dir, self.what, self.subject = channel, log_dir, what, subject

    @property
    def message(self) -> str:
        return f"{self.what} {self.subject}"

    def __enter__(self) -> None:
        if self.channel._offline and self.channel.is_offline(self.log_dir):
            raise storage_error(f"{self.message}: log dir {self.log_dir} is offline")

    def __exit__(self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if e is None or not isinstance(e, (OSError, KafkaError)) or not is_storage_error(e):
            return   # no error, or not an I/O failure: it goes on as it is
        self.channel.maybe_add_offline_log_dir(self.log_dir, self.message, e)
        if isinstance(e, KafkaError):
            return
        raise storage_error(f"{self.message}: {e}") from e
