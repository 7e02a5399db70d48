"""SASL and TLS building blocks without a network: SCRAM and PLAIN exchanges, the per-connection
authenticator's state machine, principal mapping rules, and keystore loading errors."""
from __future__ import annotations

import pytest
from twisted.internet import defer

from odradek.broker.security import tls
from odradek.broker.security.principal import SslPrincipalMapper
from odradek.broker.security.sasl_server import SaslAuthenticator, SaslFailure
from odradek.protocol.apis import api_versions, metadata, sasl_authenticate, sasl_handshake
from odradek.protocol.errors import ErrorCode
from odradek.protocol.header import decode_response, encode_request
from odradek.protocol.sasl import SaslClient
from odradek.protocol.scram import ScramClient, ScramCredential, ScramError, ScramServer
from odradek.testing.certificates import make_tls_files

MECHS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def _exchange(server: ScramServer, client: ScramClient) -> None:
    final = server.step(client.first())
    server_final = server.step(client.step(final))
    assert client.step(server_final) == b""


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_authenticates_the_right_password_only(mechanism):
    cred = ScramCredential.create(mechanism, "secret", 4096)
    server = ScramServer(mechanism, lambda user: cred if user == "al,ice=" else None)
    _exchange(server, ScramClient(mechanism, "al,ice=", "secret"))
    assert server.complete and server.username == "al,ice="
    wrong = ScramServer(mechanism, lambda user: cred)
    client = ScramClient(mechanism, "al,ice=", "wrong")
    final = wrong.step(client.first())
    with pytest.raises(ScramError, match="Invalid user credentials"):
        wrong.step(client.step(final))
    assert not wrong.complete


def test_scram_unknown_user_and_replayed_steps_are_refused():
    server = ScramServer("SCRAM-SHA-256", lambda user: None)
    with pytest.raises(ScramError):
        server.step(ScramClient("SCRAM-SHA-256", "nobody", "x").first())
    with pytest.raises(ScramError):
        server.step(b"anything")   # a server that failed stays failed


def test_scram_final_message_must_carry_the_servers_nonce():
    """Kafka checks that the client's final nonce ends with the server's (librdkafka <= 2.0,
    Debian's kcat, repeats its own part in front: tests/compat covers that end to end)."""
    cred = ScramCredential.create("SCRAM-SHA-256", "pw", 4096)
    server = ScramServer("SCRAM-SHA-256", lambda user: cred)
    server.step(b"n,,n=u,r=abc")
    with pytest.raises(ScramError, match="nonce"):
        server.step(b"c=biws,r=somethingelse,p=AAAA")


def test_credential_string_round_trips_in_kafkas_format():
    cred = ScramCredential.create("SCRAM-SHA-512", "pw", 8192, salt=b"salty")
    text = cred.to_config()
    assert text.startswith("salt=c2FsdHk=,stored_key=") and text.endswith(",iterations=8192")
    assert ScramCredential.from_config(text) == cred


@pytest.mark.parametrize("mechanism", MECHS)
def test_sasl_client_drives_every_mechanism(mechanism):
    users = {"alice": "pw"}
    cred = ScramCredential.create(mechanism, "pw") if mechanism != "PLAIN" else None
    auth = _authenticator(mechanism, users, cred)
    client = SaslClient(mechanism, "alice", "pw")
    assert _handshake(auth, mechanism, 1) == ErrorCode.NONE
    token: bytes | None = client.first_token()
    while token is not None:
        code, out = _authenticate(auth, token)
        assert code == ErrorCode.NONE
        token = client.next_token(out)
    assert auth.complete and auth.principal == "User:alice"


def _authenticator(mechanism: str, users: dict[str, str], cred: ScramCredential | None) -> SaslAuthenticator:
    def lookup(mech: str, user: str) -> defer.Deferred:
        return defer.succeed(cred if user in users else None)
    return SaslAuthenticator([mechanism], users, lookup, lambda frame: b"passthrough")


def _result(value):
    if isinstance(value, defer.Deferred):
        box: list = []
        value.addBoth(box.append)
        return box[0]
    return value


def _handshake(auth: SaslAuthenticator, mechanism: str, version: int) -> int:
    out = _result(auth.receive(encode_request(sasl_handshake, version, 1, "t", {"mechanism": mechanism})))
    return decode_response(sasl_handshake, version, out)[1].error_code


def _authenticate(auth: SaslAuthenticator, token: bytes) -> tuple[int, bytes]:
    out = _result(auth.receive(encode_request(sasl_authenticate, 1, 2, "t", {"auth_bytes": token})))
    body = decode_response(sasl_authenticate, 1, out)[1]
    return body.error_code, bytes(body.auth_bytes)


def test_wrong_plain_password_fails_with_58_and_the_connection_must_close():
    auth = _authenticator("PLAIN", {"alice": "pw"}, None)
    _handshake(auth, "PLAIN", 1)
    code, _ = _authenticate(auth, b"\x00alice\x00nope")
    assert code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert auth.failed and auth.principal is None and not auth.complete


def test_unknown_mechanism_is_answered_with_33_and_the_enabled_list():
    auth = _authenticator("PLAIN", {}, None)
    assert _handshake(auth, "GSSAPI", 1) == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert auth.failed


