"""Every class of bad batch the leader, a follower and log recovery must refuse (broker/log/validator.py).

Each bad batch starts as a valid one from BatchBuilder and is corrupted by hand; where the
test is about something other than the CRC, the CRC is recomputed so only the named fault
remains. A refusal must carry Kafka's error code and leave the log as it was (files, LEO,
HW, producer state), and the next valid batch must append at the same offset.
"""
from __future__ import annotations

import itertools
import os
import struct

import pytest
from hypothesis import given, settings, strategies as st

from odradek.broker.apis import produce as produce_handler
from odradek.broker.config.kafka_config import LogConfig
from odradek.broker.log import Log
from odradek.broker.log.validator import RecordValidationError
from odradek.protocol import compression
from odradek.protocol import record_batch as rb
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import BatchBuilder, encode_varint, iter_records
from odradek.protocol.records import _read_varint as read_varint

from broker_fixtures import Broker, call, produce_body

NOW = 1_600_000_000_000


def make_log(tmp_path, **overrides) -> Log:
    cfg = LogConfig({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return Log(str(tmp_path / "topic-0"), cfg, time=lambda: NOW / 1000, had_clean_shutdown=True)


def valid(n: int = 3, codec: int = compression.NONE, keys: bool = True, value: bytes = b"value",
          ts: list[int] | None = None, **builder) -> bytes:
    b = BatchBuilder(compression=codec, **builder)
    for i in range(n):
        b.append(ts[i] if ts else NOW + i, b"k%d" % i if keys else None, value)
    return b.build()


def section(raw: bytes) -> bytes:
    """The (uncompressed) records section of a batch built uncompressed."""
    return raw[rb.HEADER_SIZE:]


def rebuild(raw: bytes, records: bytes | None = None, **fields) -> bytes:
    """``raw`` with header ``fields`` replaced and/or a new records section; length and CRC made valid."""
    h = rb.parse_header(raw)
    body = section(raw) if records is None else records
    h = h._replace(batch_length=rb.HEADER_SIZE - rb.LOG_OVERHEAD + len(body), crc=0, **fields)
    out = bytearray(rb.pack_header(h) + body)
    struct.pack_into(">I", out, 17, rb.compute_crc(out, 0, len(out)))
    return bytes(out)


def set_delta(records: bytes, record_start: int, delta: int) -> bytes:
    """Overwrite the one-byte offset delta of the small record at ``record_start`` (one-byte length
    and timestamp delta: length, attributes, timestampDelta, offsetDelta)."""
    m = bytearray(records)
    assert m[record_start] < 0x80 and m[record_start + 2] < 0x80
    m[record_start + 3] = delta << 1
    return bytes(m)


def record_starts(records: bytes) -> list[int]:
    starts, pos = [], 0
    while pos < len(records):
        starts.append(pos)
        pos += 1 + (records[pos] >> 1)   # one-byte lengths in these tests
    return starts


def state(log: Log):
    files = {n: open(os.path.join(log.dir, n), "rb").read() for n in sorted(os.listdir(log.dir))}
    producers = {pid: (e.epoch, list(e.batches)) for pid, e in log.producer_state.producers.items()}
    return files, log.log_end_offset, log.high_watermark, producers


def assert_refused(log: Log, bad: bytes, code: ErrorCode, follower: bool = False) -> KafkaError:
    before = state(log)
    leo = log.log_end_offset
    with pytest.raises(KafkaError) as refused:
        if follower:
            log.append_as_follower(bad)
        else:
            log.append_as_leader(bad, 0)
    assert refused.value.code == code, refused.value
    assert state(log) == before
    if follower:
        assert log.append_as_follower(valid(2, base_offset=leo)).first_offset == leo
    else:
        assert log.append_as_leader(valid(2), 0).first_offset == leo
    return refused.value


@pytest.fixture
def log(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(valid(3, producer_id=7, producer_epoch=0, base_sequence=0), 0)
    log.update_high_watermark(3)
    yield log
    log.close()


# ------------------------------------------------------------------ counts and structure

UNCOMPRESSED = {
    "count 2^31-1 holding one record": lambda: rebuild(valid(1), last_offset_delta=2**31 - 2, records_count=2**31 - 1),
    "count above the records present": lambda: rebuild(valid(2), last_offset_delta=2, records_count=3),
    "count below the records present": lambda: rebuild(valid(3), last_offset_delta=1, records_count=2),
    "count and lastOffsetDelta disagree": lambda: rebuild(valid(3), last_offset_delta=3),
    "zero records": lambda: rebuild(valid(1), records=b"", last_offset_delta=-1, records_count=0),
    "records truncated under a valid CRC": lambda: rebuild(valid(3), records=section(valid(3))[:-4]),
    "bytes after the last record": lambda: rebuild(valid(3), records=section(valid(3)) + b"\x00\x00"),
    "record length varint over 5 bytes": lambda: rebuild(valid(1), records=b"\xff" * 6 + section(valid(1))[1:]),
    "record length below the minimum": lambda: rebuild(valid(1), records=b"\x02" + section(valid(1))[1:]),
    "offset deltas 1, 1, 2": lambda: rebuild(valid(3), records=set_delta(section(valid(3)), 0, 1)),
    "offset deltas 0, 2, 1": lambda: rebuild(valid(3), records=set_delta(set_delta(
        section(valid(3)), record_starts(section(valid(3)))[1], 2), record_starts(section(valid(3)))[2], 1)),
    "one delta wrong in a long uniform run": lambda: rebuild(valid(60, ts=[NOW] * 60), records=set_delta(
        section(valid(60, ts=[NOW] * 60)), record_starts(section(valid(60, ts=[NOW] * 60)))[40], 41)),
    "baseOffset not 0 from a client": lambda: rebuild(valid(2), base_offset=5),
}


@pytest.mark.parametrize("name", list(UNCOMPRESSED))
def test_structure_refused_by_the_leader(log, name):
    assert_refused(log, UNCOMPRESSED[name](), ErrorCode.INVALID_RECORD)


def test_a_valid_long_uniform_batch_is_taken(log):
    raw = valid(5000, value=b"x" * 100)
    info = log.append_as_leader(raw, 0)
    assert (info.first_offset, info.last_offset) == (3, 5002)
    assert [r.offset for r in iter_records(log.read(3, 1 << 22))][-1] == 5002


def test_crc_mismatch_is_corrupt_message(log):
    bad = bytearray(valid(3))
    bad[-1] ^= 0xFF
    assert_refused(log, bytes(bad), ErrorCode.CORRUPT_MESSAGE)


# ------------------------------------------------------------------ compression

@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_is_unsupported_compression_type(log, codec):
    raw = valid(2)
    h = rb.parse_header(raw)
    assert_refused(log, rebuild(raw, attributes=h.attributes | codec), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD])
def test_payload_that_does_not_decompress_is_corrupt_message(log, codec):
    raw = valid(2)
    bad = rebuild(raw, attributes=codec, records=b"this is not " + compression.CODEC_NAMES[codec].encode())
    assert_refused(log, bad, ErrorCode.CORRUPT_MESSAGE)


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD])
def test_compressed_records_are_walked(log, codec):
    good = valid(3, codec=codec)
    assert log.append_as_leader(good, 0).first_offset == 3
    plain = section(valid(3))
    truncated = rebuild(good, records=compression.compress(codec, plain[:-4]))
    assert_refused(log, truncated, ErrorCode.INVALID_RECORD)
    reordered = rebuild(good, records=compression.compress(codec, set_delta(plain, 0, 1)))
    assert_refused(log, reordered, ErrorCode.INVALID_RECORD)
    trailing = rebuild(good, records=compression.compress(codec, plain + b"\x00"))
    assert_refused(log, trailing, ErrorCode.INVALID_RECORD)


