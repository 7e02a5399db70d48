"""Transactions in the log: control batches, markers, LSO, aborted-txn index, read_committed reads."""
from __future__ import annotations

import os
import struct

import pytest
from crc32c import crc32c

from odradek.broker.apis import fetch, list_offsets, produce, write_txn_markers
from odradek.broker.config.kafka_config import LogConfig
from odradek.broker.log import Log
from odradek.broker.log.txn_index import AbortedTxn, TransactionIndex
from odradek.protocol import record_batch as rb
from odradek.protocol.control_records import build_control_batch, parse_control_record
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import BatchBuilder, iter_batches

from broker_fixtures import Broker, call, fetch_body, produce_body


class Clock:
    def __init__(self, ms: int = 1_600_000_000_000) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


def txn_batch(n: int = 2, pid: int = 7, epoch: int = 0, seq: int = 0, ts: int = 1_600_000_000_000) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True)
    for i in range(n):
        b.append(ts + i, b"k%d" % i, b"v%d" % i)
    return b.build()


def plain(n: int = 1, ts: int = 1_600_000_000_000) -> bytes:
    b = BatchBuilder()
    for i in range(n):
        b.append(ts + i, b"p", b"p")
    return b.build()


def make_log(tmp_path, clean=True, **overrides) -> Log:
    cfg = LogConfig({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return Log(str(tmp_path / "topic-0"), cfg, time=Clock(), had_clean_shutdown=clean)


# ------------------------------------------------------------------ codec

def test_control_batch_bytes_layout():
    data = build_control_batch(producer_id=42, producer_epoch=3, commit=True, coordinator_epoch=17,
                               timestamp_ms=1234)
    h = rb.validate(data)                                   # a valid batch: sizes and CRC32C
    assert h.attributes == rb.TRANSACTIONAL_MASK | rb.CONTROL_MASK
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (42, 3, -1, 1)
    assert (h.base_timestamp, h.max_timestamp, h.last_offset_delta) == (1234, 1234, 0)
    assert h.crc == crc32c(data[rb.CRC_START:])
    # one record: len, attrs 0, ts delta 0, offset delta 0, key len 4, key, value len 6, value, 0 headers
    record = data[rb.HEADER_SIZE:]
    assert record == bytes([2 * 16, 0, 0, 0, 2 * 4]) + struct.pack(">hh", 0, 1) + bytes([2 * 6]) \
        + struct.pack(">hi", 0, 17) + b"\x00"
    assert parse_control_record(data) == (True, 17)
    assert parse_control_record(build_control_batch(1, 0, False, 5, 0)) == (False, 5)
    with pytest.raises(KafkaError):
        parse_control_record(plain())


# ------------------------------------------------------------------ log

def test_client_control_batch_is_rejected(tmp_path):
    log = make_log(tmp_path)
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(build_control_batch(7, 0, True, 0, 1_600_000_000_000), 0)
    assert e.value.code == ErrorCode.INVALID_RECORD
    assert log.log_end_offset == 0


def test_coordinator_batch_without_sequence_is_accepted(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(txn_batch(1, pid=9, seq=-1), 0, origin="coordinator")
    log.append_as_leader(txn_batch(1, pid=9, seq=-1), 0, origin="coordinator")
    assert log.log_end_offset == 2
    with pytest.raises(KafkaError) as e:                       # a client must send sequences
        log.append_as_leader(txn_batch(1, pid=9, seq=-1), 0)
    assert e.value.code == ErrorCode.INVALID_RECORD
    log.append_marker_as_leader(9, 1, True, 0, 0)
    with pytest.raises(KafkaError) as e:                       # the epoch is still checked
        log.append_as_leader(txn_batch(1, pid=9, epoch=0, seq=-1), 0, origin="coordinator")
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.log_end_offset == 3


def test_lso_follows_transactions_and_the_high_watermark(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(plain(2), 0)                          # 0-1
    log.update_high_watermark(2)
    assert log.last_stable_offset == 2
    log.append_as_leader(txn_batch(2, pid=7), 0)               # 2-3, txn of 7 opens at 2
    log.append_as_leader(txn_batch(1, pid=8), 0)               # 4, txn of 8 opens at 4
    log.update_high_watermark(5)
    assert log.last_stable_offset == 2
    info = log.append_marker_as_leader(7, 0, True, 0, 0)       # 5
    assert info.first_offset == 5
    assert log.last_stable_offset == 2                         # marker not yet below the HW
    log.update_high_watermark(6)
    assert log.last_stable_offset == 4                         # 8's txn is still open
    log.append_marker_as_leader(8, 0, False, 0, 0)             # 6
    log.update_high_watermark(7)
    assert log.last_stable_offset == 7
    assert log.producer_state.producers[8].current_txn_first_offset == -1
    # the abort went to the txn index with the LSO after it
    assert log.active_segment.txn_index.entries == [AbortedTxn(8, 4, 6, 7)]
    assert log.collect_aborted_transactions(0, 7) == [AbortedTxn(8, 4, 6, 7)]
    assert log.collect_aborted_transactions(5, 7) == [AbortedTxn(8, 4, 6, 7)]
    assert log.collect_aborted_transactions(0, 4) == []


def test_marker_epoch_and_coordinator_fencing(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(txn_batch(1, pid=7, epoch=2), 0)
    log.append_marker_as_leader(7, 2, True, 5, 0)
    with pytest.raises(KafkaError) as e:
        log.append_marker_as_leader(7, 1, True, 5, 0)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(KafkaError) as e:
        log.append_marker_as_leader(7, 2, False, 4, 0)
    assert e.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    leo = log.log_end_offset
    log.append_marker_as_leader(7, 3, False, 6, 0)             # a bumped epoch and coordinator: fine
    assert log.log_end_offset == leo + 1
    with pytest.raises(KafkaError) as e:                       # the old epoch is fenced for data too
        log.append_as_leader(txn_batch(1, pid=7, epoch=2, seq=1), 0)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_txn_index_file_load_truncate_and_recovery(tmp_path):
    log = make_log(tmp_path, segment_bytes=400)
    aborted = []
    for pid in range(1, 7):
        first = log.append_as_leader(txn_batch(2, pid=pid), 0).first_offset
        marker = log.append_marker_as_leader(pid, 0, pid % 2 == 0, 0, 0).first_offset
        if pid % 2:
            aborted.append((pid, first, marker))
    assert len(log.segments) > 2
    on_disk = []
    for seg in log.segments:
        path = seg.txn_index.path
        if os.path.exists(path):
            data = open(path, "rb").read()
            assert len(data) % 34 == 0
            on_disk += [struct.unpack_from(">hqqqq", data, i) for i in range(0, len(data), 34)]
    assert [(v, pid, f, last) for v, pid, f, last, _ in on_disk] == [(0, *a) for a in aborted]
    everything = log.collect_aborted_transactions(0, log.log_end_offset)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in everything] == aborted

    log.close()
    reopened = make_log(tmp_path, segment_bytes=400)
    assert reopened.collect_aborted_transactions(0, reopened.log_end_offset) == everything

    # unclean restart: the indexes of recovered segments are rebuilt from the log
    for seg in reopened.segments:
        seg.close_handlers()
        if os.path.exists(seg.txn_index.path):
            os.remove(seg.txn_index.path)
    recovered = Log(reopened.dir, reopened.config, recovery_point=0, time=Clock(), had_clean_shutdown=False)
    assert recovered.collect_aborted_transactions(0, recovered.log_end_offset) == everything

    cut = aborted[1][2]                                        # truncate at the 2nd abort marker
    recovered.truncate_to(cut)
    assert [t.producer_id for t in recovered.collect_aborted_transactions(0, cut)] == [aborted[0][0]]
    assert recovered.producer_state.producers[aborted[1][0]].current_txn_first_offset == aborted[1][1]
    assert recovered.last_stable_offset == aborted[1][1]       # that txn is open again


def test_txn_index_ignores_torn_entry(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    idx = TransactionIndex(path)
    idx.append(AbortedTxn(1, 0, 3, 4))
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x01")
    idx2 = TransactionIndex(path)
    idx2.load()
    assert idx2.entries == [AbortedTxn(1, 0, 3, 4)] and os.path.getsize(path) == 34


def test_follower_replay_gives_identical_producer_state(tmp_path):
    leader = Log(str(tmp_path / "a" / "t-0"), LogConfig(), time=Clock(), had_clean_shutdown=True)
    follower = Log(str(tmp_path / "b" / "t-0"), LogConfig(), time=Clock(), had_clean_shutdown=True)
    leader.append_as_leader(txn_batch(2, pid=1), 0)
    leader.append_as_leader(txn_batch(2, pid=2, seq=0), 0)
    leader.append_marker_as_leader(1, 0, False, 3, 0)
    leader.append_as_leader(txn_batch(1, pid=2, seq=2), 0)
    follower.append_as_follower(leader.read(0, 1 << 20))
    assert follower.producer_state.producers == leader.producer_state.producers
    assert follower.producer_state.ongoing == leader.producer_state.ongoing
    assert follower.active_segment.txn_index.entries == leader.active_segment.txn_index.entries
    # after failover the follower dedups the retried batch
    again = follower.append_as_leader(txn_batch(1, pid=2, seq=2), 1)
    assert again.first_offset == 5 and follower.log_end_offset == 6


# ------------------------------------------------------------------ handlers

@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


def _markers_body(pid, epoch, commit, topic, partitions, coordinator_epoch=0):
    return {"markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
                         "topics": [{"name": topic, "partition_indexes": partitions}],
                         "coordinator_epoch": coordinator_epoch}]}


def txn_produce(topic, records, transactional_id="tx"):
    return dict(produce_body(topic, records), transactional_id=transactional_id)


def _committed_fetch(topic, offset=0):
    body = fetch_body(topic, offset)
    body["isolation_level"] = 1
    return body


def test_read_committed_fetch_and_list_offsets(broker):
    broker.lead("t")
    call(broker, produce, 8, produce_body("t", plain(1)))                     # 0
    call(broker, produce, 8, txn_produce("t", txn_batch(2, pid=7)))           # 1-2
    p = call(broker, fetch, 11, _committed_fetch("t")).responses[0].partition_responses[0]
    assert (p.high_watermark, p.last_stable_offset) == (3, 1)
    assert [h.base_offset for h, _ in iter_batches(p.record_set)] == [0]
    u = call(broker, fetch, 11, fetch_body("t")).responses[0].partition_responses[0]
    assert u.last_stable_offset == 1 and u.aborted_transactions is None
    assert [h.base_offset for h, _ in iter_batches(u.record_set)] == [0, 1]

    lo = {"replica_id": -1, "isolation_level": 1, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
    assert call(broker, list_offsets, 5, lo).topics[0].partitions[0].offset == 1
    lo["isolation_level"] = 0
    assert call(broker, list_offsets, 5, lo).topics[0].partitions[0].offset == 3

    r = call(broker, write_txn_markers, 1, _markers_body(7, 0, False, "t", [0]))
    assert r.markers[0].topics[0].partitions[0].error_code == 0
    p = call(broker, fetch, 11, _committed_fetch("t")).responses[0].partition_responses[0]
    assert (p.high_watermark, p.last_stable_offset) == (4, 4)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(7, 1)]
    assert [h.base_offset for h, _ in iter_batches(p.record_set)] == [0, 1, 3]
    p = call(broker, fetch, 11, _committed_fetch("t", 3)).responses[0].partition_responses[0]
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(7, 1)]


def test_write_txn_markers_errors(broker):
    broker.lead("t")
    call(broker, produce, 8, txn_produce("t", txn_batch(1, pid=7, epoch=4)))
    r = call(broker, write_txn_markers, 0, _markers_body(7, 3, True, "t", [0]))
    assert r.markers[0].topics[0].partitions[0].error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    r = call(broker, write_txn_markers, 1, _markers_body(7, 4, True, "nope", [0, 1]))
    assert [x.error_code for x in r.markers[0].topics[0].partitions] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2
    r = call(broker, write_txn_markers, 1, _markers_body(7, 4, True, "t", [0], coordinator_epoch=2))
    assert r.markers[0].topics[0].partitions[0].error_code == 0
    r = call(broker, write_txn_markers, 1, _markers_body(7, 4, True, "t", [0], coordinator_epoch=1))
    assert r.markers[0].topics[0].partitions[0].error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED


def test_produce_of_a_control_batch_is_invalid_record(broker):
    broker.lead("t")
    r = call(broker, produce, 8, txn_produce("t", build_control_batch(7, 0, True, 0, 1_600_000_000_000)))
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD


def test_transactional_produce_needs_a_transactional_id(broker):
    broker.lead("t")
    r = call(broker, produce, 8, produce_body("t", txn_batch(1, pid=7)))
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert broker.rm.get_partition(("t", 0)).log_end_offset == 0


# ------------------------------------------------------------------ cleaner

def test_cleaner_drops_aborted_records_keeps_markers_and_stops_at_the_lso(tmp_path):
    from odradek.broker.config.kafka_config import KafkaConfig
    from odradek.broker.log.cleaner import LogCleaner

    class Manager:
        config = KafkaConfig({"zookeeper.connect": "zk:2181", "broker.id": "1"})

        def __init__(self, log):
            self.log = log

        def all_logs(self):
            return [self.log]

        def log_dir_of(self, tp):
            return os.path.dirname(self.log.dir)

    ts = 1_600_000_000_000
    log = Log(str(tmp_path / "c-0"), LogConfig({"cleanup.policy": "compact", "segment.bytes": "100000"}),
              time=Clock(), had_clean_shutdown=True)

    def txn(pid, keys, seq=0):
        b = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)
        for k in keys:
            b.append(ts, k, b"%d" % pid)
        return log.append_as_leader(b.build(), 0)

    txn(1, [b"a", b"b"])                                       # 0-1 aborted
    txn(2, [b"a", b"c"])                                       # 2-3 committed
    log.append_marker_as_leader(1, 0, False, 0, 0)             # 4
    log.append_marker_as_leader(2, 0, True, 0, 0)              # 5
    log.roll()
    open_txn = txn(3, [b"e"]).first_offset                     # 6, still open
    log.roll()
    txn(2, [b"a"], seq=2)                                      # 7, pid 2's 2nd txn (open too)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == open_txn

    stats = LogCleaner(Manager(log), Clock()).clean_log(log)
    assert stats.end_offset == 6                               # never past the LSO
    data = log.read(0, 1 << 20, max_offset=6)
    batches = list(iter_batches(data))
    assert [(h.base_offset, h.is_control) for h, _ in batches if h.is_control] == [(4, True), (5, True)]
    values = {(r.key, r.value) for h, recs in batches for r in recs if not h.is_control}
    assert values == {(b"a", b"2"), (b"c", b"2")}              # pid 1's aborted a/b are gone
    empty = [h for h, recs in batches if h.producer_id == 1 and not h.is_control]
    assert len(empty) == 1 and empty[0].records_count == 0     # pid 1's last batch kept, emptied
    assert (empty[0].base_offset, empty[0].last_offset, empty[0].base_sequence) == (0, 1, 0)
    assert log.segments[0].txn_index.entries == [AbortedTxn(1, 0, 4, 2)]   # LSO then: pid 2 still open at 2
    # producer state rebuilt from the cleaned log still knows pid 1's last sequence
    log.close()
    again = Log(log.dir, log.config, time=Clock(), had_clean_shutdown=False)
    assert again.producer_state.producers[1].batches[-1].last_seq == 1


def test_markers_on_consumer_offsets_tell_the_group_coordinator(broker):
    calls = []

    class GroupService:
        def on_txn_marker_written(self, partition_index, producer_id, committed):
            calls.append((partition_index, producer_id, committed))

    broker.ctx.group_service = GroupService()  # type: ignore[assignment]
    broker.lead("__consumer_offsets", partitions=2)
    got = []
    broker.rm.append_records(1000, -1, {("__consumer_offsets", 1): txn_batch(1, pid=11, seq=-1)},
                             origin="coordinator").add_callback(got.append)
    assert got[0][("__consumer_offsets", 1)]["error_code"] == 0
    r = call(broker, write_txn_markers, 1, _markers_body(11, 0, True, "__consumer_offsets", [1]))
    assert r.markers[0].topics[0].partitions[0].error_code == 0
    assert calls == [(1, 11, True)]
    assert broker.rm.get_partition(("__consumer_offsets", 1)).last_stable_offset == 2


def test_parked_read_committed_fetch_completes_when_the_transaction_commits(broker):
    from broker_fixtures import call_deferred
    broker.lead("t")
    call(broker, produce, 8, txn_produce("t", txn_batch(2, pid=7)))
    body = _committed_fetch("t")
    body["max_wait_ms"] = 5000
    got = []
    call_deferred(broker, fetch, 11, body).addCallback(got.append)
    assert not got                                             # nothing stable yet: parked
    call(broker, write_txn_markers, 1, _markers_body(7, 0, True, "t", [0]))
    assert got, "the commit marker must wake the parked fetch"
    p = got[0].responses[0].partition_responses[0]
    assert p.last_stable_offset == 3 and p.aborted_transactions == []
    assert [r.value for h, recs in iter_batches(p.record_set) if not h.is_control for r in recs] == [b"v0", b"v1"]
