"""LogCleanerService: runs LogCleaner passes off the reactor, one at a time.

Invariant: every ``log.cleaner.backoff.ms`` a pass (``LogCleaner.clean_once``) starts in
a pool thread unless one is still running; the cleaner's segment swaps run on the
reactor thread (``swap_runner`` = ``blockingCallFromThread``), so the segment lists
the reactor reads only change between reactor turns. Disabled when
``log.cleaner.enable`` is false. ``stop()`` stops scheduling and returns a Deferred
that fires once a running pass ended.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from twisted.internet import defer, task, threads

from .cleaner import LogCleaner

log = logging.getLogger(__name__)


class LogCleanerService:
    def __init__(self, config: Any, log_manager: Any, reactor: Any,
                 in_thread: Callable[..., defer.Deferred] | None = None):
        self.config = config
        self.reactor = reactor
        self.enabled = bool(config["log.cleaner.enable"])
        self.backoff_ms = int(config["log.cleaner.backoff.ms"])
        self.cleaner = LogCleaner(
            log_manager, swap_runner=lambda f: threads.blockingCallFromThread(reactor, f))
        self._in_thread = in_thread or (lambda fn: threads.deferToThreadPool(
            reactor, reactor.getThreadPool(), fn))
        self._loop: task.LoopingCall | None = None
        self._running: defer.Deferred | None = None
        self.passes = 0

    def start(self) -> None:
        if not self.enabled or self._loop is not None:
            return
        self._loop = task.LoopingCall(self.run_once)
        self._loop.clock = self.reactor
        self._loop.start(max(self.backoff_ms, 1) / 1000.0, now=False)

    def set_backoff_ms(self, backoff_ms: int) -> None:
        """A new ``log.cleaner.backoff.ms`` (a dynamic config change): the next pass waits that long."""
        self.backoff_ms = backoff_ms
        if self._loop is not None and self._loop.running:
            self._loop.stop()
            self._loop = None
            self.start()

    def run_once(self) -> defer.Deferred | None:
        """Start a pass unless one is running; returns its Deferred (None if skipped)."""
        if self._running is not None:
            return None
        started = time.monotonic()

        def done(result: Any) -> None:
            self._running = None
            self.passes += 1
            if isinstance(result, list):
                for topic, partition, stats in result:
                    log.info("cleaned %s-%d in %.0f ms: %s", topic, partition,
                             (time.monotonic() - started) * 1000, stats)
            else:
                log.error("log cleaner pass failed: %s", result.getTraceback())

        d = self._in_thread(self.cleaner.clean_once)
        self._running = d
        d.addBoth(done)
        return d

    def maybe_truncate_checkpoint(self, tp: tuple[str, int], offset: int) -> None:
        self.cleaner.maybe_truncate_checkpoint(tp, offset)

    def stop(self) -> defer.Deferred:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        running = self._running
        if running is None:
            return defer.succeed(None)
        waiter: defer.Deferred = defer.Deferred()

        def release(result: object) -> object:
            waiter.callback(None)
            return result
        running.addBoth(release)
        return waiter