def test_decompression_is_bounded_by_64_times_max_message_bytes(tmp_path):
    log = make_log(tmp_path, max_message_bytes=100_000)
    for codec in (compression.GZIP, compression.LZ4, compression.ZSTD):  # snappy never compresses 64:1
        bomb = valid(1, codec=codec, value=bytes(6_500_000))
        assert len(bomb) < 100_000
        assert_refused(log, bomb, ErrorCode.MESSAGE_TOO_LARGE)
        # what a producer may legitimately send: a batch well compressed, far past max.message.bytes
        # once decompressed (Kafka streams it and has no bound)
        leo = log.log_end_offset
        log.append_as_leader(valid(1, codec=codec, value=bytes(6_000_000)), 0)
        assert log.log_end_offset == leo + 1
    log.close()


# ------------------------------------------------------------------ sizes

def test_batch_over_max_message_bytes(tmp_path):
    log = make_log(tmp_path, max_message_bytes=1000)
    assert_refused(log, valid(20, value=b"x" * 100), ErrorCode.MESSAGE_TOO_LARGE)
    log.close()


def test_batch_over_segment_bytes_is_record_list_too_large(tmp_path):
    log = make_log(tmp_path, max_message_bytes=100_000, segment_bytes=1000)
    assert_refused(log, valid(20, value=b"x" * 100), ErrorCode.RECORD_LIST_TOO_LARGE)
    log.close()


