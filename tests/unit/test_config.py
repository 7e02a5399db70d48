"""KafkaConfig / LogConfig: properties syntax, defaults, precedence, validation."""
from __future__ import annotations

import pytest

from odradek.broker.config.kafka_config import (BROKER_CONFIG, TOPIC_CONFIG_NAMES, ConfigError, KafkaConfig, LogConfig,
                                   parse_properties)

BASE = {"zookeeper.connect": "localhost:2181"}


def cfg(**props) -> KafkaConfig:
    return KafkaConfig({**BASE, **props})


def test_defaults_are_kafkas():
    c = KafkaConfig(BASE)
    assert c.broker_id == -1
    assert c.listeners == [("PLAINTEXT", "", 9092)]
    assert c.advertised_listeners == c.listeners
    assert c.inter_broker_listener_name == "PLAINTEXT"
    assert c.security_protocol_map["SASL_SSL"] == "SASL_SSL"
    assert c.log_dirs == ["/tmp/kafka-logs"]
    assert c.retention_ms == 168 * 3600 * 1000 == 604800000
    assert c.roll_ms == 604800000
    expected = {
        "zookeeper.session.timeout.ms": 18000, "num.partitions": 1, "default.replication.factor": 1,
        "min.insync.replicas": 1, "auto.create.topics.enable": True, "delete.topic.enable": True,
        "log.segment.bytes": 1073741824, "log.retention.bytes": -1, "log.retention.check.interval.ms": 300000,
        "log.index.interval.bytes": 4096, "log.index.size.max.bytes": 10485760, "log.cleanup.policy": ["delete"],
        "log.flush.offset.checkpoint.interval.ms": 60000, "log.message.timestamp.type": "CreateTime",
        "message.max.bytes": 1048588, "socket.request.max.bytes": 104857600, "replica.lag.time.max.ms": 30000,
        "replica.fetch.wait.max.ms": 500, "replica.fetch.max.bytes": 1048576, "replica.fetch.min.bytes": 1,
        "replica.fetch.response.max.bytes": 10485760, "replica.high.watermark.checkpoint.interval.ms": 5000,
        "num.replica.fetchers": 1, "unclean.leader.election.enable": False, "auto.leader.rebalance.enable": True,
        "leader.imbalance.check.interval.seconds": 300, "leader.imbalance.per.broker.percentage": 10,
        "controlled.shutdown.enable": True, "controlled.shutdown.max.retries": 3,
        "controlled.shutdown.retry.backoff.ms": 5000, "controller.socket.timeout.ms": 30000,
        "offsets.topic.num.partitions": 50, "offsets.topic.replication.factor": 3,
        "offsets.retention.minutes": 10080, "group.initial.rebalance.delay.ms": 3000,
        "group.min.session.timeout.ms": 6000, "group.max.session.timeout.ms": 1800000,
        "reserved.broker.max.id": 1000, "broker.id.generation.enable": True, "broker.rack": None,
        "log.segment.delete.delay.ms": 60000, "transactional.id.expiration.ms": 604800000,
        "replica.socket.receive.buffer.bytes": 65536, "log.flush.interval.messages": 2 ** 63 - 1,
        "log.flush.scheduler.interval.ms": 2 ** 63 - 1, "replica.selector.class": None,
    }
    assert {k: c[k] for k in expected} == expected
    assert c.zookeeper_connection_timeout_ms == 18000
    assert c.log_segment_bytes == 1073741824  # attribute access by Kafka name


def test_typed_values_and_listeners():
    c = cfg(**{"broker.id": "3", "listeners": "PLAINTEXT://0.0.0.0:9092,INTERNAL://[::1]:9093",
               "advertised.listeners": "PLAINTEXT://kafka1:9092,INTERNAL://kafka1-int:9093",
               "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
               "inter.broker.listener.name": "INTERNAL", "log.dirs": "/a, /b",
               "auto.create.topics.enable": "FALSE", "num.partitions": " 6 "})
    assert c.broker_id == 3 and c["broker.id"] == 3
    assert c.listeners == [("PLAINTEXT", "0.0.0.0", 9092), ("INTERNAL", "::1", 9093)]
    assert c.advertised_listeners[1] == ("INTERNAL", "kafka1-int", 9093)
    assert c.inter_broker_listener_name == "INTERNAL"
    assert c.log_dirs == ["/a", "/b"]
    assert c["auto.create.topics.enable"] is False and c.num_partitions == 6


def test_retention_and_roll_precedence():
    assert cfg(**{"log.retention.hours": "1"}).retention_ms == 3600000
    assert cfg(**{"log.retention.hours": "1", "log.retention.minutes": "2"}).retention_ms == 120000
    assert cfg(**{"log.retention.hours": "1", "log.retention.minutes": "2",
                  "log.retention.ms": "7"}).retention_ms == 7
    assert cfg(**{"log.retention.ms": "-1"}).retention_ms == -1
    assert cfg(**{"log.retention.ms": "-5"}).retention_ms == -1  # any negative: unlimited (Kafka)
    assert cfg(**{"log.roll.hours": "2"}).roll_ms == 7200000
    assert cfg(**{"log.roll.hours": "2", "log.roll.ms": "99"}).roll_ms == 99
    assert cfg(**{"log.dir": "/x"}).log_dirs == ["/x"]
    assert cfg(**{"log.dir": "/x", "log.dirs": "/y"}).log_dirs == ["/y"]


