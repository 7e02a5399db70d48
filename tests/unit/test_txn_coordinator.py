"""The sans-IO TransactionCoordinator: state table, InitProducerId / AddPartitions / EndTxn
flows, fencing, concurrent transactions, timeouts, expiry, loading and resuming."""
from __future__ import annotations

from typing import Callable

import pytest

from odradek.broker.completion import Completion
from odradek.broker.group.offsets import partition_for
from odradek.broker.txn import MarkerJob, TransactionCoordinator, TxnConfig
from odradek.broker.txn.metadata import (TRANSITIONS, IllegalTxnTransition, TransactionMetadata,
                                         TxnState as S)
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import iter_batches
from odradek.protocol.txn_records import decode_txn_record

PARTITIONS = 4
TIMEOUT = 60_000


class FakeTimer:
    def __init__(self, now: int = 1_000_000):
        self.now = now
        self.calls: list[list] = []

    def now_ms(self) -> int:
        return self.now

    def schedule(self, delay_ms: int, callback: Callable[[], None]):
        call = [self.now + delay_ms, callback, True]
        self.calls.append(call)
        return call

    def cancel(self, handle) -> None:
        if handle is not None:
            handle[2] = False

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while True:
            due = sorted((c for c in self.calls if c[2] and c[0] <= target), key=lambda c: c[0])
            if not due:
                break
            call = due[0]
            call[2] = False
            self.now = max(self.now, call[0])
            call[1]()
        self.now = target


class Harness:
    """A coordinator with an in-memory transaction log, manual or automatic append acks,
    a producer id counter and a recording marker sender."""

    def __init__(self, auto_ack: bool = True, **config):
        self.timer = FakeTimer()
        self.auto_ack = auto_ack
        self.log: dict[int, list[bytes]] = {}
        self.waiting: list[tuple[int, bytes, Completion]] = []
        self.next_pid = 1000
        self.jobs: list[MarkerJob] = []
        self.config = TxnConfig(num_partitions=PARTITIONS, **config)
        self.coord = TransactionCoordinator(self.config, self.timer, self.append, self.generate_pid,
                                            self.jobs.append)
        self.coord.startup()

    def append(self, partition: int, batch: bytes) -> Completion[E]:
        done: Completion[E] = Completion()
        if self.auto_ack:
            self.log.setdefault(partition, []).append(batch)
            done.complete(E.NONE)
        else:
            self.waiting.append((partition, batch, done))
        return done

    def ack(self, error: E = E.NONE) -> None:
        partition, batch, done = self.waiting.pop(0)
        if error == E.NONE:
            self.log.setdefault(partition, []).append(batch)
        done.complete(error)

    def generate_pid(self) -> Completion[int]:
        self.next_pid += 1
        return Completion.completed(self.next_pid)

    def own(self, *partitions: int, epoch: int = 0) -> None:
        for p in partitions or range(PARTITIONS):
            assert self.coord.on_elected(p, epoch)
            self.coord.finish_loading(p)

    def records(self, txn_id: str):
        """Decoded (id, value) records written for ``txn_id``, in order."""
        out = []
        for batch in self.log.get(partition_for(txn_id, PARTITIONS), []):
            for _, recs in iter_batches(batch):
                for r in recs:
                    k, v = decode_txn_record(r.key, r.value)
                    if k == txn_id:
                        out.append(v)
        return out

    def md(self, txn_id: str) -> TransactionMetadata:
        error, _, md = self.coord.manager.get(txn_id)
        assert error == E.NONE and md is not None
        return md

    # request helpers returning the completed value
    def init(self, txn_id: str, timeout: int = TIMEOUT, expected=None):
        return self.coord.handle_init_producer_id(txn_id, timeout, expected).result

    def add(self, txn_id: str, pid: int, epoch: int, *tps):
        return self.coord.handle_add_partitions(txn_id, pid, epoch, tps or [("t", 0), ("t", 1)]).result

    def end(self, txn_id: str, pid: int, epoch: int, commit: bool):
        return self.coord.handle_end_transaction(txn_id, pid, epoch, commit).result

    def write_all_markers(self, job: MarkerJob | None = None) -> None:
        job = job or self.jobs[-1]
        for tp in sorted(job.pending):
            self.coord.marker_written(job, tp)


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.own()
    return harness