# ------------------------------------------------------------------ producer fields and control

PRODUCER_FIELDS = {
    "producer id with epoch -1": dict(producer_id=9, producer_epoch=-1, base_sequence=0),
    "producer id without a sequence": dict(producer_id=9, producer_epoch=0, base_sequence=-1),
}


@pytest.mark.parametrize("name", list(PRODUCER_FIELDS))
def test_producer_fields_consistent_with_attributes(log, name):
    assert_refused(log, rebuild(valid(2), **PRODUCER_FIELDS[name]), ErrorCode.INVALID_RECORD)


def test_epoch_and_sequence_without_a_producer_id_are_ignored_as_kafka_does(log):
    leo = log.log_end_offset
    info = log.append_as_leader(rebuild(valid(2), producer_epoch=3, base_sequence=5), 0)
    assert (info.first_offset, log.log_end_offset) == (leo, leo + 2)


def test_transactional_without_producer_id(log):
    raw = valid(2)
    assert_refused(log, rebuild(raw, attributes=rb.TRANSACTIONAL_MASK), ErrorCode.INVALID_RECORD)


def test_control_batch_from_a_client(log):
    raw = valid(1, producer_id=7, producer_epoch=0, base_sequence=3)
    assert_refused(log, rebuild(raw, attributes=rb.CONTROL_MASK | rb.TRANSACTIONAL_MASK), ErrorCode.INVALID_RECORD)


# ------------------------------------------------------------------ per-record errors

def test_compacted_topic_lists_the_records_without_key(tmp_path):
    log = make_log(tmp_path, cleanup_policy="compact")
    b = BatchBuilder()
    for i, key in enumerate([b"a", None, b"c", None]):
        b.append(NOW + i, key, b"v")
    err = assert_refused(log, b.build(), ErrorCode.INVALID_RECORD)
    assert isinstance(err, RecordValidationError)
    assert err.message == "One or more records have been rejected"
    assert [i for i, _ in err.record_errors] == [1, 3]
    assert "Compacted topic cannot accept message without key in topic partition topic-0." in err.record_errors[0][1]
    log.close()


def test_each_record_timestamp_is_checked(tmp_path):
    log = make_log(tmp_path, message_timestamp_difference_max_ms=60_000)
    # base and max timestamps are in range; only the middle record is not
    err = assert_refused(log, valid(3, ts=[NOW, NOW - 3_600_000, NOW + 1]), ErrorCode.INVALID_TIMESTAMP)
    assert isinstance(err, RecordValidationError)
    assert err.message == "One or more records have been rejected due to invalid timestamp"
    assert [i for i, _ in err.record_errors] == [1]
    log.close()


def test_log_append_time_set_by_a_client(log):
    raw = valid(2)
    bad = rebuild(raw, attributes=rb.TIMESTAMP_TYPE_MASK)
    err = assert_refused(log, bad, ErrorCode.INVALID_TIMESTAMP)
    assert [i for i, _ in err.record_errors] == [0, 1]


