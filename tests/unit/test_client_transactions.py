"""The transactional producer and read_committed consumer against the fake transaction coordinator.

Covers the state table (client/transaction_manager.py), the request sequence of a
transaction, abortable vs fatal errors, fencing, retries and timeouts, the idempotence
config rules, and read_committed filtering of hand-built record batches.
"""
from __future__ import annotations

import time

import pytest
from client_txn_fake import TxnFakeBroker

from odradek.client import (
    ClientConfig,
    ConfigError,
    Consumer,
    ConsumerGroupMetadata,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    OffsetAndMetadata,
    Producer,
    ProducerFencedError,
    TopicPartition,
    TransactionAbortedError,
)
from odradek.client.fetcher import committed_records
from odradek.client.transaction_manager import TRANSITIONS, TransactionManager, TxnState
from odradek.protocol.control_records import build_control_batch
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import BatchBuilder, iter_records

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture
def broker():
    b = TxnFakeBroker()
    b.create_topic("t", 2)
    b.create_topic("in", 1)
    yield b
    b.stop()


def txn_producer(b, tid="tx-1", **kw):
    kw.setdefault("request_timeout_ms", 5000)
    kw.setdefault("max_block_ms", 5000)
    kw.setdefault("retry_backoff_ms", 20)
    return Producer(bootstrap_servers=b.bootstrap, transactional_id=tid, **kw)


def read_all(b, isolation, tps=(T0, T1), expect=None, timeout=5.0):
    c = Consumer(bootstrap_servers=b.bootstrap, isolation_level=isolation, auto_offset_reset="earliest")
    c.assign(list(tps))
    got = []
    end = {tp: b.next_offset[tuple(tp)] for tp in tps}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for recs in c.poll(100).values():
            got.extend(recs)
        if expect is not None and len(got) >= expect:
            break
        if expect is None and all(c.position(tp) >= end[tp] for tp in tps):
            break
    positions = {tp: c.position(tp) for tp in tps}
    c.close()
    return sorted(r.value for r in got), positions


# -- the state table ----------------------------------------------------------------------------

LEGAL = {
    ("UNINITIALIZED", "INITIALIZING"), ("INITIALIZING", "READY"), ("READY", "IN_TRANSACTION"),
    ("IN_TRANSACTION", "COMMITTING_TRANSACTION"), ("IN_TRANSACTION", "ABORTING_TRANSACTION"),
    ("IN_TRANSACTION", "ABORTABLE_ERROR"), ("COMMITTING_TRANSACTION", "READY"),
    ("COMMITTING_TRANSACTION", "ABORTABLE_ERROR"), ("ABORTING_TRANSACTION", "READY"),
    ("ABORTING_TRANSACTION", "INITIALIZING"), ("ABORTABLE_ERROR", "ABORTING_TRANSACTION"),
    ("ABORTABLE_ERROR", "ABORTABLE_ERROR"),
}


def test_transition_table_is_kafkas():
    got = {(s.name, t.name) for s, targets in TRANSITIONS.items() for t in targets if t is not TxnState.FATAL_ERROR}
    assert got == LEGAL
    assert all(TxnState.FATAL_ERROR in targets for targets in TRANSITIONS.values())
    assert TRANSITIONS[TxnState.FATAL_ERROR] == {TxnState.FATAL_ERROR}


@pytest.mark.parametrize("source", list(TxnState))
@pytest.mark.parametrize("target", list(TxnState))
def test_every_illegal_move_raises(source, target):
    tm = TransactionManager("x", 60000, 100)
    tm.state = source
    if target in TRANSITIONS[source]:
        tm._transition(target, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR))
        assert tm.state is target
    else:
        with pytest.raises(IllegalStateError):
            tm._transition(target)
        assert tm.state is source


