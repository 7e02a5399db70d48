"""failOnDataLoss: records deleted by retention before Spark read them."""
from __future__ import annotations

import re
import time

import pytest

from odradek.client import Consumer, Producer, TopicPartition
from odradek.testing import create_topic
from odradek.testing import wait_until as wait_for


@pytest.fixture
def trimmed_topic(cluster_factory):
    """A topic whose first segments retention already deleted: (bootstrap, log start offset, end offset)."""
    cluster = cluster_factory(brokers=1, overrides={"log.retention.check.interval.ms": 200,
                                                    "log.segment.delete.delay.ms": 0})
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "trimmed", 1, configs={"segment.bytes": "1024", "retention.ms": "60000"})
    old = int(time.time() * 1000) - 3_600_000  # an hour old: past retention as soon as its segment rolls
    with Producer(bootstrap_servers=bootstrap, acks="all") as p:
        for i in range(60):
            p.send("trimmed", value=b"x" * 100, key=str(i).encode(), timestamp_ms=old).get(10)
        for i in range(5):  # fresh records keep the tail
            p.send("trimmed", value=b"fresh", key=f"f{i}".encode()).get(10)
    tp = TopicPartition("trimmed", 0)
    with Consumer(bootstrap_servers=bootstrap) as c:
        start = wait_for(lambda: c.beginning_offsets([tp])[tp], 60, "retention to move the log start offset")
        end = c.end_offsets([tp])[tp]
    return bootstrap, start, end


def _read(spark, bootstrap, **options):
    reader = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", "trimmed").option("startingOffsets", '{"trimmed":{"0":0}}'))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_fail_on_data_loss(spark, trimmed_topic, tmp_path):
    bootstrap, start, end = trimmed_topic
    assert 0 < start < end
    # (retention may still be deleting segments: the lost range ends at least at ``start``)
    with pytest.raises(Exception) as info:
        _read(spark, bootstrap).count()
    lost = re.search(r"records of trimmed-0 at offsets \[0, (\d+)\) were deleted", str(info.value))
    assert lost and start <= int(lost.group(1)) < end
    # failOnDataLoss=false: a warning, then everything the log still holds
    offsets = sorted(r.offset for r in _read(spark, bootstrap, failOnDataLoss="false").select("offset").collect())
    assert offsets == list(range(offsets[0], end)) and start <= offsets[0]
    # the same in a stream
    q = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", "trimmed").option("startingOffsets", '{"trimmed":{"0":0}}')
         .load().writeStream.format("memory").queryName("trimmed_stream")
         .option("checkpointLocation", str(tmp_path / "c1")).trigger(availableNow=True).start())
    with pytest.raises(Exception, match="were deleted"):
        q.awaitTermination(120)
    q = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", "trimmed").option("startingOffsets", '{"trimmed":{"0":0}}')
         .option("failOnDataLoss", "false")
         .load().writeStream.format("memory").queryName("trimmed_stream_ok")
         .option("checkpointLocation", str(tmp_path / "c2")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    got = sorted(r.offset for r in spark.sql("select offset from trimmed_stream_ok").collect())
    assert got == list(range(got[0], end)) and start <= got[0]
