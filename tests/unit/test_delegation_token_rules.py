"""Delegation tokens (KIP-48) without a cluster: the four codecs, Kafka's znode JSON, the HMAC,
the token cache's rules (renew/expire order of checks, describe filter), the SCRAM
``tokenauth=true`` login and the handlers' refusals (64 on PLAINTEXT, 61 without a secret key)."""
from __future__ import annotations

import base64
import hashlib
import hmac as std_hmac
import json

import pytest
from twisted.internet import defer

from broker_fixtures import Broker, call, make_config
from odradek.broker.apis import (create_delegation_token, describe_delegation_token, expire_delegation_token,
                                 renew_delegation_token)
from odradek.broker.security.delegation_tokens import (DelegationTokenManager, TokenCache, filter_token,
                                                       scram_credentials)
from odradek.broker.security.sasl_server import SaslAuthenticator
from odradek.protocol.apis import sasl_authenticate, sasl_handshake
from odradek.protocol.apis import create_delegation_token as create_api
from odradek.protocol.apis import describe_delegation_token as describe_api
from odradek.protocol.delegation_token import TokenInformation, create_hmac, new_token_id
from odradek.protocol.errors import ErrorCode
from odradek.protocol.header import decode_response, encode_request
from odradek.protocol.sasl import SaslClient
from odradek.zk.token_znodes import DelegationTokenChangeNotificationZNode, DelegationTokenInfoZNode

INFO = TokenInformation("tok-1", "User:alice", ("User:bob",), 1000, 9000, 5000)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_codecs_round_trip_every_version(version):
    body = {"renewers": [{"principal_type": "User", "principal_name": "bob"}], "max_lifetime_ms": -1}
    assert create_api.Request.decode(create_api.Request.encode(body, version), version).renewers[0] \
        .principal_name == "bob"
    for owners in (None, [{"principal_type": "User", "principal_name": "alice"}]):
        req = describe_api.Request.decode(describe_api.Request.encode({"owners": owners}, version), version)
        assert (req.owners is None) == (owners is None)


def test_znode_json_is_kafkas_and_reads_back():
    data = DelegationTokenInfoZNode.encode(INFO)
    assert json.loads(data) == {"version": 1, "owner": "User%3Aalice", "renewers": ["User%3Abob"],
                                "issueTimestamp": 1000, "maxTimestamp": 9000, "expiryTimestamp": 5000,
                                "tokenId": "tok-1"}
    assert DelegationTokenInfoZNode.path("tok-1") == "/delegation_token/tokens/tok-1"
    assert DelegationTokenInfoZNode.decode(data) == INFO
    assert DelegationTokenChangeNotificationZNode.encode("tok-1") == b"tok-1"
    with pytest.raises(ValueError):
        DelegationTokenInfoZNode.decode(b'{"version":9}')


def test_hmac_is_hmac_sha512_of_the_token_id_and_ids_are_kafkas_shape():
    assert create_hmac("tok-1", "key") == std_hmac.new(b"key", b"tok-1", hashlib.sha512).digest()
    token_id = new_token_id()
    assert len(token_id) == 22 and "=" not in token_id and token_id != new_token_id()


def test_describe_filter_is_kafkas():
    def nobody(_token_id: str) -> bool:
        return False
    assert filter_token("User:alice", None, INFO, nobody)          # owner
    assert filter_token("User:bob", None, INFO, nobody)            # renewer
    assert not filter_token("User:carol", None, INFO, nobody)      # neither, no Describe
    assert filter_token("User:carol", None, INFO, lambda t: t == "tok-1")
    assert filter_token("User:alice", ["User:bob"], INFO, nobody)  # an owner filter matches renewers too
    assert not filter_token("User:alice", ["User:carol"], INFO, nobody)
    assert not filter_token("User:alice", [], INFO, nobody)


def _manager(tmp_path, now: list[int], **overrides) -> DelegationTokenManager:
    manager = DelegationTokenManager(make_config(tmp_path, **overrides), None, lambda fn, *a: defer.maybeDeferred(fn, *a), None,
                                     now_ms=lambda: now[0])
    return manager


def _run(coro):
    box: list = []
    defer.Deferred.fromCoroutine(coro).addBoth(box.append)
    return box[0]


class MemoryStore:
    """Stands in for ZooKeeper in this sans-IO test only (the integration tests use a real one)."""
    def __init__(self):
        self.tokens: dict[str, TokenInformation] = {}

    def put(self, info):
        self.tokens[info.token_id] = info

    def delete(self, token_id):
        self.tokens.pop(token_id, None)