def test_api_calls_in_the_wrong_state_raise_illegal_state(broker):
    p = txn_producer(broker)
    with pytest.raises(IllegalStateError, match="init_transactions"):
        p.begin_transaction()
    with pytest.raises(IllegalStateError):
        p.send("t", b"x")
    p.init_transactions()
    with pytest.raises(IllegalStateError, match="begin_transaction"):
        p.send("t", b"x")
    with pytest.raises(IllegalStateError, match="no transaction"):
        p.commit_transaction()
    with pytest.raises(IllegalStateError, match="no transaction"):
        p.abort_transaction()
    p.begin_transaction()
    with pytest.raises(IllegalStateError, match="already in progress"):
        p.begin_transaction()
    p.abort_transaction()   # nothing was sent: no EndTxn goes out
    assert "EndTxn" not in broker.kinds()
    p.close()
    plain = Producer(bootstrap_servers=broker.bootstrap)
    with pytest.raises(IllegalStateError, match="transactional.id"):
        plain.begin_transaction()
    plain.close()


# -- configuration ------------------------------------------------------------------------------

def test_transactional_id_implies_idempotence_acks_all():
    cfg = ClientConfig("producer", transactional_id="t1")
    assert cfg["enable.idempotence"] is True and cfg["acks"] == -1
    assert cfg["transaction.timeout.ms"] == 60000


@pytest.mark.parametrize("kwargs,message", [
    ({"transactional_id": "t1", "enable_idempotence": False}, "without also enabling idempotence"),
    ({"transactional_id": "t1", "acks": 1}, "acks=all"),
    ({"enable_idempotence": True, "acks": 0}, "acks=all"),
    ({"enable_idempotence": True, "max_in_flight_requests_per_connection": 6}, "<= 5"),
    ({"transactional_id": "t1", "max_in_flight_requests_per_connection": 6}, "<= 5"),
    ({"enable_idempotence": True, "retries": 0}, "retries"),
    ({"transactional_id": ""}, "non-empty"),
    ({"transaction_timeout_ms": 0}, "transaction.timeout.ms"),
])
def test_idempotence_and_transaction_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        ClientConfig("producer", **kwargs)


def test_idempotent_producer_numbers_batches_per_partition(broker):
    p = Producer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, linger_ms=0)
    for i in range(6):
        p.send("t", b"x", partition=i % 2).get(5)
    p.close()
    produced = [b for kind, *rest in broker.txn_log if kind == "Produce" for b in rest[1]]
    assert {b[1] for b in produced} <= broker.idempotent_pids          # one producer id, epoch 0
    seqs = {}
    for key, _pid, epoch, seq, transactional in produced:
        assert epoch == 0 and not transactional
        seqs.setdefault(key, []).append(seq)
    assert seqs == {("t", 0): [0, 1, 2], ("t", 1): [0, 1, 2]}
    assert broker.txn_log[0][:2] == ("InitProducerId", None)


# -- a transaction on the wire --------------------------------------------------------------------

