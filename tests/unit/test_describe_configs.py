"""DescribeConfigs (broker/apis/describe_configs.py, broker/config/describe.py): Kafka 2.8's
values, sources, synonyms and errors for topics, this broker and its loggers."""
from __future__ import annotations

import pytest

from odradek.broker.apis import describe_configs
from odradek.broker.config import describe
from odradek.broker.config.kafka_config import KafkaConfig
from odradek.protocol.errors import ErrorCode as E

from broker_fixtures import Broker, call

TOPIC, BROKER, LOGGER = 2, 4, 8


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path, log_retention_hours=1, sasl_jaas_config="secret", my_custom_setting="x")
    b.lead("t", 1)
    yield b
    b.close()


def resources(*items) -> dict:
    return {"resources": [{"resource_type": t, "resource_name": n, "configuration_keys": keys}
                          for t, n, keys in items], "include_synonyms": True, "include_documentation": True}


def entries(result) -> dict:
    return {c.name: c for c in result.configs}


def test_topic_defaults_and_synonyms(broker):
    [r] = call(broker, describe_configs, 3, resources((TOPIC, "t", None))).results
    assert (r.error_code, r.resource_type, r.resource_name) == (0, TOPIC, "t")
    got = entries(r)
    seg = got["segment.bytes"]
    assert (seg.value, seg.config_source, seg.read_only, seg.is_sensitive, seg.config_type) == (
        "1073741824", describe.DEFAULT_CONFIG, False, False, 3)
    assert [(s.name, s.value, s.source) for s in seg.synonyms] == [("log.segment.bytes", "1073741824", 5)]
    assert seg.documentation
    # log.retention.hours=1 in server.properties gives retention.ms 3600000; as in Kafka, its
    # synonyms stop short of log.retention.ms's fallbacks, so the source reads DEFAULT_CONFIG
    ret = got["retention.ms"]
    assert (ret.value, ret.config_source, ret.synonyms) == ("3600000", describe.DEFAULT_CONFIG, [])
    assert got["cleanup.policy"].value == "delete" and got["cleanup.policy"].config_type == 7


def test_topic_override_comes_first():
    config = KafkaConfig({"zookeeper.connect": "x:1", "log.segment.bytes": "5000000"})
    [seg] = [c for c in describe.topic_configs(describe.BrokerLayers(config), {"segment.bytes": "7000000",
                                                                           "bogus": "1"}, True, False)
             if c.name == "segment.bytes"]
    assert (seg.value, seg.source) == ("7000000", describe.DYNAMIC_TOPIC_CONFIG)
    assert seg.synonyms == [describe.Synonym("segment.bytes", "7000000", 1),
                            describe.Synonym("log.segment.bytes", "5000000", 4),
                            describe.Synonym("log.segment.bytes", "1073741824", 5)]


def test_dynamic_layers_come_before_the_static_ones():
    static = KafkaConfig({"zookeeper.connect": "x:1", "log.segment.bytes": "5000000", "broker.id": "1"})
    layers = describe.BrokerLayers(static, {"log.segment.bytes": "3000000", "leader.replication.throttled.rate": "9"},
                                   {"log.segment.bytes": "4000000", "log.retention.ms": "60000"})
    topic = {c.name: c for c in describe.topic_configs(layers, {}, True, False)}
    assert (topic["segment.bytes"].value, topic["segment.bytes"].source) == ("3000000", describe.DYNAMIC_BROKER_CONFIG)
    assert [(s.value, s.source) for s in topic["segment.bytes"].synonyms] == [
        ("3000000", 2), ("4000000", 3), ("5000000", 4), ("1073741824", 5)]
    assert (topic["retention.ms"].value, topic["retention.ms"].source) == ("60000", describe.DYNAMIC_DEFAULT_BROKER_CONFIG)
    broker_side = {c.name: c for c in describe.broker_configs(layers, True, False)}
    seg = broker_side["log.segment.bytes"]
    assert (seg.value, seg.source, seg.read_only) == ("3000000", describe.DYNAMIC_BROKER_CONFIG, False)
    assert broker_side["broker.id"].read_only
    rate = broker_side["leader.replication.throttled.rate"]
    assert (rate.value, rate.source, rate.read_only) == ("9", describe.DYNAMIC_BROKER_CONFIG, False)
    assert "follower.replication.throttled.rate" not in broker_side          # only shown where set
    defaults = describe.default_broker_configs(layers, True, False)
    assert [(c.name, c.value, c.source) for c in defaults] == [
        ("log.retention.ms", "60000", 3), ("log.segment.bytes", "4000000", 3)]


def test_broker_static_default_and_secrets(broker):
    body = resources((BROKER, "1", None))
    [r] = call(broker, describe_configs, 1, body).results
    got = entries(r)
    assert (got["broker.id"].value, got["broker.id"].config_source, got["broker.id"].read_only) == ("1", 4, True)
    assert (got["log.retention.hours"].value, got["log.retention.hours"].config_source) == ("1", 4)
    assert [(s.name, s.value, s.source) for s in got["log.retention.hours"].synonyms] == [
        ("log.retention.hours", "1", 4), ("log.retention.hours", "168", 5)]
    for secret in ("sasl.jaas.config", "my.custom.setting"):   # a password, and a property odradek does not know
        assert got[secret].is_sensitive and got[secret].value is None
        assert all(s.value is None for s in got[secret].synonyms)
    assert got["num.partitions"].config_source in (4, 5)
    only = call(broker, describe_configs, 1, resources((BROKER, "1", ["broker.id", "nope"]))).results[0]
    assert [c.name for c in only.configs] == ["broker.id"]


def test_errors_are_kafkas(broker):
    body = resources((TOPIC, "missing", None), (TOPIC, "bad/name", None), (BROKER, "2", None), (BROKER, "x", None),
                     (BROKER, "", None), (LOGGER, "", None), (7, "whatever", None))
    results = call(broker, describe_configs, 2, body).results
    assert [(r.resource_name, r.error_code) for r in results] == [
        ("missing", E.UNKNOWN_TOPIC_OR_PARTITION), ("bad/name", E.INVALID_TOPIC_EXCEPTION),
        ("2", E.INVALID_REQUEST), ("x", E.INVALID_REQUEST), ("", 0), ("", E.INVALID_REQUEST),
        ("whatever", E.INVALID_REQUEST)]
    assert results[2].error_message == "Unexpected broker id, expected 1 or empty string, but received 2"
    assert results[4].configs == []


def test_loggers(broker):
    import logging
    logging.getLogger("odradek.test.describe").setLevel(logging.DEBUG)
    [r] = call(broker, describe_configs, 1, resources((LOGGER, "1", None))).results
    got = entries(r)
    assert got["odradek.test.describe"].value == "DEBUG" and got["root"].config_source == 6
    assert got["root"].value in ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")
    [r] = call(broker, describe_configs, 0, resources((TOPIC, "t", None))).results
    assert r.configs and not any(c.is_default for c in r.configs)   # v0's is_default: Kafka 2.8 never sets it
