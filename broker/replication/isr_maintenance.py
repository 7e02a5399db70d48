"""The leader's ISR tasks, and the summary log lines of leadership and ISR changes.

Invariant: the leader alone proposes a partition's ISR changes, conditional on its cached
zkVersion, through ``isr_writer``: an AlterIsr to the controller (``alter_isr_sender``, IBP
2.7-IV2 and later; the controller then tells every broker), or below that a write of the state
znode off the reactor, each change then recorded for ``isr-change-propagation`` (one
``/isr_change_notification`` node per batch). Follower fetches expand the ISR (``expand_isr``),
the ``isr-expiration`` task shrinks it (``maybe_shrink_isr``: its walk of every partition on a
thread, each change made on the reactor for a partition still lagging there); the ISR used for
the HW counts a pending change's additions until its outcome is known. A change is
logged at INFO once per batch (a fetch's expansions, an expiration run, a notification, a
LeaderAndIsr) with counts and a few examples; the per-partition lines are at DEBUG, so a leader
change of 10,000 partitions costs a handful of log lines, not ~13 per replica.
Mixed into ``ReplicaManager`` (which owns the partitions, the scheduler and the writers).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

from odradek.protocol.errors import ErrorCode

from twisted.internet import defer, task

from ..periodic import every, items_from_thread
from .isr_propagation import CHECK_INTERVAL_MS
from .partition import Partition

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
EXAMPLES = 3   # partitions named in a summary line


def examples(names: Iterable[str]) -> str:
    """``a-0, a-1, a-2 and 7 more``."""
    names = list(names)
    shown = ", ".join(names[:EXAMPLES])
    return shown if len(names) <= EXAMPLES else f"{shown} and {len(names) - EXAMPLES} more"


def counted(what: str, names: list[str]) -> str:
    """``leader of 40 (a-0, a-1, a-2 and 37 more)``, or ``leader of 0``."""
    return f"{what} {len(names)} ({examples(names)})" if names else f"{what} 0"


def log_leader_and_isr(broker_id: int, controller_epoch: int, total: int, errors: dict[TopicPartition, ErrorCode],
                       done: list[Partition]) -> None:
    """One INFO line per LeaderAndIsr request: how many partitions became led, followed,
    were ignored (stale epoch) or failed."""
    led = [f"{p.topic}-{p.partition}" for p in done if p.leader_id == broker_id]
    followed = [f"{p.topic}-{p.partition}" for p in done if p.leader_id != broker_id]
    stale = sum(1 for c in errors.values() if c == ErrorCode.STALE_CONTROLLER_EPOCH)
    failed = sum(1 for c in errors.values() if c not in (ErrorCode.NONE, ErrorCode.STALE_CONTROLLER_EPOCH))
    log.info("LeaderAndIsr (controller epoch %d) for %d partitions: %s, %s, %d ignored (leader epoch not "
             "newer), %d failed", controller_epoch, total, counted("leader of", led),
             counted("follower of", followed), stale, failed)


class IsrMaintenance:
    """ISR expansion, shrinking and change propagation for the partitions this broker leads."""
    partitions: dict[TopicPartition, Partition]
    isr_writer: Any
    isr_notifier: Any
    isr_propagation: Any
    isr_changes: list[int]
    lag_time_max_ms: int
    run_blocking: Callable[..., defer.Deferred] | None
    scheduler: Any

    def now_ms(self) -> int:
        raise NotImplementedError

    def _wake(self, tp: TopicPartition) -> None:
        raise NotImplementedError

    def expand_isr(self, partitions: list[Partition], replica_id: int) -> None:
        """A follower fetch caught ``replica_id`` up on these partitions: add it to their ISRs."""
        changes = []
        for p in partitions:
            new_isr = p.isr + [replica_id]
            log.debug("expanding ISR of %s-%d from %s to %s", p.topic, p.partition, p.isr, new_isr)
            changes.append((p, new_isr))
        self._write_isrs(changes)
        log.info("expanding the ISR of %d partitions with replica %d (%s)", len(partitions), replica_id,
                 examples(f"{p.topic}-{p.partition}" for p in partitions))

    def isr_tasks(self) -> list[task.LoopingCall]:
        """Kafka's isr-expiration (every replica.lag.time.max.ms / 2) and isr-change-propagation
        tasks, started."""
        return [every(self.scheduler, max(self.lag_time_max_ms, 2) / 2000, "isr-expiration", self.maybe_shrink_isr),
                every(self.scheduler, CHECK_INTERVAL_MS / 1000, "isr-change-propagation",
                      self.maybe_propagate_isr_changes)]

    def maybe_shrink_isr(self) -> defer.Deferred | None:
        """The isr-expiration task: drop followers not caught up for replica.lag.time.max.ms. The
        walk of every partition runs on a thread where ``run_blocking`` is set (at 5,000 partitions
        it held the reactor for 130 ms); the ISRs are changed on the reactor, for the partitions
        found lagging that still are."""
        if self.run_blocking is None:
            self._shrink_isrs(self._lagging(self.now_ms()))
            return None
        return self.run_blocking(self._lagging, self.now_ms()).addCallback(self._shrink_isrs)

    def _lagging(self, now: int) -> list[Partition]:
        """The partitions led here with a follower out of sync; a read only, safe on a thread."""
        lag = self.lag_time_max_ms
        return [p for _, p in items_from_thread(self.partitions) if p.out_of_sync_replicas(now, lag)]

    def _shrink_isrs(self, lagging: list[Partition]) -> None:
        now = self.now_ms()
        shrunk: list[str] = []
        changes = []
        for p in lagging:
            out = p.out_of_sync_replicas(now, self.lag_time_max_ms) if self.partitions.get(p.tp) is p else None
            if out:
                new_isr = [r for r in p.isr if r not in out]
                log.debug("shrinking ISR of %s-%d from %s to %s (out of sync: %s, leader LEO %d)", p.topic,
                          p.partition, p.isr, new_isr, sorted(out), p.log_end_offset)
                shrunk.append(f"{p.topic}-{p.partition} to {new_isr} (out of sync: {sorted(out)})")
                changes.append((p, new_isr))
        self._write_isrs(changes)
        if shrunk:
            log.info("shrinking the ISR of %d partitions: %s", len(shrunk), examples(shrunk))

    def _write_isrs(self, changes: list[tuple[Partition, list[int]]]) -> None:
        """Propose each partition's new ISR, conditional on its cached zkVersion, all in one batch:
        one AlterIsr, or one batch of ZooKeeper writes off the reactor (100 to a multi,
        ``zk/multi_ops.each``: a restarted broker rejoining 5,000 ISRs of a leader costs that
        leader 50 requests, not 5,000)."""
        if self.isr_writer is None or not changes:
            return
        pending = {p.tp: (p, new_isr, p.leader_epoch, len(p.isr), p.prepare_isr_update(new_isr))
                   for p, new_isr in changes}

        def written(results: dict[TopicPartition, Any]) -> None:
            now = self.now_ms()
            errors: list[str] = []
            for tp, (p, new_isr, epoch, old_size, _) in pending.items():
                result = results.get(tp, KeyError(tp))
                if isinstance(result, Exception):
                    errors.append(f"{p.topic}-{p.partition}: {result}")
                    if p.leader_epoch == epoch and p.pending_isr == list(new_isr):
                        p.pending_isr = None
                    continue
                if self.partitions.get(tp) is not p:
                    continue
                if p.complete_isr_update(epoch, new_isr, result, now):
                    self.isr_changes[len(new_isr) < old_size] += 1
                    if self.isr_notifier is not None:
                        self.isr_propagation.record(tp, now)
                p.maybe_increment_high_watermark(now)
                self._wake(tp)
            if errors:
                log.warning("updating the ISR of %d partitions failed: %s", len(errors),
                            examples(errors))

        d = defer.maybeDeferred(self.isr_writer, {tp: entry[4] for tp, entry in pending.items()})
        d.addErrback(lambda f: {tp: f.value for tp in pending})
        d.addCallback(written)
        d.addErrback(lambda f: log.error("ISR update bookkeeping failed: %s", f.getTraceback()))

    def maybe_propagate_isr_changes(self) -> None:
        """The isr-change-propagation task: one /isr_change_notification node when due."""
        if self.isr_notifier is None:
            return
        tps = self.isr_propagation.due(self.now_ms())
        if not tps:
            return
        log.info("ISR changed for %d partitions: writing an ISR change notification (%s)", len(tps),
                 examples(f"{t}-{p}" for t, p in sorted(tps)))

        def failed(f) -> None:
            log.warning("writing an ISR change notification failed: %s", f.getErrorMessage())
            self.isr_propagation.restore(tps)
        defer.maybeDeferred(self.isr_notifier, tps).addErrback(failed)