def test_commit_sends_kafkas_request_sequence(broker):
    p = txn_producer(broker, linger_ms=50, transaction_timeout_ms=30000)
    p.init_transactions()
    assert broker.txn_log[:2] == [("FindCoordinator", 1, "tx-1"), ("InitProducerId", "tx-1", -1, -1)]
    assert broker.txns["tx-1"].timeout_ms == 30000
    p.begin_transaction()
    futs = [p.send("t", f"v{i}".encode(), partition=i % 2) for i in range(10)]
    p.flush()
    group = ConsumerGroupMetadata("g1", 7, "member-a", None)
    broker.state.group("g1").generation = 7
    p.send_offsets_to_transaction({TopicPartition("in", 0): 42, TopicPartition("in", 1): OffsetAndMetadata(9, "m")},
                                  group)
    p.commit_transaction()
    log = broker.txn_log[2:]
    kinds = [entry[0] for entry in log]
    # sends right after the first one may race its AddPartitionsToTxn: merge repeats
    collapsed = [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]]
    assert collapsed == ["AddPartitionsToTxn", "Produce", "AddOffsetsToTxn", "FindCoordinator",
                         "TxnOffsetCommit", "EndTxn"]
    added = {tp for entry in log if entry[0] == "AddPartitionsToTxn" for tp in entry[1]}
    assert added == {("t", 0), ("t", 1)} and broker.produce_violations == []
    assert log[-3] == ("FindCoordinator", 0, "g1")          # the GROUP coordinator
    assert log[-2] == ("TxnOffsetCommit", 3, "g1", 7, "member-a", ((("in", 0), 42), (("in", 1), 9)))
    assert log[-1] == ("EndTxn", True)
    pid = broker.txns["tx-1"].producer_id
    batches = [b for entry in log if entry[0] == "Produce" for b in entry[2]]
    assert {entry[1] for entry in log if entry[0] == "Produce"} == {"tx-1"}
    assert sorted(batches) == [(("t", 0), pid, 0, 0, True), (("t", 1), pid, 0, 0, True)]
    assert [f.get(0).offset for f in futs] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert broker.produce_violations == []
    assert broker.committed_offsets == {"g1": {("in", 0): 42, ("in", 1): 9}}
    # the next transaction: sequences continue, partitions are added again
    p.begin_transaction()
    p.send("t", b"w", partition=0)
    p.commit_transaction()
    assert broker.kinds()[-3:] == ["AddPartitionsToTxn", "Produce", "EndTxn"]
    assert broker.txn_log[-2][2] == ((("t", 0), pid, 0, 5, True),)
    p.close()
    values, positions = read_all(broker, "read_committed")
    assert len(values) == 11 and positions == {T0: 8, T1: 6}   # past both commit markers


def test_commit_waits_for_lingering_batches(broker):
    p = txn_producer(broker, linger_ms=60000, batch_size=1 << 20)
    p.init_transactions()
    p.begin_transaction()
    fut = p.send("t", b"late", partition=1)
    p.commit_transaction()            # sends the batch first, then EndTxn
    assert fut.is_done() and fut.get(0).offset == 0
    assert broker.kinds()[-2:] == ["Produce", "EndTxn"]
    p.close()


def test_abort_drops_unsent_records_and_hides_sent_ones(broker):
    p = txn_producer(broker, linger_ms=60000, batch_size=1 << 20)
    p.init_transactions()
    p.begin_transaction()
    sent = p.send("t", b"sent", partition=0)
    p.flush()
    queued = p.send("t", b"queued", partition=1)
    p.abort_transaction()
    assert sent.get(0).offset == 0
    with pytest.raises(TransactionAbortedError):
        queued.get(1)
    assert broker.txn_log[-1] == ("EndTxn", False)
    assert ("t", 1) not in {key for kind, *rest in broker.txn_log if kind == "Produce" for key, *_ in rest[1]}
    p.begin_transaction()                 # the producer is usable again
    p.send("t", b"kept", partition=0)
    p.commit_transaction()
    p.close()
    assert read_all(broker, "read_committed", expect=1)[0] == [b"kept"]
    assert read_all(broker, "read_uncommitted", expect=2)[0] == [b"kept", b"sent"]


def test_close_mid_transaction_aborts_it(broker):
    p = txn_producer(broker)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", b"x", partition=0).get(5)
    p.close()
    assert broker.txn_log[-1] == ("EndTxn", False)


# -- errors --------------------------------------------------------------------------------------

def test_init_retries_coordinator_errors_and_rediscovers(broker):
    broker.inject["FindCoordinator"] = [ErrorCode.COORDINATOR_NOT_AVAILABLE]
    broker.inject["InitProducerId"] = [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS,
                                       ErrorCode.NOT_COORDINATOR]
    p = txn_producer(broker)
    p.init_transactions()
    assert broker.kinds() == ["FindCoordinator", "FindCoordinator", "InitProducerId", "InitProducerId",
                              "InitProducerId", "FindCoordinator", "InitProducerId"]
    p.close()