def test_create_renew_expire_follow_kafkas_rules(tmp_path):
    now = [1_000_000]
    m = _manager(tmp_path, now, delegation_token_secret_key="k", delegation_token_max_lifetime_ms=10_000,
                 delegation_token_expiry_time_ms=4_000)
    m.store = MemoryStore()
    code, token = _run(m.create("User:alice", ["User:bob"], -1))
    assert code == ErrorCode.NONE and token.hmac == create_hmac(token.info.token_id, "k")
    assert (token.info.issue_timestamp, token.info.expiry_timestamp, token.info.max_timestamp) == \
        (1_000_000, 1_004_000, 1_010_000)
    assert m.store.tokens[token.info.token_id] == token.info
    assert _run(m.renew("User:carol", token.hmac, 1000)) == (ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, -1)
    assert _run(m.renew("User:bob", b"nope", 1000)) == (ErrorCode.DELEGATION_TOKEN_NOT_FOUND, -1)
    assert _run(m.renew("User:bob", token.hmac, 99_999)) == (ErrorCode.NONE, 1_010_000)   # capped at max
    assert _run(m.expire("User:alice", token.hmac, 500)) == (ErrorCode.NONE, 1_000_500)
    assert m.scram_login("SCRAM-SHA-256", token.info.token_id)[1] == "User:alice"
    now[0] = 1_000_501
    assert m.scram_login("SCRAM-SHA-256", token.info.token_id) is None     # past its expiry: refused
    assert _run(m.renew("User:alice", token.hmac, 1000)) == (ErrorCode.DELEGATION_TOKEN_EXPIRED, -1)
    m.expire_tokens()
    assert m.store.tokens == {} and m.describe(lambda _i: True) == []
    code, short = _run(m.create("User:alice", [], 2_000))
    assert short.info.max_timestamp == now[0] + 2_000 and short.info.expiry_timestamp == now[0] + 2_000
    assert _run(m.expire("User:alice", short.hmac, -1)) == (ErrorCode.NONE, now[0])
    assert m.scram_login("SCRAM-SHA-512", short.info.token_id) is None and m.store.tokens == {}


def test_tokens_are_disabled_without_a_secret_key_and_master_key_is_an_alias(tmp_path):
    now = [0]
    assert not _manager(tmp_path, now).enabled
    assert _run(_manager(tmp_path, now).create("User:a", [], -1)) == (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, None)
    assert _manager(tmp_path, now, delegation_token_master_key="old").cache.key == "old"
    assert _manager(tmp_path, now, delegation_token_master_key="old",
                    delegation_token_secret_key="new").cache.key == "new"


def _handle(broker, handler, body, listener="PLAINTEXT", version=2):
    return call(broker, handler, version, body, listener=listener)


def test_handlers_refuse_plaintext_with_64_and_answer_61_without_a_key(tmp_path):
    broker = Broker(tmp_path, listeners="PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
                    sasl_enabled_mechanisms="SCRAM-SHA-256")
    broker.ctx.tokens = DelegationTokenManager(broker.config, None, None, None)
    bodies = {create_delegation_token: {"renewers": [], "max_lifetime_ms": -1},
              renew_delegation_token: {"hmac": b"x", "renew_period_ms": 1},
              expire_delegation_token: {"hmac": b"x", "expiry_time_period_ms": 1},
              describe_delegation_token: {"owners": None}}
    for handler, body in bodies.items():
        assert _handle(broker, handler, body).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert _handle(broker, handler, body, "SASL_PLAINTEXT").error_code == \
            ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    group = _handle(broker, create_delegation_token, {"renewers": [{"principal_type": "Group", "principal_name": "g"}],
                                                      "max_lifetime_ms": -1}, "SASL_PLAINTEXT")
    assert group.error_code == ErrorCode.INVALID_PRINCIPAL_TYPE and group.principal_type == "User"
    broker.close()


def _sasl(auth: SaslAuthenticator, client: SaslClient) -> tuple[int, str | None]:
    def result(value):
        box: list = []
        defer.maybeDeferred(lambda: value).addBoth(box.append)
        return box[0]
    auth.receive(encode_request(sasl_handshake, 1, 1, "t", {"mechanism": client.mechanism}))
    token: bytes | None = client.first_token()
    while token is not None:
        out = result(auth.receive(encode_request(sasl_authenticate, 1, 2, "t", {"auth_bytes": token})))
        body = decode_response(sasl_authenticate, 1, out)[1]
        if body.error_code:
            return body.error_code, body.error_message
        token = client.next_token(bytes(body.auth_bytes))
    return 0, None


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_token_login_is_the_owner_and_flagged(mechanism):
    cache = TokenCache("key")
    cache.update(INFO, scram_credentials(cache.hmac("tok-1")))
    password = base64.b64encode(cache.hmac("tok-1")).decode()

    def token_lookup(mech, token_id):
        info = cache.tokens.get(token_id)
        return None if info is None else (cache.credentials[token_id][mech], info.owner)

    def users(_mech, _name):
        return defer.succeed(None)

    auth = SaslAuthenticator([mechanism], {}, users, lambda f: b"", token_lookup)
    assert _sasl(auth, SaslClient(mechanism, "tok-1", password, token_auth=True)) == (0, None)
    assert auth.principal == "User:alice" and auth.token_authenticated
    # the same name without the extension is a user login (no such user)
    auth = SaslAuthenticator([mechanism], {}, users, lambda f: b"", token_lookup)
    assert _sasl(auth, SaslClient(mechanism, "tok-1", password))[0] == ErrorCode.SASL_AUTHENTICATION_FAILED
    auth = SaslAuthenticator([mechanism], {}, users, lambda f: b"", token_lookup)
    code, message = _sasl(auth, SaslClient(mechanism, "tok-2", password, token_auth=True))
    assert code == ErrorCode.SASL_AUTHENTICATION_FAILED and "Invalid tokenId : tok-2" in message
    auth = SaslAuthenticator([mechanism], {}, users, lambda f: b"", token_lookup)
    assert _sasl(auth, SaslClient(mechanism, "tok-1", "wrong", token_auth=True))[0] == \
        ErrorCode.SASL_AUTHENTICATION_FAILED
    assert not auth.token_authenticated and auth.principal is None