def begun(h: Harness, txn_id: str = "tx"):
    r = h.init(txn_id)
    assert r.error_code == E.NONE
    assert h.add(txn_id, r.producer_id, r.producer_epoch) == E.NONE
    return r.producer_id, r.producer_epoch


# ---------------------------------------------------------------- the state table

KAFKA_VALID_PREVIOUS = {   # Kafka 2.8's TransactionState.validPreviousStates
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def test_transition_table_is_kafkas():
    for target, previous in KAFKA_VALID_PREVIOUS.items():
        assert {s for s in S if target in TRANSITIONS[s]} == previous, target


def test_status_bytes_and_names():
    assert [s.value for s in S] == list(range(8))
    assert S.PREPARE_EPOCH_FENCE.kafka_name == "PrepareEpochFence"
    assert S.COMPLETE_COMMIT.kafka_name == "CompleteCommit"


def test_illegal_moves_raise_and_one_transition_at_a_time():
    md = TransactionMetadata("x", 1, producer_epoch=0, state=S.EMPTY)
    with pytest.raises(IllegalTxnTransition):
        md.prepare_abort_or_commit(S.PREPARE_COMMIT, 5)         # Empty -> PrepareCommit
    md.prepare_add_partitions({("t", 0)}, 5)
    with pytest.raises(IllegalTxnTransition):                   # Ongoing is still pending
        md.prepare_add_partitions({("t", 1)}, 6)


# ---------------------------------------------------------------- InitProducerId

def test_init_new_id_persists_empty_at_epoch_zero(h):
    r = h.init("tx")
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1001, 0)
    [v] = h.records("tx")
    assert (v.producer_id, v.producer_epoch, v.status, v.timeout_ms, v.partitions) == (1001, 0, 0, TIMEOUT,
                                                                                       frozenset())
    assert h.md("tx").state is S.EMPTY


def test_init_again_bumps_the_epoch_and_keeps_the_id(h):
    first = h.init("tx")
    second = h.init("tx", timeout=30_000)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    assert h.md("tx").timeout_ms == 30_000


@pytest.mark.parametrize("timeout", [0, -1, 900_001])
def test_init_rejects_timeouts_outside_the_max(h, timeout):
    assert h.init("tx", timeout=timeout).error_code == E.INVALID_TRANSACTION_TIMEOUT


def test_not_coordinator_and_loading():
    h = Harness()
    assert h.init("tx").error_code == E.NOT_COORDINATOR
    h.coord.on_elected(partition_for("tx", PARTITIONS), 3)
    assert h.init("tx").error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.add("tx", 1, 0) == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.end("tx", 1, 0, True) == E.COORDINATOR_LOAD_IN_PROGRESS


def test_epoch_exhaustion_rotates_the_producer_id(h):
    r = h.init("tx")
    h.md("tx").producer_epoch = 2**15 - 2     # as if it had been bumped that often
    again = h.init("tx")
    assert again.error_code == E.NONE
    assert again.producer_id != r.producer_id and again.producer_epoch == 0
    assert h.md("tx").last_producer_id == r.producer_id


def test_kip360_bump_retry_and_fencing(h):
    r = h.init("tx")
    bumped = h.init("tx", expected=(r.producer_id, r.producer_epoch))
    assert (bumped.error_code, bumped.producer_epoch) == (E.NONE, 1)
    # the same request again (its response was lost): the same epoch, no second bump
    retry = h.init("tx", expected=(r.producer_id, r.producer_epoch))
    assert (retry.error_code, retry.producer_epoch) == (E.NONE, 1)
    assert h.init("tx", expected=(r.producer_id + 7, 0)).error_code == E.PRODUCER_FENCED
    h.init("tx")                                  # another producer: last epoch forgotten
    assert h.init("tx", expected=(r.producer_id, 0)).error_code == E.PRODUCER_FENCED


# ---------------------------------------------------------------- AddPartitions / EndTxn

def test_add_partitions_writes_ongoing(h):
    pid, epoch = begun(h)
    md = h.md("tx")
    assert md.state is S.ONGOING and md.partitions == {("t", 0), ("t", 1)}
    assert md.start_timestamp == h.timer.now
    v = h.records("tx")[-1]
    assert v.status == S.ONGOING.value and v.partitions == {("t", 0), ("t", 1)}
    n = len(h.records("tx"))
    assert h.add("tx", pid, epoch, ("t", 0)) == E.NONE      # already in: no write
    assert len(h.records("tx")) == n
    assert h.add("tx", pid, epoch, ("u", 3)) == E.NONE
    assert h.md("tx").partitions == {("t", 0), ("t", 1), ("u", 3)}