def test_add_partitions_and_end_txn_retry_concurrent_transactions(broker):
    p = txn_producer(broker)
    p.init_transactions()
    broker.inject["AddPartitionsToTxn"] = [ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
    broker.inject["EndTxn"] = [ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_COORDINATOR]
    p.begin_transaction()
    p.send("t", b"x", partition=0)
    p.commit_transaction()
    kinds = broker.kinds()
    assert kinds.count("AddPartitionsToTxn") == 3 and kinds.count("EndTxn") == 3
    assert kinds.index("Produce") > max(i for i, k in enumerate(kinds) if k == "AddPartitionsToTxn")
    assert broker.produce_violations == []
    p.close()
    assert read_all(broker, "read_committed", expect=1)[0] == [b"x"]


def test_timeouts_raise_and_the_call_can_be_repeated(broker):
    broker.inject["InitProducerId"] = [ErrorCode.CONCURRENT_TRANSACTIONS] * 1000
    p = txn_producer(broker, retry_backoff_ms=10)
    with pytest.raises(KafkaTimeoutError, match="InitProducerId"):
        p.init_transactions(timeout=0.2)
    broker.inject["InitProducerId"].clear()
    p.init_transactions()             # resumes the same initialization
    assert broker.kinds().count("FindCoordinator") == 1
    p.begin_transaction()
    p.close()


def test_abortable_error_fails_commit_then_abort_recovers(broker):
    p = txn_producer(broker)
    p.init_transactions()
    p.begin_transaction()
    broker.inject["Produce"] = [ErrorCode.INVALID_RECORD]
    fut = p.send("t", b"bad", partition=0)
    with pytest.raises(KafkaError) as info:
        fut.get(5)
    assert info.value.code == ErrorCode.INVALID_RECORD
    with pytest.raises(KafkaError, match="INVALID_RECORD"):
        p.send("t", b"more", partition=1)
    with pytest.raises(KafkaError, match="INVALID_RECORD"):
        p.commit_transaction()
    assert "EndTxn" not in broker.kinds()
    p.abort_transaction()
    # the failed batch had a sequence: the abort bumps the epoch before the next transaction
    assert broker.kinds()[-2:] == ["EndTxn", "InitProducerId"]
    pid = broker.txns["tx-1"].producer_id
    assert broker.txn_log[-1] == ("InitProducerId", "tx-1", pid, 0)
    p.begin_transaction()
    p.send("t", b"good", partition=0)
    p.commit_transaction()
    produced = broker.txn_log[-2]
    assert produced[2] == ((("t", 0), pid, 1, 0, True),)           # new epoch, sequence 0
    p.close()
    assert read_all(broker, "read_committed", expect=1)[0] == [b"good"]


def test_add_partitions_failure_fails_queued_records_and_is_abortable(broker):
    p = txn_producer(broker)
    p.init_transactions()
    p.begin_transaction()
    broker.inject["AddPartitionsToTxn"] = [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    fut = p.send("t", b"never", partition=1)
    with pytest.raises(KafkaError) as info:
        fut.get(5)
    assert info.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaError, match="TOPIC_AUTHORIZATION_FAILED"):
        p.commit_transaction()
    p.abort_transaction()
    assert "Produce" not in broker.kinds() and broker.txn_log[-1][0] != "EndTxn"  # nothing was added
    p.begin_transaction()
    p.send("t", b"ok", partition=1)
    p.commit_transaction()
    p.close()
    assert read_all(broker, "read_committed", expect=1)[0] == [b"ok"]


def test_invalid_txn_state_on_end_txn_is_fatal(broker):
    p = txn_producer(broker)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", b"x", partition=0).get(5)
    broker.inject["EndTxn"] = [ErrorCode.INVALID_TXN_STATE]
    with pytest.raises(KafkaError, match="INVALID_TXN_STATE"):
        p.commit_transaction()
    with pytest.raises(KafkaError, match="INVALID_TXN_STATE"):
        p.abort_transaction()
    p.close()


def test_txn_offset_commit_with_a_stale_generation_is_abortable(broker):
    broker.state.group("g1").generation = 3
    p = txn_producer(broker)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", b"x", partition=0)
    with pytest.raises(KafkaError, match="ILLEGAL_GENERATION"):
        p.send_offsets_to_transaction({TopicPartition("in", 0): 1}, ConsumerGroupMetadata("g1", 2, "m", None))
    with pytest.raises(KafkaError, match="ILLEGAL_GENERATION"):
        p.commit_transaction()
    p.abort_transaction()
    assert broker.committed_offsets == {}
    p.close()


def test_a_second_producer_fences_the_first(broker):
    old = txn_producer(broker)
    old.init_transactions()
    old.begin_transaction()
    old.send("t", b"zombie", partition=0).get(5)
    new = txn_producer(broker)
    new.init_transactions()           # bumps the epoch and aborts the old open transaction
    assert broker.txn_log[-1][0] == "InitProducerId"
    with pytest.raises(ProducerFencedError):
        old.commit_transaction()
    for call in (old.begin_transaction, old.commit_transaction, old.abort_transaction,
                 lambda: old.send("t", b"x"), old.init_transactions):
        with pytest.raises(ProducerFencedError):
            call()
    new.begin_transaction()
    new.send("t", b"fresh", partition=0)
    new.commit_transaction()
    old.close()
    new.close()
    assert read_all(broker, "read_committed", expect=1)[0] == [b"fresh"]


def test_invalid_producer_epoch_on_produce_is_fatal(broker):
    old = txn_producer(broker)
    old.init_transactions()
    old.begin_transaction()
    old.send("t", b"a", partition=0).get(5)
    txn_producer(broker).init_transactions()   # epoch bump
    fut = old.send("t", b"b", partition=0)
    with pytest.raises(ProducerFencedError):
        fut.get(5)
    with pytest.raises(ProducerFencedError):
        old.abort_transaction()
    old.close()


# -- read_committed ---------------------------------------------------------------------------------

def _batch(base: int, values: list[bytes], pid: int = -1, transactional: bool = False, seq: int = -1) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
                     is_transactional=transactional, base_offset=base)
    for v in values:
        b.append(1_600_000_000_000, None, v)
    return b.build()