def test_only_apiversions_and_the_handshake_come_before_authentication():
    auth = _authenticator("PLAIN", {"alice": "pw"}, None)
    assert auth.receive(encode_request(api_versions, 3, 1, "t", {"client_software_name": "x",
                                                                  "client_software_version": "1"})) == b"passthrough"
    with pytest.raises(SaslFailure):
        auth.receive(encode_request(metadata, 1, 2, "t", {"topics": None}))
    auth = _authenticator("PLAIN", {"alice": "pw"}, None)
    _handshake(auth, "PLAIN", 1)
    with pytest.raises(SaslFailure):    # a second handshake
        auth.receive(encode_request(sasl_handshake, 1, 3, "t", {"mechanism": "PLAIN"}))


def test_a_v0_handshake_takes_bare_tokens():
    auth = _authenticator("PLAIN", {"alice": "pw"}, None)
    assert _handshake(auth, "PLAIN", 0) == ErrorCode.NONE
    assert _result(auth.receive(b"\x00alice\x00pw")) == b""
    assert auth.principal == "User:alice"
    bad = _authenticator("PLAIN", {"alice": "pw"}, None)
    _handshake(bad, "PLAIN", 0)
    assert _result(bad.receive(b"\x00alice\x00no")) is None and bad.failed


def test_principal_mapping_rules_as_kafka_writes_them():
    dn = "CN=client,OU=test,O=odradek"
    assert SslPrincipalMapper("DEFAULT").name(dn) == dn
    rules = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/U,DEFAULT")
    assert rules.name(dn) == "CLIENT@TEST"
    assert rules.name("CN=svc,OU=ServiceUsers,O=x") == "svc"
    with pytest.raises(ValueError, match="ssl.principal.mapping.rules"):
        SslPrincipalMapper("RULE:broken")


def test_keystore_problems_name_the_file(tmp_path):
    files = make_tls_files(tmp_path)

    def settings(**kw):
        base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": None, "ssl.key.password": None,
                "ssl.keystore.certificate.chain": None, "ssl.keystore.key": None, "ssl.keystore.password": None}
        base.update(kw)
        return base.__getitem__
    assert tls.load_keystore(settings(**{"ssl.keystore.location": str(files.broker.keystore)})).certificate
    p12 = settings(**{"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(files.broker.p12),
                      "ssl.keystore.password": files.broker.password})
    assert tls.load_keystore(p12).key
    missing = tmp_path / "nope.pem"
    with pytest.raises(tls.TlsConfigError, match=str(missing)):
        tls.load_keystore(settings(**{"ssl.keystore.location": str(missing)}))
    with pytest.raises(tls.TlsConfigError, match="JKS is not supported"):
        tls.load_keystore(settings(**{"ssl.keystore.type": "JKS", "ssl.keystore.location": str(missing)}))
    mismatched = tmp_path / "mismatched.pem"
    mismatched.write_bytes(files.broker.cert.read_bytes() + files.client.key.read_bytes())
    with pytest.raises(tls.TlsConfigError, match="does not match"):
        tls.load_keystore(settings(**{"ssl.keystore.location": str(mismatched)}))
    inline = settings(**{"ssl.keystore.certificate.chain": files.broker.cert.read_text(),
                         "ssl.keystore.key": files.broker.key.read_text()})
    assert tls.load_keystore(inline).certificate


def test_listener_sasl_settings_come_from_kafkas_jaas_sources(tmp_path, monkeypatch):
    from odradek.broker.config.kafka_config import KafkaConfig
    from odradek.broker.security.listeners import InterBrokerSecurity, ListenerSecurity, SecurityConfigError
    jaas_file = tmp_path / "jaas.conf"
    jaas_file.write_text('sasl_plaintext.KafkaServer {\n org.apache.kafka.common.security.plain.PlainLoginModule '
                         'required username="admin" password="a" user_admin="a" user_bob="b";\n};\n')
    base = {"zookeeper.connect": "127.0.0.1:1", "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "security.inter.broker.protocol": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN"}
    monkeypatch.setenv("KAFKA_OPTS", f"-Xmx1g -Djava.security.auth.login.config={jaas_file}")
    cfg = KafkaConfig(base)
    sasl = ListenerSecurity.for_listener(cfg, "SASL_PLAINTEXT").sasl
    assert sasl is not None and sasl.plain_users == {"admin": "a", "bob": "b"}
    assert InterBrokerSecurity.from_config(cfg).username == "admin"
    # the listener's own sasl.jaas.config wins over the file
    inline = KafkaConfig({**base, "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                          'org.apache.kafka.common.security.plain.PlainLoginModule required '
                          'username="x" password="y" user_x="y";'})
    assert ListenerSecurity.for_listener(inline, "SASL_PLAINTEXT").sasl.plain_users == {"x": "y"}
    monkeypatch.delenv("KAFKA_OPTS")
    with pytest.raises(SecurityConfigError, match="no JAAS entry"):
        ListenerSecurity.for_listener(cfg, "SASL_PLAINTEXT")


def test_gssapi_is_refused_with_one_line():
    from odradek.broker.config.kafka_config import ConfigError, KafkaConfig
    with pytest.raises(ConfigError, match="GSSAPI"):
        KafkaConfig({"zookeeper.connect": "127.0.0.1:1", "listeners": "SASL_SSL://127.0.0.1:0",
                     "security.inter.broker.protocol": "SASL_SSL"})
