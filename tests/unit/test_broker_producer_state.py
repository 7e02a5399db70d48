"""Idempotent producer bookkeeping (header-level) and the server's command line."""
from __future__ import annotations

import subprocess
import sys

import pytest

from odradek.broker.log.producer_state import ProducerStateManager
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import parse_header

from broker_fixtures import batch


def hdr(n, pid=5, epoch=0, seq=0):
    return parse_header(batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def test_sequences_duplicates_and_epochs():
    st = ProducerStateManager()
    assert st.check(hdr(3, seq=0)) is None
    st.apply_batch(hdr(3, seq=0), 10, 12, -1)
    assert st.check(hdr(3, seq=0)).first_offset == 10          # duplicate
    assert st.check(hdr(1, seq=3)) is None                      # next in order
    with pytest.raises(KafkaError) as e:
        st.check(hdr(1, seq=4))
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(KafkaError) as e:
        st.check(hdr(1, epoch=1, seq=7))                        # a new epoch starts at 0
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert st.check(hdr(1, epoch=1, seq=0)) is None
    st.apply_batch(hdr(1, epoch=1, seq=0), 13, 13, -1)
    with pytest.raises(KafkaError) as e:
        st.check(hdr(1, epoch=0, seq=3))
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert st.check(hdr(1, pid=-1, epoch=-1, seq=-1)) is None   # not idempotent


def test_only_last_five_batches_are_remembered():
    st = ProducerStateManager()
    for i in range(7):
        st.apply_batch(hdr(1, seq=i), i, i, -1)
    assert st.check(hdr(1, seq=2)).first_offset == 2
    with pytest.raises(KafkaError):
        st.check(hdr(1, seq=1))


def txn_hdr(n, pid=5, epoch=0, seq=0, base_offset=0):
    from odradek.protocol.records import BatchBuilder
    b = BatchBuilder(base_offset=base_offset, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                     is_transactional=True)
    for i in range(n):
        b.append(1000 + i, b"k", b"v")
    return parse_header(b.build())


def marker_hdr(pid, epoch, offset):
    from odradek.protocol.control_records import build_control_batch
    return parse_header(build_control_batch(pid, epoch, True, 0, 2000, base_offset=offset))


def test_transactions_open_at_their_first_offset_and_end_with_a_marker():
    st = ProducerStateManager()
    assert st.apply_batch(txn_hdr(2, pid=1), 10, 11) is None
    st.apply_batch(txn_hdr(1, pid=1, seq=2), 12, 12)               # same txn: first offset stays 10
    st.apply_batch(txn_hdr(1, pid=2), 13, 13)
    assert st.ongoing_first_offset(1) == 10 and st.first_unstable_offset() == 10
    with pytest.raises(KafkaError) as e:                          # no plain batch inside a txn
        st.check(hdr(1, pid=1, seq=3))
    assert e.value.code == ErrorCode.INVALID_TXN_STATE
    done = st.apply_batch(marker_hdr(2, 0, 14), 14, 14, marker=(False, 3))
    assert (done.producer_id, done.first_offset, done.last_offset, done.is_aborted) == (2, 13, 14, True)
    assert done.last_stable_offset == 10                          # pid 1 is still open
    assert st.first_unstable_offset() == 10
    done = st.apply_batch(marker_hdr(1, 0, 15), 15, 15, marker=(True, 3))
    assert (done.first_offset, done.is_aborted, done.last_stable_offset) == (10, False, 16)
    assert st.first_unstable_offset() == 10                       # markers not yet replicated
    st.on_high_watermark(15)
    assert st.first_unstable_offset() == 10
    st.on_high_watermark(16)
    assert st.first_unstable_offset() is None
    assert st.producers[2].coordinator_epoch == 3
    with pytest.raises(KafkaError) as e:
        st.check_marker(2, 0, 2)
    assert e.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED


def test_coordinator_origin_skips_sequences_but_not_epochs():
    st = ProducerStateManager()
    st.apply_batch(txn_hdr(1, pid=9, epoch=3, seq=-1), 0, 0)
    assert st.check(txn_hdr(1, pid=9, epoch=3, seq=-1), origin="coordinator") is None
    with pytest.raises(KafkaError) as e:
        st.check(txn_hdr(1, pid=9, epoch=2, seq=-1), origin="coordinator")
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def _broker_cli(*args):
    return subprocess.run([sys.executable, "-m", "odradek.zk.cli", "broker", *args],
                          capture_output=True, text=True, timeout=60)


def test_bad_config_is_one_line_and_exit_1(tmp_path):
    missing = _broker_cli("start", str(tmp_path / "nope.properties"))
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "nope.properties" in missing.stderr
    props = tmp_path / "server.properties"
    props.write_text("broker.id=1\nlog.dirs=/tmp/x\n")
    r = _broker_cli("start", str(props))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "zookeeper.connect" in r.stderr
    r = _broker_cli("start", str(props), "--override", "zookeeper.connect=127.0.0.1:1", "--override",
                    "num.partitions=zero")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "num.partitions" in r.stderr
