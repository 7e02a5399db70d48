"""SCRAM credentials as ZooKeeper keeps them: the broker's salted-password -> stored/server key
conversion checked against RFC 7677's published SCRAM-SHA-256 exchange, Kafka's credential
string, user-name sanitizing as Kafka's Sanitizer does it, and describe never showing keys."""
import base64
import hashlib
import hmac
import re

import pytest

from odradek.broker.security.scram_credentials import iterations_problem
from odradek.protocol.scram import ScramCredential, salted_password
from odradek.zk import config_entities as ce

# RFC 7677 section 3: user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST_BARE = "n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL_BARE = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_PROOF = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_SIGNATURE = base64.b64decode("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
AUTH_MESSAGE = f"{RFC_CLIENT_FIRST_BARE},{RFC_SERVER_FIRST},{RFC_CLIENT_FINAL_BARE}".encode()


def _rfc_credential() -> ScramCredential:
    salted = salted_password("SCRAM-SHA-256", "pencil", RFC_SALT, 4096)
    return ScramCredential.from_salted_password("SCRAM-SHA-256", RFC_SALT, salted, 4096)


def test_stored_key_verifies_the_rfc_7677_client_proof():
    cred = _rfc_credential()
    client_signature = hmac.new(cred.stored_key, AUTH_MESSAGE, "sha256").digest()
    client_key = bytes(a ^ b for a, b in zip(RFC_PROOF, client_signature))
    assert hashlib.sha256(client_key).digest() == cred.stored_key


def test_server_key_produces_the_rfc_7677_server_signature():
    cred = _rfc_credential()
    assert hmac.new(cred.server_key, AUTH_MESSAGE, "sha256").digest() == RFC_SERVER_SIGNATURE


def test_a_wrong_password_does_not_verify_the_rfc_proof():
    salted = salted_password("SCRAM-SHA-256", "pencil!", RFC_SALT, 4096)
    cred = ScramCredential.from_salted_password("SCRAM-SHA-256", RFC_SALT, salted, 4096)
    assert hmac.new(cred.server_key, AUTH_MESSAGE, "sha256").digest() != RFC_SERVER_SIGNATURE


@pytest.mark.parametrize("mechanism, size", [("SCRAM-SHA-256", 32), ("SCRAM-SHA-512", 64)])
def test_the_api_path_and_the_cli_path_store_the_same_credential(mechanism, size):
    salt = b"0123456789abcdef"
    via_api = ScramCredential.from_salted_password(mechanism, salt, salted_password(mechanism, "s3cret", salt, 8192), 8192)
    via_cli = ScramCredential.create(mechanism, "s3cret", 8192, salt=salt)
    assert via_api == via_cli
    assert len(via_api.stored_key) == len(via_api.server_key) == size


def test_the_znode_value_is_kafkas_credential_string_without_the_password():
    value = ce.scram_config_value("SCRAM-SHA-512", 8192, "alice-secret")
    match = re.fullmatch(r"salt=([A-Za-z0-9+/=]+),stored_key=([A-Za-z0-9+/=]+),server_key=([A-Za-z0-9+/=]+),"
                         r"iterations=8192", value)
    assert match, value
    assert len(base64.b64decode(match.group(2))) == 64
    assert "alice-secret" not in value
    assert ScramCredential.from_config(value).iterations == 8192


@pytest.mark.parametrize("iterations, fragment", [(4095, "less than the minimum 4096"),
                                                  (16385, "more than the maximum 16384")])
def test_iterations_outside_kafkas_range_are_refused(iterations, fragment):
    with pytest.raises(ce.InvalidConfig, match=fragment):
        ce.scram_config_value("SCRAM-SHA-256", iterations, "pw")
    assert iterations_problem(iterations) in ("Too few iterations", "Too many iterations")
    assert iterations_problem(4096) is None and iterations_problem(16384) is None


@pytest.mark.parametrize("spec, expected", [
    ("iterations=8192,password=alice-secret", (8192, "alice-secret")),
    ("password=alice-secret", (4096, "alice-secret")),
    ("password=a,b=c", (4096, "a,b=c")),
    ("iterations=-1,password=x", (4096, "x")),
])
def test_scram_spec_parsing(spec, expected):
    assert ce.parse_scram_spec("SCRAM-SHA-256", spec) == expected


def test_a_malformed_scram_spec_is_refused_without_echoing_it():
    with pytest.raises(ce.InvalidConfig) as info:
        ce.parse_scram_spec("SCRAM-SHA-256", "iterations=8192,pass=hunter2")
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize("name, stored", [
    ("alice", "alice"), ("a b", "a%20b"), ("a*b", "a%2Ab"), ("a+b", "a%2Bb"), ("é", "%C3%A9"),
    ("CN=x,O=y", "CN%3Dx%2CO%3Dy"), ("a.b-c_d", "a.b-c_d"), ("~x", "%7Ex"),
])
def test_user_names_are_sanitized_as_kafkas_sanitizer_does(name, stored):
    assert ce.sanitize(name) == stored
    assert ce.desanitize(stored) == name


def test_describe_shows_iterations_only():
    value = ce.scram_config_value("SCRAM-SHA-256", 8192, "pw")
    assert ce.describe_value("SCRAM-SHA-256", value) == "iterations=8192"
    assert ce.describe_value("producer_byte_rate", "1024") == "1024"


@pytest.mark.parametrize("config, fragment", [
    ({"producer_byte_rate": "fast"}, "Not a number of type LONG"),
    ({"retention.ms": "1"}, "Unknown Dynamic Configuration: retention.ms"),
    ({"SCRAM-SHA-256": "x"}, "Unknown Dynamic Configuration: SCRAM-SHA-256"),
])
def test_client_quota_configs_are_checked(config, fragment):
    with pytest.raises(ce.InvalidConfig, match=fragment):
        ce.validate_quota_configs("clients", config, allow_scram=False)