def test_produce_v8_answers_record_errors(tmp_path):
    broker = Broker(tmp_path, log_cleanup_policy="compact")
    try:
        broker.lead("t")
        b = BatchBuilder()
        b.append(NOW, b"a", b"v")
        b.append(NOW, None, b"v")
        resp = call(broker, produce_handler, 8, produce_body("t", b.build()))
        r = resp.responses[0].partition_responses[0]
        assert r.error_code == ErrorCode.INVALID_RECORD
        assert r.error_message == "One or more records have been rejected"
        assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == [
            (1, "Compacted topic cannot accept message without key in topic partition t-0.")]
        resp = call(broker, produce_handler, 8, produce_body("t", rebuild(valid(1), records_count=2**31 - 1,
                                                                            last_offset_delta=2**31 - 2)))
        r = resp.responses[0].partition_responses[0]
        assert (r.error_code, r.record_errors, r.error_message) == (ErrorCode.INVALID_RECORD, [], None)
        assert broker.rm.partitions[("t", 0)].log.log_end_offset == 0
    finally:
        broker.close()


# ------------------------------------------------------------------ follower and recovery

FOLLOWER_BAD = {
    "count 2^31-1 holding one record": (lambda o: rebuild(valid(1, base_offset=o), last_offset_delta=2**31 - 2,
                                                          records_count=2**31 - 1), ErrorCode.INVALID_RECORD),
    "records truncated under a valid CRC": (lambda o: rebuild(valid(3, base_offset=o),
                                                              records=section(valid(3))[:-4]), ErrorCode.INVALID_RECORD),
    "unknown codec": (lambda o: rebuild(valid(2, base_offset=o), attributes=6), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    "gzip that is not gzip": (lambda o: rebuild(valid(2, base_offset=o), attributes=compression.GZIP),
                              ErrorCode.CORRUPT_MESSAGE),
}


@pytest.mark.parametrize("name", list(FOLLOWER_BAD))
def test_follower_never_appends_an_invalid_batch(log, name):
    make, code = FOLLOWER_BAD[name]
    assert_refused(log, make(log.log_end_offset), code, follower=True)


def test_follower_takes_compacted_batches_with_gaps(log):
    b = BatchBuilder(base_offset=log.log_end_offset)
    b.append(NOW, b"a", b"v")
    b.append(NOW, b"b", b"v")
    gapped = rebuild(b.build(), records=set_delta(section(b.build()), record_starts(section(b.build()))[1], 2),
                     last_offset_delta=2)
    assert log.append_as_follower(gapped).first_offset == 3
    assert log.log_end_offset == 6
    empty = rebuild(valid(1, base_offset=6), records=b"", records_count=0, last_offset_delta=4)
    assert log.append_as_follower(empty).first_offset == 6 and log.log_end_offset == 11


def test_recovery_truncates_at_a_batch_that_fails_validation(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(valid(3), 0)
    good_end = log.active_segment.size
    lying = rebuild(valid(1, base_offset=3), last_offset_delta=2**31 - 2, records_count=2**31 - 1)
    with open(log.active_segment.log_path, "ab") as f:   # written behind the log's back, as a torn disk might
        f.write(lying)
    log.close()
    log = Log(log.dir, log.config, recovery_point=0, time=lambda: NOW / 1000, had_clean_shutdown=False)
    assert log.log_end_offset == 3 and log.active_segment.size == good_end
    assert log.append_as_leader(valid(2), 0).first_offset == 3
    log.close()


# ------------------------------------------------------------------ the fast path agrees with a full decode

_records = st.lists(st.tuples(st.sampled_from([0, 1, 2, 100, 20_000]), st.integers(0, 3), st.integers(0, 300)),
                    min_size=1, max_size=400)


@settings(max_examples=60, deadline=None)
@given(_records, st.integers(0, 10**6))
def test_uncompressed_walk_accepts_every_valid_batch_and_spots_a_wrong_delta(tmp_path_factory, spec, pick):
    """Runs of equal records mixed with odd ones: a valid batch is always taken; moving any one
    record's offset delta is always refused."""
    b = BatchBuilder()
    ts = NOW
    for size, repeat, ts_step in spec:
        for _ in range(repeat + 1):
            ts += ts_step
            b.append(ts, None, b"x" * size)
    raw = b.build()
    log = make_log(tmp_path_factory.mktemp("w"), max_message_bytes=10**8, segment_bytes=10**8)
    count = rb.parse_header(raw).records_count
    assert log.append_as_leader(raw, 0).last_offset == count - 1
    # the record `pick` points at gets offset delta i+1: the batch no longer holds deltas 0..n-1
    records = bytearray(section(raw))
    pos, target = 0, pick % count
    for i in range(count):
        length, body = read_varint(records, pos)
        if i == target:
            ts_end = read_varint(records, body + 1)[1]
            delta_end = read_varint(records, ts_end)[1]
            new_delta = encode_varint(i + 1)
            if len(new_delta) == delta_end - ts_end:   # same width, so only the delta changes
                records[ts_end:delta_end] = new_delta
                assert_refused(log, rebuild(raw, records=bytes(records)), ErrorCode.INVALID_RECORD)
            break
        pos = body + length
    log.close()


# ------------------------------------------------------------------ the replica fetcher stops the partition

def test_replica_fetcher_stops_a_partition_whose_fetched_batch_fails_validation(tmp_path, caplog):
    from odradek.broker.apis import produce as produce_api_handler
    from test_replication_fetcher import advance, state
    from test_replication_fetcher import pair as pair_fixture

    gen = pair_fixture.__wrapped__(tmp_path)
    leader, follower, mgr, clients = next(gen)
    try:
        leader.lead("t", replicas=[1, 2], isr=[1, 2])
        follower.rm.become_leader_or_follower(1, [state(1, 0, [1, 2])])
        client = clients[1]
        real_send = client.send

        def lying_send(api, version, body):   # the leader's next batch comes back with a lying count
            def corrupt(resp):
                for t in resp.responses:
                    for r in t.partition_responses:
                        if r.record_set:
                            h = rb.parse_header(r.record_set)
                            r.record_set = rebuild(bytes(r.record_set), last_offset_delta=2**31 - 2,
                                                   records_count=2**31 - 1) if h.base_offset >= 2 else r.record_set
                return resp
            return real_send(api, version, body).addCallback(corrupt)
        client.send = lying_send
        call(leader, produce_api_handler, 8, produce_body("t", valid(2)))
        advance([leader, follower], 0.5)
        assert follower.rm.get_partition(("t", 0)).log_end_offset == 2
        call(leader, produce_api_handler, 8, produce_body("t", valid(1)))
        with caplog.at_level("ERROR"):
            advance([leader, follower], 0.5)
        assert follower.rm.get_partition(("t", 0)).log_end_offset == 2       # never appended
        assert mgr.fetching() == {}                                          # that partition stopped
        assert any("stopped fetching t-0" in r.getMessage() and "offset 2" in r.getMessage()
                   for r in caplog.records)
    finally:
        next(gen, None)


# ------------------------------------------------------------------ the two record scanners agree

_record = st.tuples(st.integers(-300, 300), st.one_of(st.none(), st.binary(max_size=20)),
                    st.one_of(st.none(), st.binary(max_size=40)),
                    st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))), max_size=2))


