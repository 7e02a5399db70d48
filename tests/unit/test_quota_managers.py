"""Client quotas, sans-IO and on the socket layer (StringTransport, task.Clock): Kafka's eight-level
user / client-id resolution and its metric tags, the sampled rate's throttle time, what a request
records and how it is throttled (KIP-219: muted after the response, the response held back for
old versions), the fetch cap, the AlterClientQuotas / DescribeClientQuotas checks and filters."""
from __future__ import annotations

import struct
from types import SimpleNamespace as NS

import pytest
from twisted.internet import address, task
from twisted.internet.testing import StringTransport

from odradek.broker.apis.alter_client_quotas import new_config, quota_key
from odradek.broker.apis.describe_client_quotas import ANY, matching, parse_filter
from odradek.broker.config_changes import quota_key as notified_entity
from odradek.broker.network.request_handler import RequestHandler
from odradek.broker.network.socket_server import KafkaServerFactory
from odradek.broker.quotas.client_quotas import ClientQuotas
from odradek.broker.quotas.request_quotas import QuotaManagers, user_of
from odradek.broker.quotas.sampled_rate import SampledRate
from odradek.protocol.apis import produce
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.header import encode_request

from broker_fixtures import Broker, call

D = "<default>"
CONFIG = {"quota.window.num": 11, "quota.window.size.seconds": 1, "controller.quota.window.num": 11,
          "controller.quota.window.size.seconds": 1}


def test_the_most_specific_of_kafkas_eight_entities_wins_with_its_metric_tags():
    levels = [((None, D), ("", "app")), ((None, "app"), ("", "app")), ((D, None), ("alice", "")),
              ((D, D), ("alice", "app")), ((D, "app"), ("alice", "app")), (("alice", None), ("alice", "")),
              (("alice", D), ("alice", "app")), (("alice", "app"), ("alice", "app"))]
    q = ClientQuotas("producer_byte_rate", 11, 1.0)
    assert q.resolve("alice", "app") is None and not q.active
    for value, (key, tags) in enumerate(levels, start=1):   # each more specific level takes over
        q.set(key, float(value))
        assert q.resolve("alice", "app") == (tags, float(value)), key
    for value, (key, _) in reversed(list(enumerate(levels, start=1))[1:]):   # removed: the next one down
        q.set(key, None)
        assert q.resolve("alice", "app")[1] == value - 1
    assert q.resolve("bob", "other") == (("", "other"), 1.0)        # the default client, per client id


def test_a_default_user_quota_gives_each_user_a_rate_of_its_own():
    q = ClientQuotas("producer_byte_rate", 11, 1.0)
    q.set((D, None), 100.0)
    assert q.record("alice", "a", 2000, 0.0) > 0
    assert q.record("bob", "a", 500, 0.0) == 0                      # bob's own sensor
    assert q.record("alice", "b", 1, 0.0) > 0                       # alice's one, whatever her client id


def test_the_throttle_time_spreads_the_excess_over_the_sampled_span():
    rate = SampledRate(100, samples=11, window_s=1.0)
    rate.record(1000, 0.0)                                          # 1000 B over the minimum 10 s span: 100 B/s
    assert rate.throttle_ms(0.0) == 0
    rate.record(1000, 0.5)                 # 2000 B over 10.5 s: the 950 B above the quota take 9.5 s more
    assert rate.throttle_ms(0.5) == 9500
    rate.unrecord(1000, 0.5)
    assert rate.throttle_ms(0.5) == 0
    assert SampledRate().throttle_ms(0.0) == 0                      # unlimited


def _managers(clock=None) -> QuotaManagers:
    return QuotaManagers(CONFIG, clock or task.Clock())


def test_what_each_request_records_and_whether_its_response_is_held_back():
    qm = _managers()
    assert not qm.active
    qm.update((None, "app"), {"producer_byte_rate": "100", "consumer_byte_rate": "100", "SCRAM-SHA-256": "x"})
    assert qm.active and qm.produce.configs == {(None, "app"): 100.0}
    body = {"throttle_time_ms": 0}
    ms, hold = qm.after_request(0, 8, "app", "User:ANONYMOUS", None, body, 5000, 0.0)
    assert ms > 0 and not hold and body["throttle_time_ms"] == ms   # v8: the client holds back itself
    assert qm.after_request(0, 5, "app", "User:ANONYMOUS", None, {}, 5000, 0.0)[1]   # v5: KIP-219 predates it
    assert qm.after_request(0, 8, "other", "User:ANONYMOUS", None, {}, 10 ** 6, 0.0) == (0, False)
    follower = NS(replica_id=2)
    fetched = {"responses": [{"partition_responses": [{"record_set": b"x" * 5000}]}]}
    assert qm.after_request(1, 11, "app", "User:ANONYMOUS", follower, fetched, 100, 0.0) == (0, False)
    consumer = NS(replica_id=-1)
    ms, _ = qm.after_request(1, 11, "app", "User:ANONYMOUS", consumer, fetched, 100, 0.0)
    assert ms > 0 and fetched["responses"][0]["partition_responses"][0]["record_set"] == b""   # answered empty
    assert qm.fetch.sensors[("", "app")].rate(0.0) == 0               # and taken back
    assert qm.fetch_max_bytes("app", "User:ANONYMOUS") == 100 * 10 and qm.fetch_max_bytes("x", "User:A") is None
    assert qm.after_request(4, 5, "app", "User:ANONYMOUS", None, {}, 10 ** 6, 0.0) == (0, False)  # controller's
    qm.update((None, "app"), {"producer_byte_rate": "lots"})          # a garbled stored value is ignored
    assert not qm.active


