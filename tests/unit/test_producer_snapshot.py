"""Producer state kept with the log: snapshot format, recovery, truncation, expiry."""
from __future__ import annotations

import os
import struct

from crc32c import crc32c

from odradek.broker.config.kafka_config import LogConfig
from odradek.broker.log import Log
from odradek.broker.log.producer_state import (ProducerEntry, ProducerStateManager, BatchMetadata, decode_snapshot,
                                           encode_snapshot, CorruptSnapshotError)
from odradek.protocol.records import BatchBuilder

import pytest


class Clock:
    def __init__(self, ms: int = 1_600_000_000_000) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


def idem(n: int, pid: int = 7, epoch: int = 0, seq: int = 0, ts: int = 1_600_000_000_000,
         txn: bool = False) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn)
    for i in range(n):
        b.append(ts + i, b"k%d" % i, b"v" * 20)
    return b.build()


def make_log(tmp_path, clock=None, clean=True, **overrides) -> Log:
    cfg = LogConfig({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return Log(str(tmp_path / "topic-0"), cfg, time=clock or Clock(), had_clean_shutdown=clean)


def crash(log: Log) -> None:
    """kill -9: no close(), no snapshot, no clean-shutdown marker."""
    for s in log.segments:
        s.close_handlers()


def snapshots(log: Log) -> list[str]:
    return sorted(n for n in os.listdir(log.dir) if n.endswith(".snapshot"))


def test_snapshot_bytes_layout_and_round_trip():
    e = ProducerEntry(3, coordinator_epoch=9, current_txn_first_offset=40, last_timestamp=1234)
    e.batches.append(BatchMetadata(10, 14, 50, 54))
    data = encode_snapshot({77: e, 78: ProducerEntry(0, last_timestamp=5)})
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 2) and len(data) == 10 + 2 * 46
    assert crc == crc32c(data[6:])
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (77, 3, 14, 54, 4, 1234, 9, 40)
    assert struct.unpack_from(">qhiqiqiq", data, 56) == (78, 0, -1, -1, 0, 5, -1, -1)
    back = decode_snapshot(data)
    assert back[77].epoch == 3 and back[77].coordinator_epoch == 9
    assert back[77].current_txn_first_offset == 40 and back[77].last_timestamp == 1234
    assert list(back[77].batches) == [BatchMetadata(10, 14, 50, 54)]
    assert not back[78].batches


def test_snapshot_crc_mismatch_is_rejected_and_skipped(tmp_path):
    data = bytearray(encode_snapshot({1: ProducerEntry(0, last_timestamp=10)}))
    data[-1] ^= 1
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data))
    st = ProducerStateManager(str(tmp_path), expiration_ms=10**12)
    st.producers[5] = ProducerEntry(2, last_timestamp=10)
    st.take_snapshot(3)
    st.producers[6] = ProducerEntry(1, last_timestamp=10)
    path = st.take_snapshot(8)
    with open(path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 0xFF]))
    fresh = ProducerStateManager(str(tmp_path), expiration_ms=10**12)
    assert fresh.load_snapshot(100, now_ms=20) == 3          # the corrupt newer one is skipped...
    assert set(fresh.producers) == {5}
    assert fresh.snapshot_offsets() == [3]                   # ...and deleted


def test_unclean_restart_rebuilds_state_and_dedups_a_resend(tmp_path):
    log = make_log(tmp_path)
    log.append_as_leader(idem(2, pid=7, seq=0), 0)
    first = log.append_as_leader(idem(3, pid=7, seq=2), 0)
    log.append_as_leader(idem(1, pid=8, seq=0), 0)
    leo = log.log_end_offset
    crash(log)
    assert snapshots(log) == []
    log = make_log(tmp_path, clean=False)
    again = log.append_as_leader(idem(3, pid=7, seq=2), 0)   # the same batch, resent
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset) == (2, 4)
    assert log.log_end_offset == leo                         # not appended twice
    nxt = log.append_as_leader(idem(1, pid=7, seq=5), 0)
    assert nxt.first_offset == leo


def test_snapshots_on_roll_and_close_are_loaded(tmp_path):
    log = make_log(tmp_path, segment_bytes=300)
    seq = 0
    for _ in range(6):
        log.append_as_leader(idem(2, pid=3, seq=seq), 0)
        seq += 2
    assert len(log.segments) > 2
    rolled = ["%020d.snapshot" % s.base_offset for s in log.segments[1:]]
    assert snapshots(log) == rolled
    leo = log.log_end_offset
    log.close()
    assert snapshots(log)[-1] == "%020d.snapshot" % leo
    log = make_log(tmp_path)
    assert log.producer_state.producers[3].batches[-1].last_seq == seq - 1
    assert log.append_as_leader(idem(2, pid=3, seq=seq - 2), 0).first_offset == leo - 2


def test_truncation_drops_snapshots_above_and_rebuilds_state(tmp_path):
    log = make_log(tmp_path, segment_bytes=300)
    infos = []
    seq = 0
    for _ in range(6):
        infos.append(log.append_as_leader(idem(2, pid=3, seq=seq), 0))
        seq += 2
    cut = infos[2].first_offset
    log.truncate_to(cut)
    assert all(int(n[:20]) <= cut for n in snapshots(log))
    assert log.producer_state.producers[3].batches[-1].last_offset == cut - 1
    # the truncated batch is new again for the leader (not a duplicate)
    assert log.append_as_leader(idem(2, pid=3, seq=4), 0).first_offset == cut


def test_idle_producers_expire(tmp_path):
    clock = Clock()
    log = Log(str(tmp_path / "topic-0"), LogConfig(), time=clock, had_clean_shutdown=True,
              producer_id_expiration_ms=1000)
    log.append_as_leader(idem(1, pid=1, ts=clock.ms), 0)
    log.append_as_leader(idem(1, pid=2, ts=clock.ms, txn=True), 0)    # an open transaction never expires
    clock.ms += 5000
    assert log.remove_expired_producers() == 1
    assert set(log.producer_state.producers) == {2}