@settings(max_examples=400, deadline=None)
@given(st.lists(_record, min_size=1, max_size=8), st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)),
                                                            max_size=3),
       st.integers(-3, 3), st.booleans(), st.booleans())
def test_c_and_python_scanners_agree(records, flips, resize, strict, collect):
    """The compiled scanner (what the broker uses; CI installs a C compiler) and the Python one
    (what an install without a compiler uses) accept the same sections, with the same answers and
    messages, for valid sections and for sections with flipped bytes, cut or padded."""
    from odradek.broker.log import validator
    from odradek.protocol import _records
    b = BatchBuilder()
    for ts, key, value, headers in records:
        b.append(NOW + ts, key, value, headers)
    raw = b.build()
    h = rb.parse_header(raw)
    data = bytearray(section(raw))
    for at, mask in flips:
        data[at % len(data)] ^= mask
    data = data[:len(data) + resize] if resize < 0 else data + bytes(resize)
    outcomes = []
    for scan in (_records.scan, validator._scan_py):
        try:
            outcomes.append(scan(data, 0, len(data), h.records_count, h.last_offset_delta, strict, h.base_timestamp,
                                 collect))
        except ValueError as e:
            outcomes.append(f"refused: {e}")
    assert outcomes[0] == outcomes[1]
    if not flips and resize == 0:
        assert not isinstance(outcomes[0], str)