def test_the_handler_time_counts_toward_request_percentage():
    qm = _managers()
    qm.update(("alice", None), {"request_percentage": "1"})           # 1% of a thread: 10 ms/s
    assert user_of("User:alice") == "alice" and user_of("User:a b") == "a%20b"
    assert qm.after_request(3, 9, "c", "User:alice", None, {}, 0, 0.5)[0] > 0
    assert qm.after_request(3, 9, "c", "User:bob", None, {}, 0, 0.5)[0] == 0


def test_strict_mutation_quotas_refuse_once_over_and_permissive_ones_throttle_after():
    clock = task.Clock()
    qm = _managers(clock)
    qm.update((None, D), {"controller_mutation_rate": "1"})
    strict = qm.mutation_quota(19, 6, "admin", "User:ANONYMOUS")
    assert strict.admit(20) and strict.throttle_ms == 0      # under the quota before: admitted, recorded
    assert not strict.admit(1) and strict.throttle_ms > 0     # now over: refused, the wait told
    permissive = qm.mutation_quota(19, 5, "admin", "User:ANONYMOUS")
    assert permissive.admit(5) and permissive.throttle_ms > 0
    body = {"throttle_time_ms": strict.throttle_ms}
    assert qm.after_request(19, 6, "admin", "User:ANONYMOUS", None, body, 0, 0.0)[0] == strict.throttle_ms
    qm.update((None, D), {})
    assert qm.mutation_quota(37, 3, "admin", "User:ANONYMOUS").admit(10 ** 6)


def _produce_frame(version: int, correlation_id: int) -> bytes:
    body = encode_request(produce, version, correlation_id, "app", {
        "transactional_id": None, "acks": 1, "timeout_ms": 1000,
        "topic_data": [{"name": "absent", "partition_data": [{"index": 0, "records": b"z" * 4000}]}]})
    return struct.pack(">i", len(body)) + body


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


@pytest.mark.parametrize("version, held", [(8, False), (2, True)])
def test_a_throttled_connection_is_muted_and_an_old_clients_response_held_back(broker, version, held):
    clock = task.Clock()
    broker.ctx.quotas = _managers(clock)
    broker.ctx.quotas.update((None, "app"), {"producer_byte_rate": "100"})
    factory = KafkaServerFactory(RequestHandler(broker.ctx), "PLAINTEXT", 1 << 20, clock)
    conn = factory.buildProtocol(None)
    tr = StringTransport(peerAddress=address.IPv4Address("TCP", "127.0.0.1", 40000))
    conn.makeConnection(tr)
    conn.dataReceived(_produce_frame(version, 1) + _produce_frame(version, 2))
    first = tr.value()
    assert (first == b"") == held                      # held back, or out at once
    assert tr.producerState == "paused"                # and nothing more is read meanwhile
    clock.advance(0.001)
    assert tr.value() == first
    for _ in range(3):                                 # the throttles have passed
        clock.advance(3600)
    correlation_ids = []
    data = tr.value()
    while data:
        size = struct.unpack(">i", data[:4])[0]
        correlation_ids.append(struct.unpack(">i", data[4:8])[0])
        data = data[4 + size:]
    assert correlation_ids[:2] == [1, 2]
    broker.ctx.quotas.update((None, "app"), {})        # no quota: nothing is held
    clock.advance(3600)
    tr.clear()
    conn.dataReceived(_produce_frame(version, 3))
    assert tr.value() != b"" and tr.producerState != "paused"


def test_the_entity_a_config_change_notification_names():
    assert notified_entity("users", "alice") == ("alice", None)
    assert notified_entity("users", "alice/clients/%3Capp%3E") == ("alice", "%3Capp%3E")
    assert notified_entity("users", "<default>/clients/<default>") == (D, D)
    assert notified_entity("clients", "app") == (None, "app")
    for entity_type, name in [("users", ""), ("users", "a/b"), ("users", "a/clients/"), ("clients", "a/b")]:
        assert notified_entity(entity_type, name) is None


