"""Options and batch-marker arithmetic of the exactly-once sink (no Spark session, no broker)."""
from __future__ import annotations

import pytest

from odradek.client import OffsetAndMetadata, TopicPartition
from odradek.pipeline.exactly_once import (
    committed_batches, default_prefix, marker_metadata, transactional_id)
from odradek.pipeline.options import OptionError, parse_write_options

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out"}


def test_exactly_once_is_off_by_default():
    w = parse_write_options(BS, streaming=True)
    assert w.exactly_once is False and w.transactional_id_prefix is None


def test_exactly_once_options_parse():
    w = parse_write_options({**BS, "ExactlyOnce": "TRUE", "transactionalIdPrefix": " sales-eos ",
                             "kafka.transaction.timeout.ms": "30000"}, streaming=True)
    assert w.exactly_once is True and w.transactional_id_prefix == "sales-eos"
    assert w.producer["acks"] == "all" and w.producer["transaction.timeout.ms"] == "30000"
    assert parse_write_options({**BS, "exactlyOnce": "true"}, streaming=True).transactional_id_prefix is None


@pytest.mark.parametrize("options, streaming, message", [
    ({"exactlyOnce": "yes"}, True, "exactlyOnce must be true or false"),
    ({"exactlyOnce": "true"}, False, "streaming writes"),
    ({"transactionalIdPrefix": "p"}, True, "needs exactlyOnce=true"),
    ({"exactlyOnce": "true", "transactionalIdPrefix": "  "}, True, "must not be empty"),
    ({"exactlyOnce": "true", "kafka.transactional.id": "t"}, True, "kafka.transactional.id cannot be set"),
    ({"kafka.transactional.id": "t"}, True, "kafka.transactional.id cannot be set"),
    ({"exactlyOnce": "true", "kafka.acks": "1"}, True, "acks=1 conflicts"),
    ({"exactlyOnce": "true", "kafka.enable.idempotence": "false"}, True, "enable.idempotence=false conflicts"),
])
def test_bad_exactly_once_options(options, streaming, message):
    with pytest.raises(OptionError, match=message):
        parse_write_options({**BS, **options}, streaming=streaming)


def test_transactional_ids_are_per_task_and_stable():
    prefix = default_prefix("8d1f-query")
    assert prefix == "odradek-spark-8d1f-query"
    assert [transactional_id(prefix, p) for p in range(2)] == ["odradek-spark-8d1f-query-0",
                                                               "odradek-spark-8d1f-query-1"]


def test_committed_batches_counts_only_this_query():
    mine, other = "q-1", "q-0"
    assert committed_batches({}, mine) == 0
    offsets = {
        TopicPartition("out", 0): OffsetAndMetadata(8, marker_metadata(mine, 7, 1)),
        TopicPartition("other-out", 0): OffsetAndMetadata(40, marker_metadata(other, 39, 1)),  # old checkpoint
        TopicPartition("x", 0): OffsetAndMetadata(99, "not ours"),
    }
    assert committed_batches(offsets, mine) == 8  # batches 0..7 done: batch 7 is skipped, 8 written
    assert committed_batches(offsets, "q-2") == 0
