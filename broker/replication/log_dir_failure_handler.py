"""What the broker does when one of its log dirs goes offline (Kafka's ReplicaManager.handleLogDirFailure).

Invariant: runs on the reactor, once per failed dir (the ``LogDirFailureChannel`` calls
its listeners once per dir). Afterwards no partition of that dir is led or followed here:
its fetchers are stopped, it leaves ``ReplicaManager.partitions`` for
``offline_partitions`` (every request for it is answered KAFKA_STORAGE_ERROR, waiting
acks=all produces included), the coordinators resign it, the log manager forgets its
logs; then, if a live dir is left, one ``/log_dir_event_notification/log_dir_event_<seq>``
tells the controller, which learns the offline replicas from this broker's LeaderAndIsr
answers and elects other leaders. With no live dir left the broker must stop
(``on_all_offline``; Kafka halts), and no notification is written.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import defer

from .replica_manager import ReplicaManager, TopicPartition

log = logging.getLogger(__name__)


class LogDirFailureHandler:
    """Stops serving the replicas of a failed log dir and tells the controller."""

    def __init__(self, replica_manager: ReplicaManager, log_manager: Any,
                 notify_controller: Callable[[], defer.Deferred], on_all_offline: Callable[[str], None]):
        self.rm = replica_manager
        self.lm = log_manager
        self.notify_controller = notify_controller
        self.on_all_offline = on_all_offline

    def handle(self, log_dir: str) -> list[TopicPartition]:
        """Stop serving ``log_dir``'s partitions; the partitions taken offline."""
        rm, lm = self.rm, self.lm
        log.warning("stopping serving replicas in failed log dir %s", log_dir)
        offline = sorted(tp for tp in (log_.topic_partition for log_ in lm.all_logs())
                         if lm.log_dir_of(tp) == log_dir)
        rm.on_stop_following(offline)
        rm.mark_partitions_offline(offline)
        try:
            rm.on_stop_replicas(offline)
        except Exception:
            log.exception("coordinator resignation after the failure of %s failed", log_dir)
        lm.handle_log_dir_failure(log_dir)
        rm.wake(offline)   # parked produces and fetches now answer KAFKA_STORAGE_ERROR
        log.warning("stopped serving %d replicas in failed log dir %s: %s", len(offline), log_dir,
                    ", ".join(f"{t}-{p}" for t, p in offline))
        if lm.all_offline:
            log.error("shutting down: every log dir (%s) has failed", ", ".join(lm.log_dirs))
            self.on_all_offline(log_dir)
            return offline
        d = defer.maybeDeferred(self.notify_controller)
        d.addCallbacks(lambda path: log.info("wrote log dir event notification %s", path),
                       lambda f: log.error("writing the log dir event notification failed: %s", f.getErrorMessage()))
        return offline

