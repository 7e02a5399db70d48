"""The broker's walks of every partition off the reactor: the periodic tasks' runner
(``broker/periodic.py``), the isr-expiration walk on a thread with the ISR changed on the reactor,
the HW checkpoint written again when a partition is deleted while it is being written, and the
retention check's search for logs with something to delete."""
from __future__ import annotations

import logging
import time

from twisted.internet import defer, task

from odradek.broker.periodic import every

from broker_fixtures import Broker
from test_log import batch
from test_scale_leader_changes import Thread


def test_a_task_on_a_thread_is_not_started_again_until_it_is_done_and_failures_do_not_stop_it(caplog):
    clock = task.Clock()
    runs: list[defer.Deferred] = []
    sync_failures = [True]

    def run():
        if sync_failures and sync_failures.pop():
            raise RuntimeError("failed on the calling thread")
        runs.append(defer.Deferred())
        return runs[-1]

    loop = every(clock, 1.0, "walk", run)
    with caplog.at_level(logging.ERROR, logger="odradek.broker.periodic"):
        clock.advance(1)                      # the first run raises: logged, the task goes on
        assert "periodic task walk failed" in caplog.text and runs == []
        clock.advance(1)
        assert len(runs) == 1
        clock.advance(5)                      # still running: no second run meanwhile
        assert len(runs) == 1
        runs[0].errback(RuntimeError("failed on the thread"))
        assert caplog.text.count("periodic task walk failed") == 2
        clock.advance(1)
        assert len(runs) == 2 and loop.running
    loop.stop()


def follower_caught_up(b: Broker, partition: int) -> None:
    p = b.rm.get_partition(("t", partition))
    p.update_follower_fetch_state(2, p.log_end_offset, b.rm.now_ms())


def test_isr_expiration_walks_on_the_thread_and_shrinks_only_partitions_still_lagging(tmp_path):
    b = Broker(tmp_path, 1, replica_lag_time_max_ms=1000)
    written: list[dict] = []
    b.rm.isr_writer = lambda states: written.append(states) or defer.succeed({tp: 1 for tp in states})
    b.rm.isr_notifier = None
    thread = b.rm.run_blocking = Thread()
    try:
        b.lead("t", partitions=3, replicas=[1, 2], isr=[1, 2])
        follower_caught_up(b, 2)
        b.clock.advance(1.5)                  # the task ran at 0.5 s: its walk waits for the thread,
        assert len(thread.jobs) == 1 and written == []   # and the task for its walk
        done, walk, args = thread.jobs.pop()
        lagging = walk(*args)
        assert sorted(p.partition for p in lagging) == [0, 1]
        follower_caught_up(b, 1)              # caught up while the walk's answer was on its way
        done.callback(lagging)                # (followers not heard of since the election lag at once)
        assert len(written) == 1 and set(written[0]) == {("t", 0)}
        isrs = {tp[1]: p.isr for tp, p in b.rm.partitions.items()}
        assert isrs == {0: [1], 1: [1, 2], 2: [1, 2]}
    finally:
        b.close()


def test_a_partition_deleted_while_the_hw_checkpoint_is_written_is_not_left_in_it(tmp_path):
    b = Broker(tmp_path, 1)
    try:
        b.lead("t", partitions=2)
        write = b.log_manager.write_high_watermarks
        seen: list[set] = []

        def write_while_deleting(hws):
            seen.append(set(hws))
            if len(seen) == 1:    # the reactor deletes t-1 while the thread writes the file
                assert b.rm.stop_replicas(1, [(("t", 1), True, -2)])[0] == 0
            write(hws)

        b.log_manager.write_high_watermarks = write_while_deleting
        b.rm.checkpoint_high_watermarks()
        assert seen == [{("t", 0), ("t", 1)}, {("t", 0)}]
        assert set(b.log_manager.read_high_watermarks()) == {("t", 0)}
    finally:
        b.close()


def test_retention_finds_on_a_thread_only_the_logs_with_something_to_delete(tmp_path):
    b = Broker(tmp_path, 1, log_retention_ms=1000, log_segment_bytes=300)
    try:
        b.lead("old", partitions=1)
        b.lead("new", partitions=1)
        old, new = b.log_manager.get_log(("old", 0)), b.log_manager.get_log(("new", 0))
        now = int(time.time() * 1000)
        for _ in range(10):   # several segments each, old's records past retention.ms
            old.append_as_leader(batch(2, ts=now - 5000), 0)
            new.append_as_leader(batch(2, ts=now), 0)
        for lg in (old, new):
            lg.update_high_watermark(lg.log_end_offset)
        assert b.log_manager.logs_due_for_cleanup() == [("old", 0)]
        assert old.log_start_offset == 0 and len(old.segments) > 1   # the check deleted nothing
        assert b.log_manager.cleanup_logs([("old", 0)]) > 0
        assert old.log_start_offset == 20 and new.log_start_offset == 0
        assert b.log_manager.logs_due_for_cleanup() == []
    finally:
        b.close()