def test_add_partitions_errors(h):
    pid, epoch = begun(h)
    assert h.add("tx", pid + 1, epoch) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.add("tx", pid, epoch + 1) == E.PRODUCER_FENCED
    assert h.add("unknown", pid, epoch) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.add("", pid, epoch) == E.INVALID_REQUEST


def test_commit_flow_prepare_answer_markers_complete(h):
    pid, epoch = begun(h)
    assert h.end("tx", pid, epoch, True) == E.NONE
    assert h.records("tx")[-1].status == S.PREPARE_COMMIT.value
    [job] = h.jobs
    assert (job.producer_id, job.producer_epoch, job.commit) == (pid, epoch, True)
    assert job.pending == {("t", 0), ("t", 1)}
    assert job.coordinator_epoch == 0
    md = h.md("tx")
    assert md.state is S.PREPARE_COMMIT and md.pending_state is S.COMPLETE_COMMIT
    # while the markers are out, everything else waits
    assert h.add("tx", pid, epoch) == E.CONCURRENT_TRANSACTIONS
    assert h.end("tx", pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
    assert h.init("tx").error_code == E.CONCURRENT_TRANSACTIONS
    h.coord.marker_written(job, ("t", 0))
    assert md.state is S.PREPARE_COMMIT and md.partitions == {("t", 1)}
    h.coord.marker_written(job, ("t", 1))
    last = h.records("tx")[-1]
    assert last.status == S.COMPLETE_COMMIT.value and last.partitions == frozenset()
    assert md.state is S.COMPLETE_COMMIT and not md.pending and md.partitions == set()


def test_end_txn_retries_are_answered_like_kafka(h):
    pid, epoch = begun(h)
    h.end("tx", pid, epoch, True)
    h.write_all_markers()
    assert h.end("tx", pid, epoch, True) == E.NONE              # a retried commit
    assert h.end("tx", pid, epoch, False) == E.INVALID_TXN_STATE
    pid, epoch = begun(h, "ab")
    h.end("ab", pid, epoch, False)
    assert h.end("ab", pid, epoch, False) == E.CONCURRENT_TRANSACTIONS   # markers still out
    assert h.end("ab", pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
    h.write_all_markers()
    assert h.end("ab", pid, epoch, False) == E.NONE
    assert h.end("ab", pid, epoch, True) == E.INVALID_TXN_STATE


def test_end_txn_errors(h):
    r = h.init("tx")
    assert h.end("tx", r.producer_id, r.producer_epoch, True) == E.INVALID_TXN_STATE   # Empty
    assert h.end("tx", r.producer_id + 1, r.producer_epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.end("tx", r.producer_id, r.producer_epoch + 1, True) == E.PRODUCER_FENCED
    assert h.end("nobody", 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING


def test_pending_append_gives_concurrent_transactions():
    h = Harness(auto_ack=False)
    h.own()
    c = h.coord.handle_init_producer_id("tx", TIMEOUT)
    h.ack()
    r = c.result
    pending = h.coord.handle_add_partitions("tx", r.producer_id, r.producer_epoch, [("t", 0)])
    assert not pending.done
    assert h.add("tx", r.producer_id, r.producer_epoch) == E.CONCURRENT_TRANSACTIONS
    assert h.init("tx").error_code == E.CONCURRENT_TRANSACTIONS
    h.ack()
    assert pending.result == E.NONE


def test_failed_append_maps_the_error_and_unblocks_the_id():
    h = Harness(auto_ack=False)
    h.own()
    c = h.coord.handle_init_producer_id("tx", TIMEOUT)
    h.ack()
    r = c.result
    add = h.coord.handle_add_partitions("tx", r.producer_id, r.producer_epoch, [("t", 0)])
    h.ack(E.NOT_LEADER_OR_FOLLOWER)
    assert add.result == E.NOT_COORDINATOR
    add = h.coord.handle_add_partitions("tx", r.producer_id, r.producer_epoch, [("t", 0)])
    h.ack(E.NOT_ENOUGH_REPLICAS)
    assert add.result == E.COORDINATOR_NOT_AVAILABLE
    md = h.md("tx")
    assert md.state is S.EMPTY and not md.pending


def test_add_offsets_partition_is_just_a_partition(h):
    pid, epoch = begun(h)
    assert h.add("tx", pid, epoch, ("__consumer_offsets", 7)) == E.NONE
    h.end("tx", pid, epoch, True)
    assert ("__consumer_offsets", 7) in h.jobs[-1].pending


def test_deleted_topic_is_dropped_from_the_transaction(h):
    pid, epoch = begun(h)
    h.end("tx", pid, epoch, False)
    job = h.jobs[-1]
    h.coord.marker_partition_dropped(job, ("t", 0))
    h.coord.marker_written(job, ("t", 1))
    assert h.md("tx").state is S.COMPLETE_ABORT


# ---------------------------------------------------------------- fencing

def test_init_during_a_transaction_fences_and_aborts_it_first(h):
    pid, epoch = begun(h)
    r = h.init("tx")
    assert r.error_code == E.CONCURRENT_TRANSACTIONS
    prepare = h.records("tx")[-1]
    assert prepare.status == S.PREPARE_ABORT.value and prepare.producer_epoch == epoch + 1
    job = h.jobs[-1]
    assert job.commit is False and job.producer_epoch == epoch + 1
    # the old producer is fenced: its epoch is behind
    assert h.end("tx", pid, epoch, True) == E.PRODUCER_FENCED
    assert h.add("tx", pid, epoch) == E.PRODUCER_FENCED
    assert h.init("tx").error_code == E.CONCURRENT_TRANSACTIONS    # markers still out
    h.write_all_markers(job)
    assert h.records("tx")[-1].status == S.COMPLETE_ABORT.value
    again = h.init("tx")
    assert (again.error_code, again.producer_id, again.producer_epoch) == (E.NONE, pid, epoch + 2)


def test_failed_fence_does_not_bump_twice():
    h = Harness(auto_ack=False)
    h.own()
    c = h.coord.handle_init_producer_id("tx", TIMEOUT)
    h.ack()
    r = c.result
    h.coord.handle_add_partitions("tx", r.producer_id, r.producer_epoch, [("t", 0)])
    h.ack()
    fence = h.coord.handle_init_producer_id("tx", TIMEOUT)
    h.ack(E.REQUEST_TIMED_OUT)
    assert fence.result.error_code == E.COORDINATOR_NOT_AVAILABLE
    md = h.md("tx")
    assert md.has_failed_epoch_fence and md.producer_epoch == 1 and md.state is S.ONGOING
    fence = h.coord.handle_init_producer_id("tx", TIMEOUT)
    h.ack()
    assert fence.result.error_code == E.CONCURRENT_TRANSACTIONS
    assert h.records("tx")[-1].producer_epoch == 1       # still one above the fenced producer


# ---------------------------------------------------------------- timeouts and expiry

def test_timed_out_transaction_is_fenced_and_aborted(h):
    pid, epoch = begun(h)
    h.timer.advance(TIMEOUT - 1)
    assert h.md("tx").state is S.ONGOING
    h.timer.advance(h.config.abort_timed_out_interval_ms + 1)
    md = h.md("tx")
    assert md.state is S.PREPARE_ABORT and md.producer_epoch == epoch + 1
    job = h.jobs[-1]
    assert job.commit is False and job.producer_epoch == epoch + 1
    h.write_all_markers(job)
    assert md.state is S.COMPLETE_ABORT
    assert h.end("tx", pid, epoch, True) == E.PRODUCER_FENCED


def test_idle_transactional_ids_expire_with_a_tombstone(h):
    h.init("old")
    h.timer.advance(1000)
    pid, epoch = begun(h, "busy")
    h.timer.now += h.config.transactional_id_expiration_ms - 500
    h.coord.expire_transactional_ids()
    assert h.records("old")[-1] is None                      # tombstone
    assert h.coord.manager.get("old")[2] is None
    assert h.md("busy").state is S.ONGOING                   # ongoing ids never expire
    assert h.init("old").producer_id != pid                  # a fresh id after expiry


def test_expiry_runs_on_its_interval():
    h = Harness(transactional_id_expiration_ms=5_000, remove_expired_interval_ms=1_000)
    h.own()
    h.init("tx")
    h.timer.advance(6_000)
    assert h.coord.manager.get("tx")[2] is None


# ---------------------------------------------------------------- loading and resuming

def test_load_rebuilds_and_resumes_prepared_transactions():
    old = Harness()
    old.own()
    pid, epoch = begun(old, "committing")
    old.end("committing", pid, epoch, True)               # PrepareCommit written, markers never sent
    begun(old, "open")
    old.init("idle")
    partitions = {partition_for(t, PARTITIONS) for t in ("committing", "open", "idle")}

    new = Harness()
    new.log = old.log
    for p in partitions:
        assert new.coord.on_elected(p, 5)
        for batch in old.log.get(p, []):
            new.coord.load_batches(p, batch)
        new.coord.finish_loading(p)
    assert new.md("open").state is S.ONGOING and new.md("open").partitions == {("t", 0), ("t", 1)}
    assert new.md("idle").state is S.EMPTY
    md = new.md("committing")
    assert md.state is S.PREPARE_COMMIT and md.pending_state is S.COMPLETE_COMMIT
    [job] = new.jobs
    assert job.commit and job.coordinator_epoch == 5 and job.pending == {("t", 0), ("t", 1)}
    new.write_all_markers(job)
    assert md.state is S.COMPLETE_COMMIT
    assert new.records("committing")[-1].status == S.COMPLETE_COMMIT.value


def test_resigning_drops_the_partition_and_its_markers(h):
    pid, epoch = begun(h)
    h.end("tx", pid, epoch, True)
    job = h.jobs[-1]
    p = partition_for("tx", PARTITIONS)
    h.coord.on_resigned(p, 0)
    assert h.init("tx").error_code == E.NOT_COORDINATOR
    assert not h.coord.is_job_live(job)
    assert h.coord.marker_written(job, ("t", 0)) is False


def test_stale_resign_is_ignored(h):
    p = partition_for("tx", PARTITIONS)
    h.coord.on_elected(p, 4)
    h.coord.finish_loading(p)
    h.coord.on_resigned(p, 3)
    assert h.init("tx").error_code == E.NONE
    assert not h.coord.on_elected(p, 2)


def test_complete_write_retries_while_the_log_is_unavailable():
    h = Harness(auto_ack=False)
    h.own()
    c = h.coord.handle_init_producer_id("tx", TIMEOUT)
    h.ack()
    r = c.result
    h.coord.handle_add_partitions("tx", r.producer_id, r.producer_epoch, [("t", 0)])
    h.ack()
    end = h.coord.handle_end_transaction("tx", r.producer_id, r.producer_epoch, True)
    h.ack()
    assert end.result == E.NONE
    h.write_all_markers()
    h.ack(E.NOT_ENOUGH_REPLICAS)                  # CompleteCommit not durable: try again
    md = h.md("tx")
    assert md.pending_state is S.COMPLETE_COMMIT
    h.timer.advance(h.config.marker_retry_backoff_ms)
    h.ack()
    assert md.state is S.COMPLETE_COMMIT and not md.pending


def test_config_by_kafka_names_and_defaults():
    from odradek.broker.config.kafka_config import KafkaConfig
    cfg = KafkaConfig({"zookeeper.connect": "zk:2181"})
    assert TxnConfig.from_kafka_config(cfg) == TxnConfig()
    assert (cfg["transaction.state.log.replication.factor"], cfg["transaction.state.log.min.isr"],
            cfg["transaction.state.log.segment.bytes"], cfg["transaction.state.log.load.buffer.size"]) == \
        (3, 2, 104857600, 5242880)
    custom = KafkaConfig({"zookeeper.connect": "zk:2181", "transaction.max.timeout.ms": "1000",
                          "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
                          "transaction.remove.expired.transaction.cleanup.interval.ms": "700",
                          "transactional.id.expiration.ms": "900", "transaction.state.log.num.partitions": "3"})
    t = TxnConfig.from_kafka_config(custom)
    assert (t.max_timeout_ms, t.abort_timed_out_interval_ms, t.remove_expired_interval_ms,
            t.transactional_id_expiration_ms, t.num_partitions) == (1000, 500, 700, 900, 3)