def test_unknown_keys_kept():
    c = cfg(**{"my.custom.key": "v", "num.partitions": "2", "producer.id.expiration.ms": "1000"})
    assert c["my.custom.key"] == "v" and c.unknown == ["my.custom.key", "producer.id.expiration.ms"]   # Kafka 3.4's
    with pytest.raises(KeyError):
        c["absent.key"]


@pytest.mark.parametrize("props,fragment", [
    ({"num.partitions": "abc"}, "num.partitions"),
    ({"num.partitions": "0"}, "num.partitions: must be at least 1"),
    ({"log.segment.bytes": "99999999999"}, "log.segment.bytes"),
    ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"),
    ({"log.cleanup.policy": "delete,shred"}, "log.cleanup.policy"),
    ({"log.message.timestamp.type": "Wallclock"}, "log.message.timestamp.type"),
    ({"listeners": "PLAINTEXT://host"}, "listeners"),
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "listeners"),
    ({"listeners": "FOO://:9092"}, "listener.security.protocol.map"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
    ({"inter.broker.listener.name": "NOPE"}, "inter.broker.listener.name"),
    ({"broker.id": "5000"}, "broker.id"),
    ({"broker.id.generation.enable": "false"}, "broker.id"),
    ({"replica.fetch.wait.max.ms": "40000"}, "replica.fetch.wait.max.ms"),
    ({"log.retention.hours": "x"}, "log.retention.hours"),
    ({"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"},
     "replica.selector.class: fetching from a follower (KIP-392) is not built"),
])
def test_bad_values_give_one_clear_line(props, fragment):
    with pytest.raises(ConfigError) as e:
        cfg(**props)
    msg = str(e.value)
    assert fragment in msg and "\n" not in msg


def test_zookeeper_connect_required():
    with pytest.raises(ConfigError, match="zookeeper.connect"):
        KafkaConfig({})


def test_properties_file_syntax(tmp_path):
    text = (
        "# comment\n"
        "! another comment\n"
        "   broker.id = 7  \n"
        "zookeeper.connect: zk1:2181,\\\n"
        "    zk2:2181/kafka\n"
        "log.dirs /data/a\n"
        "empty.key=\n"
        "path.key=C:\\\\x\\ty\n"
        "\n"
        "message.max.bytes=2000000\n"
    )
    assert parse_properties(text) == {
        "broker.id": "7", "zookeeper.connect": "zk1:2181,zk2:2181/kafka", "log.dirs": "/data/a",
        "empty.key": "", "path.key": "C:\\x\ty", "message.max.bytes": "2000000"}
    p = tmp_path / "server.properties"
    p.write_text(text)
    c = KafkaConfig.from_properties_file(str(p), {"broker.id": "8"})
    assert c.broker_id == 8 and c.zookeeper_connect == "zk1:2181,zk2:2181/kafka"
    assert c["message.max.bytes"] == 2000000
    with pytest.raises(ConfigError, match="Cannot read"):
        KafkaConfig.from_properties_file(str(tmp_path / "missing.properties"))


def test_log_config_from_broker_and_overrides():
    c = cfg(**{"log.retention.minutes": "5", "log.segment.bytes": "1000", "message.max.bytes": "500",
               "log.cleanup.policy": "compact", "log.segment.delete.delay.ms": "10"})
    lc = LogConfig.from_broker(c)
    assert lc["retention.ms"] == 300000 and lc.segment_bytes == 1000 and lc.max_message_bytes == 500
    assert lc["cleanup.policy"] == ["compact"] and lc.compact and not lc.delete_enabled
    assert lc["file.delete.delay.ms"] == 10 and lc["segment.ms"] == 604800000
    lc2 = LogConfig.from_broker(c, {"retention.ms": "1", "cleanup.policy": "compact,delete",
                                    "message.timestamp.type": "LogAppendTime"})
    assert lc2.retention_ms == 1 and lc2.delete_enabled and lc2.log_append_time
    assert lc2.segment_bytes == 1000 and lc2.overrides["retention.ms"] == "1"
    assert LogConfig()["retention.ms"] == 604800000 and LogConfig()["max.message.bytes"] == 1048588
    assert {"segment.bytes", "retention.ms", "min.insync.replicas", "compression.type"} <= TOPIC_CONFIG_NAMES


@pytest.mark.parametrize("overrides,fragment", [
    ({"retention.mss": "1"}, "Unknown topic config name: retention.mss"),
    ({"segment.bytes": "1"}, "segment.bytes"),
    ({"min.insync.replicas": "0"}, "min.insync.replicas"),
    ({"cleanup.policy": "nope"}, "cleanup.policy"),
    ({"compression.type": "brotli"}, "compression.type"),
    ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
    ({"unclean.leader.election.enable": "maybe"}, "unclean.leader.election.enable"),
])
def test_topic_override_validation(overrides, fragment):
    with pytest.raises(ConfigError) as e:
        LogConfig.validate_overrides(overrides)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_every_key_has_doc_and_valid_default():
    for key in BROKER_CONFIG.values():
        assert key.doc
        assert key.name.lower() == key.name
