"""odradek.testing's DeliveryLedger and assert_no_loss: the diff a user reads when records go missing."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from odradek.testing import Delivered, DeliveryLedger, assert_no_loss, loss_report


def rec(p: int, offset: int, value: str, topic: str = "t") -> Delivered:
    return Delivered(topic, p, offset, None, value.encode())


ACKED = [rec(0, 0, "a"), rec(0, 1, "b"), rec(0, 2, "c"), rec(1, 0, "x"), rec(1, 1, "y")]


def test_everything_consumed_once_in_order_passes():
    assert_no_loss(ACKED, ACKED[3:] + ACKED[:3])   # partitions interleaved any way
    assert loss_report(ACKED, ACKED) == ""


def test_lost_duplicated_and_reordered_are_listed_per_partition():
    consumed = [rec(0, 0, "a"), rec(0, 5, "c"), rec(0, 6, "b"), rec(1, 0, "x"), rec(1, 7, "x")]
    with pytest.raises(AssertionError) as info:
        assert_no_loss(ACKED, consumed)
    text = str(info.value)
    assert text.splitlines()[0] == "5 records acknowledged, 5 consumed:"
    assert "t-0: 1 problem(s)\n  reordered: offset 1 consumed after 2" in text
    assert "t-1: 2 problem(s)" in text
    assert "lost: offset 1 key=None value=b'y'" in text
    assert "duplicated: key=None value=b'x' consumed 2 times, acked 1" in text


def test_duplicates_allowed_for_at_least_once():
    consumed = ACKED + [rec(1, 9, "y")]
    assert_no_loss(ACKED, consumed, allow_duplicates=True)
    with pytest.raises(AssertionError, match="duplicated"):
        assert_no_loss(ACKED, consumed)


def test_ledger_records_confluent_reports_and_futures():
    ledger = DeliveryLedger()

    class Msg:  # the shape of confluent-kafka's Message
        def topic(self): return "t"
        def partition(self): return 0
        def offset(self): return 0
        def key(self): return None
        def value(self): return b"a"

    ledger.on_delivery(None, Msg())
    ledger.on_delivery("broker down", Msg())

    class Future:  # odradek's and kafka-python's futures: add_callback / add_errback
        def __init__(self, md=None, exc=None):
            self.md, self.exc = md, exc

        def add_callback(self, fn):
            if self.md:
                fn(self.md)

        def add_errback(self, fn):
            if self.exc:
                fn(self.exc)

    ledger.track(Future(SimpleNamespace(topic="t", partition=0, offset=1)), value="b")
    ledger.track(Future(exc=RuntimeError("timeout")), value="lost-before-ack")
    assert list(ledger) == [rec(0, 0, "a"), rec(0, 1, "b")]
    assert len(ledger.failed) == 2
    consumed = [SimpleNamespace(topic="t", partition=0, offset=0, key=None, value=b"a")]
    assert "lost: offset 1 key=None value=b'b'" in loss_report(ledger, consumed)