_HEADER_CHANGES = ([("base_offset", v) for v in (1, -1)] + [("magic", v) for v in (0, 1, 3)]
                   + [("attributes", v) for v in (0x01, 0x04, 0x05, 0x08, 0x10, 0x18, 0x20, 0x30, 0x40)]
                   + [("last_offset_delta", v) for v in (-2, -1, 0, 9)]
                   + [("records_count", v) for v in (-2, -1, 0, 9)] + [("producer_id", v) for v in (0, 7)]
                   + [("producer_epoch", v) for v in (-1, 0, 3)] + [("base_sequence", v) for v in (-1, 0, 5)])


def _leader_verdicts(raw: bytes | bytearray, max_message_bytes: int, from_client: bool = True
                     ) -> tuple[object, object]:
    """validate_leader's answer with the whole-batch check in C and without it (step by step): a
    producer's batch on a plain topic, or (``from_client`` False) a coordinator's on a compacted
    one, as ``__consumer_offsets`` and ``__transaction_state`` are."""
    from odradek.broker.log import validator
    config = {"max.message.bytes": str(max_message_bytes)}
    if not from_client:
        config["cleanup.policy"] = "compact"
    checks = validator.LeaderChecks.of(LogConfig(config))
    assert checks.plain == from_client and validator._check_client_batch is not None

    def verdict():
        try:
            return validator.validate_leader(bytearray(raw), checks, NOW, from_client, "t-0")
        except KafkaError as e:
            return (type(e).__name__, e.code, e.message)

    whole = verdict()
    kept, validator._check_client_batch = validator._check_client_batch, None
    try:
        return whole, verdict()
    finally:
        validator._check_client_batch = kept


def test_the_whole_batch_check_in_c_gives_the_step_by_step_verdict_for_every_header_change():
    """``_records.c:check_client_batch`` (taken for a producer's common batch) against the checks it
    stands for: every header field changed alone and in pairs (CRC made valid again), and a batch
    past max.message.bytes."""
    from odradek.protocol import _records
    base = valid(3)
    assert _records.check_client_batch(base, 1 << 20) == tuple(rb.parse_header(base))   # the common batch is taken
    for i, first in enumerate(_HEADER_CHANGES):
        for second in [None] + _HEADER_CHANGES[i + 1:]:
            changes = dict([first] + ([second] if second else []))
            raw = rebuild(base, **changes)
            for max_message_bytes, from_client in itertools.product((1 << 20, len(raw) - 1), (True, False)):
                whole, step_by_step = _leader_verdicts(raw, max_message_bytes, from_client)
                assert whole == step_by_step, (changes, from_client)


@settings(max_examples=400, deadline=None)
@given(st.lists(_record, min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)), max_size=2),
       st.integers(-3, 3), st.booleans())
def test_the_whole_batch_check_in_c_gives_the_step_by_step_verdict_for_damaged_batches(records, flips, resize,
                                                                                      crc_kept):
    """Generated batches with bytes flipped, cut or padded, their CRC made valid again or left
    stale: the same verdict both ways."""
    b = BatchBuilder()
    for ts, key, value, headers in records:
        b.append(NOW + ts, key, value, headers)
    raw = bytearray(b.build())
    for at, mask in flips:
        raw[at % len(raw)] ^= mask
    raw = raw[:len(raw) + resize] if resize < 0 else raw + bytes(resize)
    if crc_kept and len(raw) >= rb.HEADER_SIZE:
        struct.pack_into(">I", raw, 17, rb.compute_crc(raw, 0, len(raw)))
    for from_client in (True, False):
        whole, step_by_step = _leader_verdicts(raw, 1 << 20, from_client)
        assert whole == step_by_step, from_client


def test_log_append_benchmark_runs(capsys):
    """``odradek perf log-append`` (the figures in docs/benchmarks.md) measures all three shapes."""
    from odradek.client.perf import main
    assert main(["log-append", "--rounds", "1", "--scale", "0.01"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all("µs CPU per append" in line for line in lines)