def _marker(offset: int, pid: int, commit: bool) -> bytes:
    return build_control_batch(pid, 0, commit, 0, 1_600_000_000_000, base_offset=offset)


def _log() -> bytes:
    """pid 1 aborts (0-1, marker 5), pid 2 commits (2-3, marker 6), plain 7, pid 1 again (8, marker 9),
    pid 3 aborts a transaction that began before the fetch (marker 10)."""
    return b"".join([
        _batch(0, [b"a0", b"a1"], pid=1, transactional=True, seq=0),
        _batch(2, [b"c2", b"c3"], pid=2, transactional=True, seq=0),
        _batch(4, [b"i4"], pid=4, seq=0),                              # idempotent, not transactional
        _marker(5, 1, commit=False),
        _marker(6, 2, commit=True),
        _batch(7, [b"p7"]),
        _batch(8, [b"c8"], pid=1, transactional=True, seq=2),
        _marker(9, 1, commit=True),
        _marker(10, 3, commit=False),
    ])


def test_read_committed_drops_aborted_transactions_and_markers():
    blob = _log()
    aborted = [(3, -5), (1, 0)]
    assert [r.value for r in committed_records(blob, aborted, 0)] == [b"c2", b"c3", b"i4", b"p7", b"c8"]
    assert [r.offset for r in committed_records(blob, aborted, 3)] == [3, 4, 7, 8]
    # an abort marker ends the abort: the same producer's later transaction is visible
    assert [r.value for r in committed_records(blob, [(1, 0), (1, 8)], 0)] == [b"c2", b"c3", b"i4", b"p7"]
    # read_uncommitted (and read_committed without aborted transactions) only skip the markers
    assert [r.value for r in iter_records(blob)] == [b"a0", b"a1", b"c2", b"c3", b"i4", b"p7", b"c8"]


