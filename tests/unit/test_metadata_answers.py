"""Metadata answered from pieces encoded once per metadata-cache version (issue 17): the same
bytes as encoding the whole answer each time, for every version, listener, cache state and
request, and never an answer older than the cache; and never an answer from a cache the
controller has not yet filled (a restarted broker's, before its first UpdateMetadata)."""
from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.broker.apis import describe_cluster, metadata
from odradek.broker.apis.context import FIRST_METADATA_SLACK_MS, RequestContext
from odradek.broker.metadata_cache import BrokerMetadata, PartitionMetadata
from odradek.protocol.apis import metadata as API
from odradek.protocol.errors import ErrorCode
from odradek.protocol.header import EncodedBody, encode_response

from broker_fixtures import Broker, call, call_deferred

QUOTAS_ON = SimpleNamespace(active=True)   # a client quota set: the handler answers a dict


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


def fill(b: Broker, brokers: dict[int, dict[str, tuple[str, int]]], topics: dict[str, list[tuple]],
         controller: int = 1, with_ids: bool = True) -> None:
    """topics: name -> [(leader, replicas, isr, offline)] per partition."""
    states = [PartitionMetadata(t, p, 1, leader, 3, list(isr), 0, list(replicas), list(offline),
                                uuid.uuid5(uuid.NAMESPACE_DNS, t) if with_ids else None)
              for t, parts in topics.items() for p, (leader, replicas, isr, offline) in enumerate(parts)]
    b.cache.update(controller, 1, [BrokerMetadata(i, eps, f"rack-{i}" if i % 2 else None)
                                   for i, eps in brokers.items()], states)


def both(b: Broker, version: int, body: dict, listener: str = "PLAINTEXT") -> tuple[bytes, bytes]:
    """(the handler's answer as sent, the same request answered as a dict and encoded whole)."""
    req = API.Request.decode(API.Request.encode(body, version), version)
    rc = RequestContext(API.API_KEY, version, 9, "test", listener, "127.0.0.1:1")
    b.ctx.quotas = None
    fast = metadata.handle(b.ctx, rc, req)
    b.ctx.quotas = QUOTAS_ON
    try:
        slow = metadata.handle(b.ctx, rc, req)
    finally:
        b.ctx.quotas = None
    assert isinstance(slow, dict)
    return encode_response(API, version, 9, fast), encode_response(API, version, 9, slow)


BROKERS = {1: {"PLAINTEXT": ("127.0.0.1", 9091), "INTERNAL": ("10.0.0.1", 19091)},
           2: {"PLAINTEXT": ("127.0.0.2", 9092)}, 3: {"INTERNAL": ("10.0.0.3", 19093)}}
TOPICS = {"a": [(1, [1, 2], [1, 2], []), (2, [2, 4], [2], [4]), (-1, [4], [], [4]), (3, [3, 1], [3, 1], [])],
          "__consumer_offsets": [(1, [1], [1], [])], "b-empty-isr": [(2, [2, 5], [2], [])]}


