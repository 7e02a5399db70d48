"""Batch read, batch write and streaming write of the ``odradek`` data source against a real broker."""
from __future__ import annotations

import datetime as dt

import pytest

from odradek.client import Producer
from odradek.testing import create_topic
from spark_helpers import read_all

T0 = 1_700_000_000_000  # fixed record timestamps (ms)


def _source(spark, bootstrap, **options):
    reader = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


@pytest.fixture
def bootstrap(cluster_factory):
    return cluster_factory(brokers=1).bootstrap_servers


def _produce_known(bootstrap: str, topic: str) -> list[tuple]:
    """30 records over 3 partitions; returns the rows the source must give back."""
    expected = []
    next_offset = {0: 0, 1: 0, 2: 0}
    with Producer(bootstrap_servers=bootstrap, acks="all") as p:
        for i in range(30):
            part = i % 3
            key = None if i % 10 == 9 else f"k{i}".encode()
            value = None if i == 7 else f"value-{i}".encode()
            headers = [("h1", f"x{i}".encode()), ("h2", None)] if i % 2 else []
            p.send(topic, value=value, key=key, partition=part, timestamp_ms=T0 + i, headers=headers).get(10)
            ts = dt.datetime.fromtimestamp((T0 + i) / 1000, tz=dt.timezone.utc)
            expected.append((key, value, topic, part, next_offset[part], ts, 0,
                             [(k, v) for k, v in headers]))
            next_offset[part] += 1
    return expected


def _rows(df) -> list[tuple]:
    out = []
    for r in df.collect():
        ts = r.timestamp.replace(tzinfo=dt.timezone.utc) if r.timestamp.tzinfo is None else r.timestamp
        hdrs = [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers]
        out.append((None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value),
                    r.topic, r.partition, r.offset, ts, r.timestampType, hdrs))
    return sorted(out, key=lambda t: (t[3], t[4]))


def test_batch_read_returns_exactly_the_topic(spark, bootstrap):
    create_topic(bootstrap, "known", 3)
    expected = sorted(_produce_known(bootstrap, "known"), key=lambda t: (t[3], t[4]))
    df = _source(spark, bootstrap, subscribe="known", includeHeaders="true")
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert _rows(df) == expected
    # without includeHeaders there is no headers column, as in Spark's Kafka source
    assert "headers" not in _source(spark, bootstrap, subscribe="known").columns


def test_batch_read_offset_ranges_pattern_and_assign(spark, bootstrap):
    create_topic(bootstrap, "ranged", 3)
    create_topic(bootstrap, "other", 1)
    _produce_known(bootstrap, "ranged")
    with Producer(bootstrap_servers=bootstrap) as p:
        p.send("other", b"o").get(10)
    ranged = _source(spark, bootstrap, subscribe="ranged",
                     startingOffsets='{"ranged":{"0":2,"1":-2,"2":9}}',
                     endingOffsets='{"ranged":{"0":5,"1":3,"2":-1}}')
    got = sorted((r.partition, r.offset) for r in ranged.select("partition", "offset").collect())
    assert got == [(0, 2), (0, 3), (0, 4), (1, 0), (1, 1), (1, 2), (2, 9)]
    by_pattern = _source(spark, bootstrap, subscribePattern="ran.*|oth.r")
    assert by_pattern.groupBy("topic").count().orderBy("topic").collect() == [("other", 1), ("ranged", 30)]
    assigned = _source(spark, bootstrap, assign='{"ranged":[1]}')
    assert {r.partition for r in assigned.select("partition").collect()} == {1}
    assert assigned.count() == 10


def test_batch_write_then_read_round_trips(spark, bootstrap):
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType
    create_topic(bootstrap, "written", 4)
    schema = StructType([
        StructField("key", StringType()), StructField("value", BinaryType()),
        StructField("partition", IntegerType()),
        StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                     StructField("value", BinaryType())]))),
    ])
    rows = [(f"k{i}", f"v{i}".encode(), i % 4, [("n", str(i).encode())] if i % 3 else [])
            for i in range(200)]
    spark.createDataFrame(rows, schema).repartition(3).write.format("odradek").mode("append") \
        .option("kafka.bootstrap.servers", bootstrap).option("topic", "written").save()
    # the plain Consumer sees every row once, in the partition the row named
    got = sorted((r.key.decode(), r.value, r.partition, [(k, v) for k, v in r.headers])
                 for r in read_all(bootstrap, "written"))
    assert got == sorted((k, v, p, h) for k, v, p, h in rows)
    # and so does the source
    back = _source(spark, bootstrap, subscribe="written", includeHeaders="true").collect()
    assert sorted((bytes(r.key).decode(), bytes(r.value), r.partition, [(h.key, bytes(h.value)) for h in r.headers])
                  for r in back) == sorted((k, v, p, h) for k, v, p, h in rows)


def test_write_topic_column_and_schema_errors(spark, bootstrap):
    create_topic(bootstrap, "col-a", 1)
    create_topic(bootstrap, "col-b", 1)
    df = spark.createDataFrame([("col-a", "1"), ("col-b", "2"), ("col-b", "3")], "topic string, value string")
    df.write.format("odradek").mode("append").option("kafka.bootstrap.servers", bootstrap).save()
    assert [r.value for r in read_all(bootstrap, "col-a")] == [b"1"]
    assert sorted(r.value for r in read_all(bootstrap, "col-b")) == [b"2", b"3"]
    with pytest.raises(Exception, match="needs a 'topic' option or a 'topic' column"):
        spark.createDataFrame([("x",)], "value string").write.format("odradek").mode("append") \
            .option("kafka.bootstrap.servers", bootstrap).save()


def test_streaming_copy_with_available_now(spark, bootstrap, tmp_path):
    create_topic(bootstrap, "copy-in", 3)
    create_topic(bootstrap, "copy-out", 2)
    with Producer(bootstrap_servers=bootstrap) as p:
        for i in range(500):
            p.send("copy-in", value=f"v{i}".encode(), key=f"k{i}".encode())
        p.flush()
    stream = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", "copy-in").option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "120").load())
    q = (stream.selectExpr("key", "value").writeStream.format("odradek")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", "copy-out")
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None
    batches = [p for p in q.recentProgress if p["numInputRows"]]
    assert len(batches) >= 5 and all(p["numInputRows"] <= 120 for p in batches)  # maxOffsetsPerTrigger held
    got = sorted((r.key, r.value) for r in read_all(bootstrap, "copy-out"))
    assert got == sorted((f"k{i}".encode(), f"v{i}".encode()) for i in range(500))
