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


def test_listener_keystores_connection_limits_and_cleaner_backoff_are_dynamic():
    values = dynamic.validate({"listener.name.ssl.ssl.keystore.location": "/k.pem", "ssl.keystore.type": "PEM",
                               "listener.name.ext.max.connections": "3", "max.connections.per.ip": "5",
                               "log.cleaner.backoff.ms": "100"}, broker_level=True)
    assert values["listener.name.ext.max.connections"] == 3 and values["max.connections.per.ip"] == 5
    assert dynamic.validate({"max.connections": "9", "listener.name.ext.max.connections": "3"}, broker_level=False)
    with pytest.raises(ConfigError, match="broker id must be specified: listener.name.ssl.ssl.keystore.location"):
        dynamic.validate({"listener.name.ssl.ssl.keystore.location": "/k.pem"}, broker_level=False)
    with pytest.raises(ConfigError, match="Cannot update these configs dynamically: listener.name.ssl.ssl.client.auth"):
        dynamic.validate({"listener.name.ssl.ssl.client.auth": "required"}, broker_level=True)
    with pytest.raises(ConfigError, match="Cannot update these configs dynamically: log.cleaner.threads"):
        dynamic.validate({"log.cleaner.threads": "2"}, broker_level=True)


def test_password_configs_are_stored_encoded_and_decoded_with_the_old_secret_while_rotating():
    static = KafkaConfig({"zookeeper.connect": "x:1", "password.encoder.secret": "s1"})
    plain = {"listener.name.ssl.ssl.keystore.password": "pw-1", "max.connections": "7"}
    stored = dynamic.encode_passwords(static, plain)
    assert stored["max.connections"] == "7" and "pw-1" not in stored["listener.name.ssl.ssl.keystore.password"]
    assert dynamic.decode_passwords(static, stored) == plain
    rotated = KafkaConfig({"zookeeper.connect": "x:1", "password.encoder.secret": "s2",
                           "password.encoder.old.secret": "s1"})
    assert dynamic.decode_passwords(rotated, stored) == plain
    wrong = KafkaConfig({"zookeeper.connect": "x:1", "password.encoder.secret": "s3"})
    with pytest.raises(ConfigError, match="could not be decoded"):
        dynamic.decode_passwords(wrong, stored)
    with pytest.raises(ConfigError, match="Password encoder secret not configured"):
        dynamic.encode_passwords(KafkaConfig({"zookeeper.connect": "x:1"}), plain)


def test_the_password_encoder_is_salted_and_refuses_tampering():
    from odradek.zk.password_encoder import PasswordEncoder, PasswordEncoderError
    enc = PasswordEncoder("secret")
    a, b = enc.encode("same"), enc.encode("same")
    assert a != b and enc.decode(a) == enc.decode(b) == "same"
    fields = dict(p.split(":", 1) for p in a.split(","))
    assert (fields["keyFactoryAlgorithm"], fields["cipherAlgorithm"], fields["keyLength"], fields["iterations"]) == (
        "PBKDF2WithHmacSHA512", "AES/CBC/PKCS5Padding", "128", "4096")
    with pytest.raises(PasswordEncoderError):
        PasswordEncoder("other").decode(a)
    with pytest.raises(PasswordEncoderError):
        enc.decode("not an encoded password")
    with pytest.raises(PasswordEncoderError, match="only PBKDF2WithHmacSHA512"):
        PasswordEncoder("s", key_factory="PBKDF2WithHmacSHA1")



def test_the_tools_password_suffixes_cover_the_brokers_dynamic_password_configs():
    """odradek configs --zookeeper encrypts by name ending, as Kafka's isPasswordConfig does (zk/
    cannot import the broker's table): every dynamically updatable PASSWORD config ends with a
    suffix, each suffix names a PASSWORD config, and no other config ends with one."""
    from odradek.broker.config.kafka_config import BROKER_CONFIG
    from odradek.broker.config.types import PASSWORD
    from odradek.zk.password_encoder import PASSWORD_SUFFIXES

    dynamic_passwords = {n for n in BROKER_CONFIG if dynamic.is_password(n)}
    dynamic_passwords |= {f"listener.name.internal.{n}" for n in dynamic_passwords}
    assert dynamic_passwords and all(n.endswith(PASSWORD_SUFFIXES) for n in dynamic_passwords)
    assert all(BROKER_CONFIG[s].type == PASSWORD for s in PASSWORD_SUFFIXES if s in BROKER_CONFIG)
    assert {s for s in PASSWORD_SUFFIXES if s not in BROKER_CONFIG} == {"password"}
    assert not [n for n, k in BROKER_CONFIG.items() if n.endswith(PASSWORD_SUFFIXES) and k.type != PASSWORD]