@pytest.mark.parametrize("version", range(0, 12))
def test_same_bytes_as_encoding_the_dict(broker, version):
    fill(broker, BROKERS, TOPICS)
    requests: list[dict] = [{"topics": None}, {"topics": []}, {"topics": [{"name": "a"}, {"name": "nope"}]},
                            {"topics": [{"name": "b-empty-isr"}, {"name": "a"}, {"name": "a"}]}]
    for body in list(requests):
        requests.append({**body, "include_topic_authorized_operations": True,
                         "include_cluster_authorized_operations": True})
    for body in requests:
        if version == 0 and body["topics"] is None:
            continue
        for listener in ("PLAINTEXT", "INTERNAL", "NONE"):
            fast, slow = both(broker, version, body, listener)
            assert fast == slow, (version, body, listener)
            fast_again, _ = both(broker, version, body, listener)   # now from the kept pieces
            assert fast_again == slow


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(version=st.integers(0, 11), data=st.data())
def test_same_bytes_for_any_cache_state(broker, version, data):
    ids = data.draw(st.sets(st.integers(1, 4), min_size=0, max_size=4))
    brokers = {i: {"PLAINTEXT": ("127.0.0.1", 9090 + i)} for i in ids}
    part = st.tuples(st.integers(-1, 4), st.lists(st.integers(1, 5), max_size=3),
                     st.lists(st.integers(1, 5), max_size=3), st.lists(st.integers(1, 5), max_size=2))
    topics = data.draw(st.dictionaries(st.sampled_from(["t0", "t1", "t2", "__transaction_state"]),
                                       st.lists(part, min_size=1, max_size=3), max_size=4))
    # one cache history: a first state, then a second one on top of it, both answered
    for _ in range(2):
        fill(broker, brokers, topics, controller=data.draw(st.integers(-1, 4)), with_ids=data.draw(st.booleans()))
        names = data.draw(st.lists(st.sampled_from(["t0", "t1", "t2", "__transaction_state", "zz"]), max_size=4))
        body = {"topics": [{"name": n} for n in names] if names or version == 0 or data.draw(st.booleans())
                else None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": data.draw(st.booleans())}
        fast, slow = both(broker, version, body)
        assert fast == slow
        topics = data.draw(st.dictionaries(st.sampled_from(["t0", "t1", "t2"]), st.lists(part, min_size=1, max_size=3),
                                           max_size=3))


def test_answers_follow_every_cache_update(broker):
    fill(broker, {1: BROKERS[1], 2: BROKERS[2]}, {"t": [(1, [1, 2], [1, 2], [])]})
    assert isinstance(metadata.handle(broker.ctx, RequestContext(3, 11, 1, "c"), API.Request.decode(
        API.Request.encode({"topics": None}, 11), 11)), EncodedBody)
    first = call(broker, metadata, 11, {"topics": None})
    assert [(p.leader_id, p.isr_nodes) for p in first.topics[0].partitions] == [(1, [1, 2])]
    # a leader change for t only: the answer shows it at once
    broker.cache.update(1, 1, list(broker.cache.alive_brokers()),
                        [PartitionMetadata("t", 0, 1, 2, 4, [2], 0, [1, 2])])
    second = call(broker, metadata, 11, {"topics": None})
    assert [(p.leader_id, p.leader_epoch, p.isr_nodes) for p in second.topics[0].partitions] == [(2, 4, [2])]
    # the leader's broker goes away: no leader on this listener any more
    broker.cache.update(1, 1, [BrokerMetadata(1, BROKERS[1])], [])
    third = call(broker, metadata, 11, {"topics": None})
    assert [b.node_id for b in third.brokers] == [1]
    assert third.topics[0].partitions[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    # a new controller is named; a deleted topic is gone
    broker.cache.update(2, 2, list(broker.cache.alive_brokers()),
                        [PartitionMetadata("t", 0, 2, -2, 4, [], 0, [])])
    fourth = call(broker, metadata, 11, {"topics": None})
    assert fourth.controller_id == 2 and fourth.topics == []
    assert all("t" not in kept for kept in broker.ctx.metadata_answers._topics.values())   # its pieces went too
    assert call(broker, metadata, 11, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False}
                ).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


ASK = {metadata: (9, {"topics": None, "allow_auto_topic_creation": True,
                      "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}),
       describe_cluster: (0, {"include_cluster_authorized_operations": False})}


@pytest.mark.parametrize("handler", [metadata, describe_cluster], ids=["Metadata", "DescribeCluster"])
def test_asked_before_the_first_update_metadata_the_answer_waits_for_it(broker, handler):
    """A restarted broker listens before the controller has told it the cluster: answered from the
    empty cache, a client would hear of no brokers and no topics."""
    version, body = ASK[handler]
    got: list = []
    call_deferred(broker, handler, version, body).addCallback(got.append)
    broker.clock.advance(5)
    assert got == []
    fill(broker, {1: {"PLAINTEXT": ("h1", 9091)}, 2: {"PLAINTEXT": ("h2", 9092)}}, {"t": [(2, (1, 2), (1, 2), ())]})
    [answer] = got
    assert [b.node_id if handler is metadata else b.broker_id for b in answer.brokers] == [1, 2]
    if handler is metadata:
        assert [t.name for t in answer.topics] == ["t"]
    # once the cache has had an update, nothing waits
    assert call(broker, handler, version, body).brokers


def test_without_any_update_metadata_the_answer_comes_after_the_wait(broker):
    """What the cache knows (nothing) once zookeeper.session.timeout.ms and the slack have passed."""
    version, body = ASK[metadata]
    got: list = []
    call_deferred(broker, metadata, version, body).addCallback(got.append)
    wait_s = (int(broker.config["zookeeper.session.timeout.ms"]) + FIRST_METADATA_SLACK_MS) / 1000
    broker.clock.advance(wait_s - 0.001)
    assert got == []
    broker.clock.advance(0.002)
    [answer] = got
    assert answer.brokers == [] and answer.topics == []
