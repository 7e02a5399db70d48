"""Kafka's JAAS syntax: login files, sasl.jaas.config values and KAFKA_OPTS system properties."""
import pytest

from odradek.protocol.jaas import (JaasError, LoginModule, java_system_properties, kafka_opts_properties,
                             load_jaas_file, login_config_file, parse_jaas_config, parse_jaas_text,
                             parse_login_modules)

KAFKA_JAAS = """
// the broker's file, as Kafka's security docs write it
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin"
    password="admin-secret"
    user_admin="admin-secret"
    user_alice="alice-secret";
    org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED;
};

/* ZooKeeper login
   (DIGEST-MD5) */
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required username="kafka" password="kafka-secret";
};
"""


def test_a_kafka_jaas_file_parses_into_sections_modules_flags_and_ordered_options():
    sections = parse_jaas_text(KAFKA_JAAS)
    assert list(sections) == ["KafkaServer", "Client"]
    plain, scram = sections["KafkaServer"]
    assert plain == LoginModule("org.apache.kafka.common.security.plain.PlainLoginModule", "required",
                                {"username": "admin", "password": "admin-secret",
                                 "user_admin": "admin-secret", "user_alice": "alice-secret"})
    assert list(plain.options) == ["username", "password", "user_admin", "user_alice"]
    assert scram.flag == "required" and scram.options == {}
    (client,) = sections["Client"]
    assert client.class_name == "org.apache.zookeeper.server.auth.DigestLoginModule"
    assert client.options == {"username": "kafka", "password": "kafka-secret"}


@pytest.mark.parametrize("flag", ["required", "requisite", "sufficient", "optional", "Optional"])
def test_every_control_flag_is_accepted_in_any_case(flag):
    assert parse_jaas_config(f"a.B {flag};").flag == flag.lower()


def test_quoted_values_keep_spaces_semicolons_braces_and_escapes_and_bare_words_are_values():
    module = parse_jaas_config('m.M required a="x; y {z}" b="say \\"hi\\"" c=bare-word_1.2 d="";')
    assert module.options == {"a": "x; y {z}", "b": 'say "hi"', "c": "bare-word_1.2", "d": ""}


def test_a_sasl_jaas_config_value_is_exactly_one_login_module():
    value = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
             'username="alice" password="alice-secret";')
    assert parse_jaas_config(value) == LoginModule("org.apache.kafka.common.security.scram.ScramLoginModule",
                                                   "required", {"username": "alice", "password": "alice-secret"})
    assert len(parse_login_modules(value + " other.Module optional;")) == 2
    with pytest.raises(JaasError, match="contains 2 login modules, should be 1 module"):
        parse_jaas_config(value + " other.Module optional;")
    with pytest.raises(JaasError, match="contains 0 login modules"):
        parse_jaas_config("  // nothing\n")


@pytest.mark.parametrize("text, message", [
    ("Client { m.M required username=\"k\" };", "expected an option key=value or ';'"),
    ("Client { m.M required username=\"k\"; }", "expected ';' after the '}' of section Client"),
    ("Client { m.M mandatory; };", "invalid control flag 'mandatory'"),
    ("Client { m.M required username=; };", "value not specified for key 'username'"),
    ("Client { m.M required username; };", "value not specified for key 'username'"),
    ("Client { m.M required password=\"open };", "unterminated quoted string starting on line 1"),
    ("Client m.M required;", "expected '{' after section name Client"),
    ("Client { m.M; };", "expected a control flag"),
    ("/* never closed", "unterminated comment"),
    ("A { m.M required; };\nA { m.M required; };", "line 2: section 'A' appears twice"),
])
def test_bad_syntax_is_one_line_naming_the_origin_and_what_is_wrong(text, message):
    with pytest.raises(JaasError) as err:
        parse_jaas_text(text, "JAAS file /etc/kafka/jaas.conf")
    assert message in str(err.value)
    assert str(err.value).startswith("JAAS file /etc/kafka/jaas.conf")
    assert "\n" not in str(err.value)


def test_load_jaas_file_names_a_missing_or_bad_file(tmp_path):
    missing = tmp_path / "nope.conf"
    with pytest.raises(JaasError, match=f"JAAS file {missing} does not exist"):
        load_jaas_file(missing)
    bad = tmp_path / "bad.conf"
    bad.write_text("Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"k\"\n")
    with pytest.raises(JaasError, match=f"JAAS file {bad}: .*the text ended"):
        load_jaas_file(bad)
    good = tmp_path / "good.conf"
    good.write_text(KAFKA_JAAS)
    assert set(load_jaas_file(good)) == {"KafkaServer", "Client"}


def test_kafka_opts_system_properties_and_the_login_config_file():
    opts = ("-Xmx1G -Djava.security.auth.login.config=/etc/kafka/jaas.conf "
            "'-Dzookeeper.sasl.clientconfig=ZkClient' -Dflag -XX:+UseG1GC")
    props = java_system_properties(opts)
    assert props == {"java.security.auth.login.config": "/etc/kafka/jaas.conf",
                     "zookeeper.sasl.clientconfig": "ZkClient", "flag": ""}
    assert login_config_file(props) == "/etc/kafka/jaas.conf"
    # Java's "==" form (replace, rather than add to, the configured login files)
    assert login_config_file(java_system_properties("-Djava.security.auth.login.config==/x.conf")) == "/x.conf"
    assert login_config_file({}) is None
    assert kafka_opts_properties({"KAFKA_OPTS": "-Da=b"}) == {"a": "b"}
    assert kafka_opts_properties({}) == {}
    with pytest.raises(JaasError, match="KAFKA_OPTS cannot be split"):
        java_system_properties("-Da='unclosed")
