"""Topic name rules (Kafka's Topic.validate) and topic config validation."""
import pytest

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.zk.topics import (COLLISION_WARNING, TOPIC_CONFIG_NAMES, collision_warning, colliding_topics,
                               has_collision, is_internal, validate_topic_config, validate_topic_name)


@pytest.mark.parametrize("name", ["a", "topic-1", "Topic_2.x", "a" * 249, "__consumer_offsets", "...", "-"])
def test_valid_names(name):
    validate_topic_name(name)


@pytest.mark.parametrize("name,fragment", [
    ("", "can't be empty"),
    (".", 'cannot be "." or ".."'),
    ("..", 'cannot be "." or ".."'),
    ("a" * 250, "can't be longer than 249 characters"),
    ("bad name", "contains a character other than ASCII alphanumerics"),
    ("t/x", "contains a character other than"),
    ("é", "contains a character other than"),
    ("a\n", "contains a character other than"),
])
def test_invalid_names(name, fragment):
    with pytest.raises(KafkaError) as info:
        validate_topic_name(name)
    assert info.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert fragment in info.value.message
    assert "\n" not in info.value.message.replace(name, "")


def test_collisions():
    assert has_collision("a.b", "a_b")
    assert not has_collision("a.b", "a-b")
    assert colliding_topics("a_b", ["a.b", "a_b", "x"]) == ["a.b"]
    assert collision_warning("a.b") == COLLISION_WARNING
    assert collision_warning("ab") is None
    assert is_internal("__consumer_offsets") and not is_internal("consumer_offsets")


def test_config_names_are_kafka_28_topic_configs():
    assert len(TOPIC_CONFIG_NAMES) == 26
    assert {"cleanup.policy", "retention.ms", "min.insync.replicas", "segment.bytes"} <= TOPIC_CONFIG_NAMES


def test_valid_configs():
    validate_topic_config({"retention.ms": "-1", "cleanup.policy": "compact,delete", "preallocate": "TRUE",
                           "min.cleanable.dirty.ratio": "0.5", "compression.type": "lz4",
                           "message.timestamp.type": "LogAppendTime", "retention.bytes": "-1"})


@pytest.mark.parametrize("config,fragment", [
    ({"foo": "1"}, "Unknown topic config name: foo"),
    ({"retention.ms": "abc"}, "Not a number of type LONG"),
    ({"segment.bytes": str(2**31)}, "Not a number of type INT"),
    ({"min.insync.replicas": "0"}, "Value must be at least 1"),
    ({"cleanup.policy": "shred"}, "String must be one of: compact, delete"),
    ({"compression.type": "brotli"}, "String must be one of"),
    ({"preallocate": "yes"}, "either true or false"),
])
def test_invalid_configs(config, fragment):
    with pytest.raises(KafkaError) as info:
        validate_topic_config(config)
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert fragment in info.value.message
