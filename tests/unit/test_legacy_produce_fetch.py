"""Produce v0-2 with magic 0/1 message sets and Fetch v0-3 against a real LogManager: up-conversion
with the topic's configs, Kafka's error codes with nothing appended, down-conversion and
message.downconversion.enable."""
from __future__ import annotations

import time

import pytest

from odradek.broker.apis import fetch, produce
from odradek.broker.config.kafka_config import LogConfig
from odradek.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from odradek.protocol.errors import ErrorCode
from odradek.protocol.legacy_records import build_set, encode_message, inner_messages, read_set
from odradek.protocol.records import BatchBuilder, iter_batches, iter_records

from broker_fixtures import Broker, batch, call, fetch_body, produce_body


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


def lead(broker: Broker, topic: str = "t", **configs: str) -> None:
    broker.rm.log_configs[topic] = LogConfig.from_broker(broker.config, configs)
    broker.lead(topic)


def produced(broker: Broker, version: int, records: bytes, topic: str = "t"):
    return call(broker, produce, version, produce_body(topic, records)).responses[0].partition_responses[0]


def fetched(broker: Broker, version: int, offset: int = 0, topic: str = "t", max_bytes: int = 1 << 20):
    return call(broker, fetch, version, fetch_body(topic, offset, partition_max_bytes=max_bytes)
                ).responses[0].partition_responses[0]


def deep(record_set: bytes) -> list:
    out: list = []
    for m in read_set(record_set) if record_set else []:
        out += inner_messages(m) if m.compression else [m]
    return out


def now_ms() -> int:
    return int(time.time() * 1000)


def test_old_producers_append_and_old_consumers_read_their_format(broker):
    lead(broker)
    ts = now_ms()
    r = produced(broker, 0, build_set(0, NONE, [(0, -1, b"k%d" % i, b"v%d" % i) for i in range(3)]))
    assert (r.error_code, r.base_offset) == (0, 0)
    r = produced(broker, 2, build_set(1, GZIP, [(0, ts, b"a", b"x"), (1, ts + 1, None, b"y")]))
    assert (r.error_code, r.base_offset, r.log_append_time_ms) == (0, 3, -1)
    r = produced(broker, 2, batch(2))   # Produce v0-2 may carry magic 2, as Kafka takes it
    assert (r.error_code, r.base_offset) == (0, 5)
    log = broker.log_manager.get_log(("t", 0))
    assert log.log_end_offset == 7
    assert [(h.magic, h.compression, h.base_offset) for h, _ in iter_batches(log.read(0, 1 << 20))] == \
        [(2, NONE, 0), (2, GZIP, 3), (2, NONE, 5)]
    # a modern fetch sees the converted records; magic 0 carried no timestamp
    modern = list(iter_records(fetched(broker, 11).record_set))
    assert [(r.offset, r.key, r.value) for r in modern[:5]] == \
        [(0, b"k0", b"v0"), (1, b"k1", b"v1"), (2, b"k2", b"v2"), (3, b"a", b"x"), (4, None, b"y")]
    assert [r.timestamp for r in modern[:5]] == [-1, -1, -1, ts, ts + 1]
    for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
        p = fetched(broker, version)
        assert p.error_code == 0 and p.high_watermark == 7
        assert {m.magic for m in read_set(p.record_set)} == {magic}
        msgs = consume(broker, version)
        assert [m.offset for m in msgs] == list(range(7))
        assert [m.timestamp for m in msgs][3:5] == ([-1, -1] if magic == 0 else [ts, ts + 1])
        assert [m.key for m in msgs] == [b"k0", b"k1", b"k2", b"a", None, b"k0", b"k1"]
        assert read_set(fetched(broker, version, offset=3).record_set)[0].compression == GZIP  # its codec kept
    assert [m.offset for m in consume(broker, 2, offset=1)] == [1, 2, 3, 4, 5, 6]


def consume(broker: Broker, version: int, offset: int = 0) -> list:
    """Every message from ``offset`` up to the high watermark, fetch after fetch, as an old consumer
    reads (a down-converted answer holds what fits in the bytes the log read)."""
    out: list = []
    while True:
        p = fetched(broker, version, offset)
        got = [m for m in deep(p.record_set) if m.offset >= offset]
        if not got:
            return out
        out += got
        offset = got[-1].offset + 1


