"""Client configuration: Kafka names, underscores, defaults, validation in one place."""
from __future__ import annotations

import pytest

from odradek.client.config import ClientConfig, ConfigError, normalize_key, parse_properties


def test_defaults_are_kafka_28():
    cfg = ClientConfig("producer")
    assert cfg["acks"] == 1
    assert cfg["linger.ms"] == 0
    assert cfg["batch.size"] == 16384
    assert cfg["retries"] == 2147483647
    assert cfg["delivery.timeout.ms"] == 120000
    assert cfg["max.in.flight.requests.per.connection"] == 5
    assert cfg["buffer.memory"] == 33554432
    assert cfg["max.request.size"] == 1048576
    assert cfg["max.block.ms"] == 60000
    assert cfg["compression.type"] == 0
    c = ClientConfig("consumer")
    assert c["fetch.max.wait.ms"] == 500 and c["fetch.max.bytes"] == 52428800
    assert c["max.partition.fetch.bytes"] == 1048576 and c["auto.offset.reset"] == "latest"
    assert c["max.poll.records"] == 500


def test_underscores_and_dots_are_the_same_key():
    a = ClientConfig("producer", linger_ms=5)
    b = ClientConfig("producer", **{"linger.ms": 5})
    c = ClientConfig("producer", {"linger.ms": "5"})
    assert a["linger.ms"] == b["linger.ms"] == c.linger_ms == 5
    assert normalize_key("max_in_flight_requests_per_connection") == "max.in.flight.requests.per.connection"


@pytest.mark.parametrize("value,expected", [("all", -1), (-1, -1), ("0", 0), (1, 1), ("1", 1)])
def test_acks(value, expected):
    assert ClientConfig("producer", acks=value)["acks"] == expected


@pytest.mark.parametrize("name,codec", [("none", 0), ("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4), ("GZIP", 1)])
def test_compression_names(name, codec):
    assert ClientConfig("producer", compression_type=name)["compression.type"] == codec


def test_bootstrap_servers_forms():
    assert ClientConfig("admin", bootstrap_servers="a:1,b:2")["bootstrap.servers"] == [("a", 1), ("b", 2)]
    assert ClientConfig("admin", bootstrap_servers=["h:9093"])["bootstrap.servers"] == [("h", 9093)]
    assert ClientConfig("admin", bootstrap_servers="h")["bootstrap.servers"] == [("h", 9092)]
    assert ClientConfig("admin")["bootstrap.servers"] == [("localhost", 9092)]


@pytest.mark.parametrize("kwargs,message", [
    ({"lingr_ms": 5}, "unknown producer configuration"),
    ({"acks": 2}, "acks"),
    ({"compression_type": "brotli"}, "compression.type"),
    ({"batch_size": -1}, "batch.size"),
    ({"linger_ms": "soon"}, "linger.ms must be an integer"),
    ({"enable_idempotence": True, "acks": 1}, "acks=all"),
    ({"enable_idempotence": "maybe"}, "true or false"),
    ({"bootstrap_servers": "h:port"}, "bad address"),
    ({"partitioner": "round-robin"}, "partitioner"),
    ({"delivery_timeout_ms": 10, "linger_ms": 5}, "delivery.timeout.ms"),
])
def test_invalid_values_raise_one_clear_error(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        ClientConfig("producer", **kwargs)


def test_consumer_and_admin_keys_are_separate():
    with pytest.raises(ConfigError):
        ClientConfig("consumer", linger_ms=5)
    with pytest.raises(ConfigError):
        ClientConfig("consumer", auto_offset_reset="smallest")
    assert ClientConfig("consumer", auto_offset_reset="EARLIEST")["auto.offset.reset"] == "earliest"


def test_idempotence_defaults_acks_to_all():
    assert ClientConfig("producer", enable_idempotence=True)["acks"] == -1


def test_parse_properties():
    text = "# comment\n\nacks=all\nlinger.ms = 5\n! other\n"
    assert parse_properties(text) == {"acks": "all", "linger.ms": "5"}
    with pytest.raises(ConfigError):
        parse_properties(["novalue"])