def _entity(**parts):
    return [NS(entity_type=t.replace("_", "-"), entity_name=n) for t, n in parts.items()]


def test_alter_entities_and_values_are_checked_as_kafka_does():
    assert quota_key(_entity(user="a b", client_id=None)) == ("a%20b", D)
    assert quota_key(_entity(client_id="app")) == (None, "app")
    for entity, message in [([], "Invalid empty client quota entity"), (_entity(user=""), "Empty user not supported"),
                            (_entity(group="g"), "Unhandled client quota entity type: group"),
                            (_entity(ip="1.2.3.4", user="u"), "Invalid quota entity combination"),
                            (_entity(ip="1.2.3.4"), "IP quotas")]:
        with pytest.raises(KafkaError) as err:
            quota_key(entity)
        assert err.value.code == ErrorCode.INVALID_REQUEST and message in err.value.message

    def op(key, value=0.0, remove=False):
        return NS(key=key, value=value, remove=remove)
    current = {"SCRAM-SHA-256": "salt=..", "producer_byte_rate": "5"}
    assert new_config(current, [op("producer_byte_rate", remove=True), op("consumer_byte_rate", 2048.0),
                                op("request_percentage", 12.5), op("unknown", remove=True)]) == {
        "SCRAM-SHA-256": "salt=..", "consumer_byte_rate": "2048", "request_percentage": "12.5"}
    for ops, message in [([op("bogus", 1.0)], "Invalid configuration key bogus"),
                         ([op("SCRAM-SHA-256", 1.0)], "Invalid configuration key SCRAM-SHA-256"),
                         ([op("producer_byte_rate", 1.5)], "must be a LONG value"),
                         ([op("controller_mutation_rate", -1.0)], "Invalid value -1.0")]:
        with pytest.raises(KafkaError) as err:
            new_config(current, ops)
        assert err.value.code == ErrorCode.INVALID_REQUEST and message in err.value.message


def _component(kind, match_type, match=None):
    return NS(entity_type=kind, match_type=match_type, match=match)


def test_describe_filters_match_exact_default_and_any_strictly_or_not():
    stored = {("u1", None): {"a": "1"}, (D, None): {"a": "2"}, (None, "c1"): {"a": "3"}, ("u1", "c1"): {"a": "4"},
              ("u2", None): {}}
    assert parse_filter([_component("user", 0, "u 1")]) == {"user": "u%201"}
    assert parse_filter([_component("client-id", 1), _component("user", 2)]) == {"client-id": D, "user": ANY}
    assert set(matching(stored, {"user": "u1"}, strict=False)) == {("u1", None), ("u1", "c1")}
    assert set(matching(stored, {"user": "u1"}, strict=True)) == {("u1", None)}
    assert set(matching(stored, {"user": ANY}, strict=True)) == {("u1", None), (D, None)}   # not u2: no values
    assert set(matching(stored, {"user": D}, strict=False)) == {(D, None)}
    assert set(matching(stored, {}, strict=False)) == set(stored) - {("u2", None)}
    assert matching(stored, {}, strict=True) == {}
    for components, code in [([_component("user", 2), _component("user", 1)], ErrorCode.INVALID_REQUEST),
                             ([_component("", 2)], ErrorCode.INVALID_REQUEST),
                             ([_component("topic", 2)], ErrorCode.UNSUPPORTED_VERSION),
                             ([_component("user", 7)], ErrorCode.INVALID_REQUEST),
                             ([_component("user", 0, None)], ErrorCode.INVALID_REQUEST),
                             ([_component("ip", 2), _component("user", 2)], ErrorCode.INVALID_REQUEST)]:
        with pytest.raises(KafkaError) as err:
            parse_filter(components)
        assert err.value.code == code


def test_the_quota_apis_need_alter_configs_and_describe_configs_on_the_cluster(broker):
    from odradek.broker.apis import alter_client_quotas, describe_client_quotas
    from odradek.broker.security.authorizer import AclAuthorizer
    broker.ctx.authorizer = AclAuthorizer()
    entry = {"entity": [{"entity_type": "client-id", "entity_name": "app"}],
             "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}]}
    altered = call(broker, alter_client_quotas, 1, {"entries": [entry], "validate_only": False})
    assert [e.error_code for e in altered.entries] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    described = call(broker, describe_client_quotas, 1, {"components": [], "strict": False})
    assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and described.entries is None
    broker.ctx.authorizer = AclAuthorizer(super_users=["User:ANONYMOUS"])   # allowed: on to ZooKeeper (none here)
    assert call(broker, describe_client_quotas, 1, {"components": [], "strict": False}).error_code == \
        ErrorCode.UNKNOWN_SERVER_ERROR
