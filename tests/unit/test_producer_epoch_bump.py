"""Producer state on a bumped epoch follows Kafka 2.8's ProducerAppendInfo.checkSequence.

What issue 15 saw with a full disk: the first batch of a bumped epoch (sequence 0) failed to
append, the next one (sequence 1) then got OUT_OF_ORDER_SEQUENCE_NUMBER "new epoch N must start
at sequence 0, got 1" — which is Kafka's answer too, and is harmless only if the failed append
left the producer state untouched so that the retried sequence 0 is accepted. These tests pin
both: the rules, and that a failed (ENOSPC) append changes no producer state.
"""
from __future__ import annotations

import os

import pytest

from odradek.broker.log.producer_state import ORIGIN_COORDINATOR, ProducerStateManager
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import parse_header

from broker_fixtures import Broker, batch


def hdr(n: int = 1, epoch: int = 0, seq: int = 0, pid: int = 7):
    return parse_header(batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def oosn(st: ProducerStateManager, h, origin: str = "client") -> str:
    with pytest.raises(KafkaError) as e:
        st.check(h, origin)
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    return str(e.value)


def test_a_bumped_epoch_starts_at_sequence_zero_then_continues_in_order():
    st = ProducerStateManager()
    st.apply_batch(hdr(3, epoch=4, seq=0), 0, 2)
    assert "must start at sequence 0, got 1" in oosn(st, hdr(epoch=5, seq=1))
    assert st.check(hdr(epoch=5, seq=0)) is None
    st.apply_batch(hdr(epoch=5, seq=0), 3, 3)
    assert st.check(hdr(epoch=5, seq=1)) is None
    assert st.check(hdr(epoch=5, seq=0)).first_offset == 3      # a retry is a duplicate
    oosn(st, hdr(epoch=5, seq=2))                                 # a gap


def test_within_an_epoch_with_nothing_remembered_the_sequence_starts_at_zero():
    # an abort marker written with a bumped epoch (coordinator timeout) clears the batches
    from odradek.protocol.control_records import build_control_batch
    st = ProducerStateManager()
    st.apply_batch(hdr(epoch=1, seq=0), 0, 0)
    st.apply_batch(parse_header(build_control_batch(7, 2, False, 0, 1000, base_offset=1)), 1, 1,
                   marker=(False, 0))
    assert st.producers[7].epoch == 2 and not st.producers[7].batches
    oosn(st, hdr(epoch=2, seq=1))
    assert st.check(hdr(epoch=2, seq=0)) is None


def test_only_client_appends_are_sequence_checked():
    st = ProducerStateManager()
    st.apply_batch(hdr(epoch=1, seq=0), 0, 0)
    assert st.check(hdr(epoch=1, seq=9), ORIGIN_COORDINATOR) is None
    assert st.check(hdr(epoch=2, seq=9), ORIGIN_COORDINATOR) is None
    with pytest.raises(KafkaError) as e:                          # epochs are, for every origin
        st.check(hdr(epoch=0, seq=1), ORIGIN_COORDINATOR)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_an_append_that_fails_with_enospc_leaves_the_producer_state_as_it_was(tmp_path):
    b = Broker(tmp_path)
    b.lead("t")
    log = b.log_manager.get_log(("t", 0))
    first = b.rm.append_records(1000, 1, {("t", 0): batch(1, producer_id=7, producer_epoch=0, base_sequence=0)})
    assert first.result[("t", 0)]["error_code"] == 0
    seg = log.active_segment
    real_fd = seg._fd
    seg._fd = os.open("/dev/full", os.O_WRONLY | os.O_APPEND)     # the disk is full
    bumped = batch(1, producer_id=7, producer_epoch=1, base_sequence=0)
    with pytest.raises((OSError, KafkaError)):                    # (the partition's guard reports it)
        log.append_as_leader(bumped, 0)
    entry = log.producer_state.producers[7]
    assert entry.epoch == 0 and [(x.first_seq, x.last_seq) for x in entry.batches] == [(0, 0)]
    assert log.log_end_offset == 1
    os.close(seg._fd)
    seg._fd = real_fd                                             # space again: the retry of seq 0 goes in
    assert log.append_as_leader(bumped, 0).first_offset == 1
    assert log.append_as_leader(batch(1, producer_id=7, producer_epoch=1, base_sequence=1), 0).first_offset == 2
    b.close()
