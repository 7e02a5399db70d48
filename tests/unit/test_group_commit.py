"""``flush.messages`` as a group commit (``broker/log/log_syncs.py``): the sync runs on the thread,
one at a time per log, covering every append made meanwhile; a Produce is answered, and a follower
fetches again, only once its records are synced; a failed sync answers KAFKA_STORAGE_ERROR."""
from __future__ import annotations

import errno
import os

import pytest
from twisted.internet import defer

from odradek.broker.apis import produce
from odradek.broker.replication.log_dir_failure_handler import LogDirFailureHandler
from odradek.protocol.apis import fetch as fetch_api
from odradek.protocol.errors import ErrorCode

from broker_fixtures import Broker, batch, call_deferred, produce_body
from test_replication_fetcher import _fired, advance, fetching, state
from test_roll_flush import Pool, fsyncs  # noqa: F401  (a fixture)


def flushing_broker(tmp_path, broker_id: int = 1) -> tuple[Broker, Pool]:
    b = Broker(tmp_path, broker_id, log_flush_interval_messages=1, replica_fetch_wait_max_ms=200,
               replica_fetch_backoff_ms=100)
    pool = Pool()
    b.log_manager.run_syncs_in(pool)
    return b, pool


@pytest.fixture
def lone(tmp_path):
    b, pool = flushing_broker(tmp_path)
    b.lead("t")
    yield b, pool
    b.close()


def produce_now(b: Broker, records: bytes, acks: int = 1) -> list:
    return _fired(call_deferred(b, produce, 8, produce_body("t", records, acks=acks, timeout_ms=30000)))


def answer(box: list) -> tuple[int, int]:
    r = box[0].responses[0].partition_responses[0]
    return r.error_code, r.base_offset


@pytest.mark.parametrize("acks", [1, -1])
def test_a_produce_is_answered_once_its_group_commit_synced_it(lone, fsyncs, acks):
    b, pool = lone
    log = b.log_manager.get_log(("t", 0))
    first = produce_now(b, batch(2), acks)
    assert fsyncs == [] and len(pool.calls) == 1 and first == []   # the sync waits for the thread
    second, third = produce_now(b, batch(3), acks), produce_now(b, batch(1), acks)
    assert len(pool.calls) == 1 and second == third == []          # no second sync while one runs
    pool.run()
    assert answer(first) == (0, 0) and second == third == []      # the first group covered offsets 0-1
    assert log.recovery_point == 2 and len(pool.calls) == 1        # one more group for what came meanwhile
    pool.run()
    assert answer(second) == (0, 2) and answer(third) == (0, 5)
    assert log.recovery_point == 6 and pool.calls == []
    assert fsyncs.count("00000000000000000000.log") == 2           # two fsyncs for three Produces


def test_without_flush_messages_nothing_waits(tmp_path):
    b = Broker(tmp_path)
    b.log_manager.run_syncs_in(Pool())
    b.lead("t")
    assert answer(produce_now(b, batch(2))) == (0, 0)
    b.close()


def test_a_failed_group_commit_answers_a_storage_error_and_takes_the_dir_offline(lone, monkeypatch):
    b, pool = lone
    box = produce_now(b, batch(2))
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "Input/output error")))
    d = b.log_manager.log_dir_of(("t", 0))
    handler = LogDirFailureHandler(b.rm, b.log_manager, lambda: defer.succeed(None), lambda dir_: None)
    b.log_manager.failure_channel.add_listener(handler.handle)
    pool.run()
    assert b.log_manager.failure_channel.is_offline(d)
    assert box and box[0].responses[0].partition_responses[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert b.rm.log_syncs.running == {}


def test_a_follower_fetches_again_only_once_its_appends_are_synced(tmp_path):
    """acks=all is answered once both replicas synced the records: the follower's next fetch, which
    tells the leader its log end offset, waits for the follower's group commit, as Kafka's
    follower flushes in its append before fetching again."""
    leader, leader_pool = flushing_broker(tmp_path, 1)
    follower, follower_pool = flushing_broker(tmp_path, 2)
    with fetching(leader, follower) as (_, clients):
        leader.lead("t", replicas=[1, 2], isr=[1, 2])
        follower.rm.become_leader_or_follower(1, [state(1, 0, [1, 2])])
        advance([leader, follower], 0.5)
        box = produce_now(leader, batch(5), acks=-1)
        leader_pool.run()                     # the leader's records are synced first
        advance([leader, follower], 1.0)
        fp = follower.rm.get_partition(("t", 0))
        assert fp.log_end_offset == 5 and len(follower_pool.calls) == 1
        fetches = sum(1 for name, _ in clients[1].sent if name == fetch_api.NAME)
        advance([leader, follower], 1.0)
        assert box == [] and leader.rm.get_partition(("t", 0)).high_watermark == 0
        assert sum(1 for name, _ in clients[1].sent if name == fetch_api.NAME) == fetches   # no fetch meanwhile
        follower_pool.run()
        advance([leader, follower], 0.5)
        assert answer(box) == (0, 0) and leader.rm.get_partition(("t", 0)).high_watermark == 5
        assert follower.log_manager.get_log(("t", 0)).recovery_point == 5


def test_after_a_truncation_no_append_waits_for_a_sync_wanted_before_it(tmp_path):
    """A log that was synced to 3, truncated to 1 (its recovery point too) and appended to again
    short of flush.messages has no group commit due: an acks=all Produce is not held back."""
    from odradek.broker.config.kafka_config import LogConfig
    from odradek.broker.log import LogManager
    from test_log_manager import kcfg
    from test_roll_flush import batch as log_batch
    mgr = LogManager([str(tmp_path)], kcfg())
    pool = Pool()
    mgr.run_syncs_in(pool)
    log = mgr.get_or_create_log(("t", 0), LogConfig({"flush.messages": "3"}))
    for _ in range(3):
        log.append_as_leader(log_batch(1), 0)
    assert log.awaits_sync(3)
    pool.run()
    assert log.recovery_point == 3 and not log.awaits_sync(3)
    log.truncate_to(1)
    log.append_as_leader(log_batch(1), 0)
    assert log.recovery_point == 1 and log.log_end_offset == 2 and pool.calls == []
    assert not log.awaits_sync(2)
    mgr.shutdown()