def test_consumer_read_committed_positions_past_trailing_markers(broker):
    key = ("t", 0)
    with broker.lock:
        for base, data in (
                (0, _batch(0, [b"a0", b"a1"], pid=1, transactional=True)),
                (2, _batch(2, [b"c2"], pid=2, transactional=True)),
                (3, _marker(3, 1, commit=False)),
                (4, _marker(4, 2, commit=True))):
            broker.logs[key].append((base, data))
        broker.next_offset[key] = 5
        broker.aborted[key] = [(1, 0, 3)]
    values, positions = read_all(broker, "read_committed", tps=(T0,))
    assert values == [b"c2"] and positions[T0] == 5
    values, positions = read_all(broker, "read_uncommitted", tps=(T0,))
    assert values == [b"a0", b"a1", b"c2"] and positions[T0] == 5


def test_read_committed_stops_at_the_open_transaction(broker):
    p = txn_producer(broker)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", b"open", partition=0).get(5)
    plain = Producer(bootstrap_servers=broker.bootstrap)
    plain.send("t", b"after", partition=0).get(5)
    plain.close()
    c = Consumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed", auto_offset_reset="earliest")
    c.assign([T0])
    assert c.poll(300) == {} and c.position(T0) == 0
    p.commit_transaction()
    got = []
    deadline = time.monotonic() + 5
    while len(got) < 2 and time.monotonic() < deadline:
        for recs in c.poll(100).values():
            got.extend(r.value for r in recs)
    assert got == [b"open", b"after"]
    c.close()
    p.close()


def test_group_metadata_for_send_offsets(broker):
    c = Consumer(bootstrap_servers=broker.bootstrap, group_id="g9", auto_offset_reset="earliest",
                 heartbeat_interval_ms=100)
    c.subscribe(["t"])
    deadline = time.monotonic() + 10
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(50)
    md = c.group_metadata()
    assert md.group_id == "g9" and md.generation_id == broker.state.groups["g9"].generation >= 1
    assert md.member_id and md.group_instance_id is None
    p = txn_producer(broker)
    p.init_transactions()
    p.begin_transaction()
    p.send_offsets_to_transaction({T0: 3}, md)
    p.commit_transaction()
    assert broker.committed_offsets == {"g9": {("t", 0): 3}}
    assert broker.txn_log[-2][3:5] == (md.generation_id, md.member_id)
    p.close()
    c.close()
    plain = Consumer(bootstrap_servers=broker.bootstrap)
    with pytest.raises(KafkaError, match="group_id"):
        plain.group_metadata()
    plain.close()


# -- tools ------------------------------------------------------------------------------------------

def test_console_consumer_isolation_level(broker, capsys):
    from odradek.client import console
    p = txn_producer(broker)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", b"aborted", partition=0).get(5)     # written, then aborted
    p.abort_transaction()
    p.begin_transaction()
    p.send("t", b"committed", partition=0)
    p.commit_transaction()
    p.close()
    base = ["--bootstrap-server", broker.bootstrap, "--topic", "t", "--partition", "0", "--from-beginning",
            "--timeout-ms", "20000"]
    assert console.consumer_main(base + ["--isolation-level", "read_committed", "--max-messages", "1"]) == 0
    assert capsys.readouterr().out == "committed\n"
    assert console.consumer_main(base + ["--max-messages", "2"]) == 0          # read_uncommitted by default
    assert capsys.readouterr().out == "aborted\ncommitted\n"
    assert console.consumer_main(base + ["--isolation-level", "serializable"]) == 1
    assert "isolation.level must be one of" in capsys.readouterr().err