@pytest.mark.parametrize("what,records,code", [
    ("bad CRC", build_set(1, NONE, [(0, 1, b"k", b"v")])[:-1] + b"w", ErrorCode.CORRUPT_MESSAGE),
    ("truncated", build_set(1, NONE, [(0, 1, b"k", b"v")] * 2)[:-5], ErrorCode.CORRUPT_MESSAGE),
    ("bad compressed payload", encode_message(0, 1, SNAPPY, 1, None, b"\x00garbage"), ErrorCode.CORRUPT_MESSAGE),
    ("zstd in magic 1", encode_message(0, 1, ZSTD, 1, None, b"x"), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    ("LogAppendTime from a producer", encode_message(0, 1, 0x08, 1, b"k", b"v"), ErrorCode.INVALID_TIMESTAMP),
])
def test_bad_legacy_sets_get_kafkas_codes_and_change_nothing(broker, what, records, code):
    lead(broker)
    produced(broker, 2, build_set(1, NONE, [(0, now_ms(), b"k", b"v")]))
    log = broker.log_manager.get_log(("t", 0))
    before = (log.log_end_offset, log.high_watermark, log.active_segment.size)
    r = produced(broker, 2, records)
    assert (r.error_code, r.base_offset) == (code, -1), what
    assert (log.log_end_offset, log.high_watermark, log.active_segment.size) == before
    # v3+ may carry magic 2 only
    assert produced(broker, 3, build_set(1, NONE, [(0, 1, b"k", b"v")])).error_code == ErrorCode.INVALID_RECORD


def test_topic_configs_apply_to_old_producers(broker):
    lead(broker, "compacted", **{"cleanup.policy": "compact"})
    assert produced(broker, 1, build_set(0, NONE, [(0, -1, None, b"v")]), "compacted").error_code == \
        ErrorCode.INVALID_RECORD
    lead(broker, "bounded", **{"message.timestamp.difference.max.ms": "60000"})
    assert produced(broker, 2, build_set(1, NONE, [(0, 1000, b"k", b"v")]), "bounded").error_code == \
        ErrorCode.INVALID_TIMESTAMP
    assert produced(broker, 1, build_set(0, NONE, [(0, -1, b"k", b"v")]), "bounded").error_code == 0  # no timestamp
    lead(broker, "squeezed", **{"compression.type": "lz4"})
    assert produced(broker, 2, build_set(1, GZIP, [(0, now_ms(), b"k", b"v")]), "squeezed").error_code == 0
    [(h, _)] = list(iter_batches(broker.log_manager.get_log(("squeezed", 0)).read(0, 1 << 20)))
    assert h.compression == LZ4
    lead(broker, "appended", **{"message.timestamp.type": "LogAppendTime"})
    r = produced(broker, 2, build_set(1, NONE, [(0, 5, b"k", b"v")]), "appended")
    assert r.error_code == 0 and r.log_append_time_ms > 5
    [m] = read_set(fetched(broker, 2, topic="appended").record_set)
    assert (m.timestamp, m.log_append_time) == (r.log_append_time_ms, True)


def test_down_conversion_disabled_and_zstd(broker):
    lead(broker, **{"message.downconversion.enable": "false"})
    b = BatchBuilder(compression=ZSTD)
    b.append(now_ms(), b"k", b"v")
    assert produced(broker, 8, b.build()).error_code == 0
    for version in (0, 1, 2, 3):
        p = fetched(broker, version)
        assert (p.error_code, p.high_watermark, p.record_set) == (ErrorCode.UNSUPPORTED_VERSION, -1, b"")
    assert fetched(broker, 4).error_code == 0
    lead(broker, "z")
    produced(broker, 8, b.build(), "z")
    assert fetched(broker, 2, topic="z").error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_old_fetches_keep_to_the_bytes_read(broker):
    lead(broker)
    for _ in range(4):
        produced(broker, 8, batch(5, value=b"x" * 200))
    one_batch = len(batch(5, value=b"x" * 200))
    p = fetched(broker, 2, max_bytes=one_batch)     # one magic-2 batch read: its five records, whole
    assert [m.offset for m in read_set(p.record_set)] == [0, 1, 2, 3, 4]
    p = fetched(broker, 2, max_bytes=2 * one_batch)  # what fits of the second within the bytes read
    offsets = [m.offset for m in read_set(p.record_set)]
    assert offsets[:5] == [0, 1, 2, 3, 4] and 5 < len(offsets) < 10
    assert len(p.record_set) <= 2 * one_batch


def test_a_message_format_below_0_11_is_refused_in_one_line(tmp_path, capsys):
    from odradek.broker.main import main
    props = tmp_path / "server.properties"
    props.write_text(f"zookeeper.connect=127.0.0.1:1\nlog.dirs={tmp_path / 'logs'}\n")
    assert main(["start", str(props), "--override", "log.message.format.version=0.10.2"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "log.message.format.version" in err and "message format v2" in err
    with pytest.raises(Exception, match="not a valid version"):
        LogConfig({"message.format.version": "banana"})
    assert LogConfig({"message.format.version": "0.11.0"})["message.format.version"] == "0.11.0"


def test_a_stored_old_message_format_is_ignored_not_fatal(broker):
    from odradek.broker.topic_configs import log_config
    config = log_config(broker.config, "old", {"message.format.version": "0.9.0", "retention.ms": "5"})
    assert config["message.format.version"] == "2.8-IV1" and config["retention.ms"] == 5


def test_a_transactional_batch_in_produce_v0_2_is_refused_as_kafka_does(broker):
    lead(broker)
    b = BatchBuilder(producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
    b.append(now_ms(), b"k", b"v")
    assert produced(broker, 2, b.build()).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert broker.log_manager.get_log(("t", 0)).log_end_offset == 0
