"""Idempotent producer bookkeeping (header-level) and the server's command line."""
from __future__ import annotations

import subprocess
import sys

import pytest

from odradek.broker.producer_state import ProducerStateManager
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import parse_header

from broker_fixtures import batch


def hdr(n, pid=5, epoch=0, seq=0):
    return parse_header(batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def test_sequences_duplicates_and_epochs():
    st = ProducerStateManager()
    assert st.check(hdr(3, seq=0)) is None
    st.update(hdr(3, seq=0), 10, 12, -1)
    assert st.check(hdr(3, seq=0)).first_offset == 10          # duplicate
    assert st.check(hdr(1, seq=3)) is None                      # next in order
    with pytest.raises(KafkaError) as e:
        st.check(hdr(1, seq=4))
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(KafkaError) as e:
        st.check(hdr(1, epoch=1, seq=7))                        # a new epoch starts at 0
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert st.check(hdr(1, epoch=1, seq=0)) is None
    st.update(hdr(1, epoch=1, seq=0), 13, 13, -1)
    with pytest.raises(KafkaError) as e:
        st.check(hdr(1, epoch=0, seq=3))
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert st.check(hdr(1, pid=-1, epoch=-1, seq=-1)) is None   # not idempotent


def test_only_last_five_batches_are_remembered():
    st = ProducerStateManager()
    for i in range(7):
        st.update(hdr(1, seq=i), i, i, -1)
    assert st.check(hdr(1, seq=2)).first_offset == 2
    with pytest.raises(KafkaError):
        st.check(hdr(1, seq=1))


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