def test_perf_producer_transactions_commit_every_duration(broker):
    import io
    from odradek.client import perf
    out = io.StringIO()
    # 300 records at 2,000/s take at least 149.5 ms however fast the producer is (the throttle
    # holds it back), so a 50 ms transaction commits at least once before the last one's commit
    rc = perf.producer_perf(["--bootstrap-server", broker.bootstrap, "--topic", "t", "--num-records", "300",
                             "--record-size", "10", "--throughput", "2000", "--transactional-id", "perf-tx",
                             "--transaction-duration-ms", "50", "--producer-props", "linger.ms=0"], out=out)
    assert rc == 0 and out.getvalue().splitlines()[-1].startswith("300 records sent, ")
    ends = broker.kinds()
    assert ends.count("InitProducerId") == 1 and ("InitProducerId", "perf-tx", -1, -1) in broker.txn_log
    assert ends.count("EndTxn") >= 2 and all(e == ("EndTxn", True) for e in broker.txn_log if e[0] == "EndTxn")
    values, _ = read_all(broker, "read_committed", expect=300)
    assert len(values) == 300


def test_perf_producer_idempotence_and_default_transactional_id(broker):
    import io
    from odradek.client import perf
    args = ["--bootstrap-server", broker.bootstrap, "--topic", "t", "--num-records", "20", "--record-size", "5",
            "--throughput", "-1"]
    assert perf.producer_perf(args + ["--producer-props", "enable.idempotence=true"], out=io.StringIO()) == 0
    assert broker.txn_log[0][:2] == ("InitProducerId", None)
    assert perf.producer_perf(args + ["--transaction-duration-ms", "60000"], out=io.StringIO()) == 0
    assert ("InitProducerId", perf.DEFAULT_TRANSACTIONAL_ID, -1, -1) in broker.txn_log
    assert broker.txn_log[-1] == ("EndTxn", True)          # the last, partial transaction is committed
    with pytest.raises(Exception, match="must be > 0"):
        perf.producer_perf(args + ["--transaction-duration-ms", "0"], out=io.StringIO())


def _sender_with_sent_batch(acks_seq: int):
    from types import SimpleNamespace

    from odradek.client.accumulator import RecordAccumulator
    from odradek.client.cluster import ClusterMetadata
    from odradek.client.sender import Sender
    cfg = ClientConfig("producer", enable_idempotence=True, bootstrap_servers="127.0.0.1:9")
    acc = RecordAccumulator(batch_size=16384, compression=0, linger_ms=0, buffer_memory=1 << 20,
                            max_block_ms=1000, retry_backoff_ms=10)
    sender = Sender(cfg, ClusterMetadata(cfg), acc)
    fut, _ = acc.append(T0, 0, None, b"a", [], 30)
    batch = acc.drain({0}, lambda t, p: 0, 1 << 20, time.monotonic())[0][0]
    batch.builder.producer_id, batch.builder.producer_epoch, batch.builder.base_sequence = 7, 0, 0
    batch.build()
    sender._unresolved[T0] = [batch]
    if acks_seq >= 0:
        sender._acked_sequence[T0] = acks_seq
    resp = SimpleNamespace(responses=[SimpleNamespace(name="t", partition_responses=[SimpleNamespace(
        index=0, error_code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, base_offset=-1, log_append_time_ms=-1,
        error_message=None)])])
    return sender, batch, fut, resp


def test_idempotent_out_of_order_after_a_later_ack_means_written():
    # the broker acknowledged sequences 1-3: the retried batch at sequence 0 was written before
    sender, batch, fut, resp = _sender_with_sent_batch(acks_seq=3)
    sender._handle_response(0, {("t", 0): batch}, resp, None)
    assert fut.get(0).offset == -1
    sender, batch, fut, resp = _sender_with_sent_batch(acks_seq=-1)     # nothing later: a real error
    sender._handle_response(0, {("t", 0): batch}, resp, None)
    with pytest.raises(KafkaError, match="OUT_OF_ORDER_SEQUENCE_NUMBER"):
        fut.get(0)
