"""Dynamic broker configs (broker/config/dynamic.py) and how a broker applies them
(ConfigChangeListener.apply_broker_config): Kafka's names, levels and messages."""
from __future__ import annotations

import pytest
from broker_fixtures import Broker

from odradek.broker.config import dynamic
from odradek.broker.config.kafka_config import ConfigError, KafkaConfig
from odradek.broker.config_changes import ConfigChangeListener


def test_names_levels_and_values():
    assert dynamic.validate({"log.retention.ms": "1000", "min.insync.replicas": "2"}, broker_level=False) == {
        "log.retention.ms": 1000, "min.insync.replicas": 2}
    assert dynamic.validate({"follower.replication.throttled.rate": "5"}, broker_level=True) == {
        "follower.replication.throttled.rate": 5}
    with pytest.raises(ConfigError, match="Cannot update these configs dynamically: log.dirs, num.io.threads"):
        dynamic.validate({"num.io.threads": "4", "log.dirs": "/x"}, broker_level=True)
    with pytest.raises(ConfigError, match="Cannot update these configs dynamically: log.message.format.version"):
        dynamic.validate({"log.message.format.version": "2.8"}, broker_level=True)
    with pytest.raises(ConfigError, match="broker id must be specified: leader.replication.throttled.rate"):
        dynamic.validate({"leader.replication.throttled.rate": "5"}, broker_level=False)
    with pytest.raises(ConfigError, match="Invalid value"):
        dynamic.validate({"log.segment.bytes": "big"}, broker_level=False)


def test_the_broker_level_wins_over_the_default_which_wins_over_server_properties():
    static = KafkaConfig({"zookeeper.connect": "x:1", "log.retention.hours": "1", "message.max.bytes": "100"})
    eff = dynamic.effective_config(static, {"log.retention.ms": "5000", "message.max.bytes": "200"},
                                   {"message.max.bytes": "300", "leader.replication.throttled.rate": "1"})
    assert (eff.retention_ms, eff["message.max.bytes"]) == (5000, 300)
    assert dynamic.effective_config(static, {}, {}) is static


@pytest.fixture
def listener(tmp_path):
    b = Broker(tmp_path, broker_id=1)
    b.lead("t")
    try:
        yield b, ConfigChangeListener(None, b.clock, None, b.ctx)
    finally:
        b.close()


def test_applied_to_local_logs_without_their_own_override(listener):
    b, changes = listener
    [lg] = b.log_manager.all_logs()
    changes.apply_topic_config("t", {"retention.ms": "123"})
    changes.apply_broker_config({"message.max.bytes": "2000", "retention.ms": "ignored"},
                                {"log.retention.ms": "999", "leader.replication.throttled.rate": "77"})
    assert lg.config["max.message.bytes"] == 2000 and lg.config["retention.ms"] == 123   # the topic's own wins
    assert b.ctx.config["message.max.bytes"] == 2000 and b.ctx.static_config is None
    assert b.rm.leader_quota.limit == 77 and not b.rm.follower_quota.enabled
    changes.apply_broker_config({}, {"log.segment.bytes": "tiny"})       # invalid: nothing changes
    assert lg.config["max.message.bytes"] == 2000 and b.rm.leader_quota.limit == 77
    changes.apply_broker_config({}, {})                                  # all removed: back to server.properties
    assert lg.config["max.message.bytes"] == b.config["message.max.bytes"] and not b.rm.leader_quota.enabled
