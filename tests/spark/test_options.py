"""Option parsing and offset planning arithmetic of the Spark source (no Spark, no broker)."""
from __future__ import annotations

import pytest

from odradek.client import TopicPartition as TP
from odradek.pipeline.offsets import limit_offsets, to_map, to_tps
from odradek.pipeline.options import OptionError, parse_read_options, parse_write_options

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_read_options_mirror_spark_kafka():
    o = parse_read_options({**BS, "subscribe": "a, b", "startingOffsets": '{"a":{"0":23,"1":-2}}',
                            "maxOffsetsPerTrigger": "100", "failOnDataLoss": "false",
                            "kafka.fetch.max.wait.ms": "50", "kafka.group.id.unknown": "x"}, streaming=True)
    assert o.subscription.topics == ("a", "b")
    assert o.starting == {"a": {"0": 23, "1": -2}}
    assert o.max_offsets_per_trigger == 100 and o.fail_on_data_loss is False
    assert o.consumer == {"bootstrap.servers": "127.0.0.1:9092", "fetch.max.wait.ms": "50"}
    batch = parse_read_options({**BS, "subscribePattern": "t.*"}, streaming=False)
    assert batch.starting == "earliest" and batch.ending == "latest" and batch.fail_on_data_loss
    assert batch.subscription.matches("t1") and not batch.subscription.matches("xt1")
    assert parse_read_options({**BS, "assign": '{"t":[1,0]}'}, False).subscription.assigned == (("t", 0), ("t", 1))


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "a"}, "kafka.bootstrap.servers"),
    ({**BS}, "exactly one of"),
    ({**BS, "subscribe": "a", "assign": '{"a":[0]}'}, "exactly one of"),
    ({**BS, "subscribe": "a", "startingOffsets": "latest"}, "cannot be latest"),
    ({**BS, "subscribe": "a", "endingOffsets": "earliest"}, "cannot be earliest"),
    ({**BS, "subscribe": "a", "startingOffsets": "{bad"}, "startingOffsets"),
    ({**BS, "subscribe": "a", "failOnDataLoss": "maybe"}, "true or false"),
])
def test_bad_read_options(options, message):
    with pytest.raises(OptionError, match=message):
        parse_read_options(options, streaming=False)


def test_write_options_default_to_acks_all():
    w = parse_write_options({**BS, "topic": "out", "kafka.linger.ms": "1"})
    assert w.topic == "out" and w.producer["acks"] == "all" and w.producer["linger.ms"] == "1"


def test_limit_offsets_shares_by_lag():
    start = {TP("t", 0): 0, TP("t", 1): 100, TP("t", 2): 5}
    latest = {TP("t", 0): 300, TP("t", 1): 200, TP("t", 2): 5}
    assert limit_offsets(start, latest, None) == latest
    end = limit_offsets(start, latest, 100)
    assert sum(end[tp] - start[tp] for tp in start) == 100
    assert end == {TP("t", 0): 75, TP("t", 1): 125, TP("t", 2): 5}
    # a partition whose end went back (data loss already reported) ends there
    assert limit_offsets({TP("t", 0): 50}, {TP("t", 0): 10}, 5) == {TP("t", 0): 10}


def test_offset_maps_round_trip():
    m = {"a": {"0": 1, "1": 2}, "b": {"3": 4}}
    assert to_map(to_tps(m)) == m
