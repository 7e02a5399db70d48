"""Incremental fetch sessions (KIP-227): the Fetch handler with its session cache against a real
log, driven through the codec by the fetcher-side ``FetchSessionHandler``; the cache's eviction
order; the handler's requests and resets."""
from __future__ import annotations

import pytest

from odradek.broker.apis import fetch, produce
from odradek.broker.replication.delayed import FetchPartition
from odradek.broker.replication.fetch_sessions import FetchSessionCache
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_session_handler import INT32_MAX, FetchSessionHandler, next_epoch
from odradek.protocol.records import iter_records

from broker_fixtures import Broker, batch, call, call_deferred, produce_body

VERSION = 11


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    b.lead("t", partitions=3)
    yield b
    b.close()


def wanted_at(offsets: dict[int, int]) -> dict:
    return {("t", p): {"partition": p, "current_leader_epoch": 0, "fetch_offset": o, "log_start_offset": -1,
                       "partition_max_bytes": 1 << 20} for p, o in offsets.items()}


def body(handler: FetchSessionHandler, wanted: dict, max_wait_ms: int = 0, replica_id: int = -1) -> dict:
    return {"replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "rack_id": "", **handler.build(wanted)}


def answered(resp) -> dict[int, object]:
    return {r.partition: r for t in resp.responses for r in t.partition_responses}


def session_fetch(broker, handler, wanted, **kw):
    resp = call(broker, fetch, VERSION, body(handler, wanted, **kw))
    assert handler.handle_response(resp.error_code, resp.session_id,
                                   [(t.topic, r.partition) for t in resp.responses for r in t.partition_responses])
    return resp


def test_full_then_incremental_answers_carry_only_what_changed(broker):
    h = FetchSessionHandler()
    first = session_fetch(broker, h, wanted_at({0: 0, 1: 0, 2: 0}))
    assert first.session_id != 0 and set(answered(first)) == {0, 1, 2}
    assert len(broker.ctx.fetch_sessions.sessions) == 1

    # nothing new: the request names nothing, the answer carries nothing
    req = body(h, wanted_at({0: 0, 1: 0, 2: 0}))
    assert req["topics"] == [] and req["forgotten_topics_data"] == [] and req["session_epoch"] == 1
    idle = session_fetch(broker, h, wanted_at({0: 0, 1: 0, 2: 0}))
    assert idle.error_code == 0 and idle.session_id == first.session_id and answered(idle) == {}

    # records on partition 1: only it is answered, with them and its new high watermark
    call(broker, produce, 8, produce_body("t", batch(3), partition=1))
    resp = session_fetch(broker, h, wanted_at({0: 0, 1: 0, 2: 0}))
    assert set(answered(resp)) == {1}
    p1 = answered(resp)[1]
    assert p1.high_watermark == 3 and [r.offset for r in iter_records(p1.record_set)] == [0, 1, 2]
    session = broker.ctx.fetch_sessions.sessions[first.session_id]
    assert list(session.partitions) == [("t", 0), ("t", 2), ("t", 1)]   # answered ones go last

    # the fetcher moved on: only partition 1 is named, and at its end there is nothing to say
    req = body(h, wanted_at({0: 0, 1: 3, 2: 0}))
    assert [(t["topic"], [p["partition"] for p in t["partitions"]]) for t in req["topics"]] == [("t", [1])]
    assert answered(session_fetch(broker, h, wanted_at({0: 0, 1: 3, 2: 0}))) == {}

    # partition 2 forgotten: no longer read, so its records are not answered
    assert body(h, wanted_at({0: 0, 1: 3}))["forgotten_topics_data"] == [{"topic": "t", "partitions": [2]}]
    session_fetch(broker, h, wanted_at({0: 0, 1: 3}))
    call(broker, produce, 8, produce_body("t", batch(2), partition=2))
    assert answered(session_fetch(broker, h, wanted_at({0: 0, 1: 3}))) == {}
    assert broker.ctx.fetch_sessions.partitions_cached == 2


def test_a_parked_session_fetch_answers_the_partition_that_got_data(broker):
    h = FetchSessionHandler()
    session_fetch(broker, h, wanted_at({0: 0, 1: 0, 2: 0}))
    d = call_deferred(broker, fetch, VERSION, body(h, wanted_at({0: 0, 1: 0, 2: 0}), max_wait_ms=500))
    got: list = []
    d.addCallback(got.append)
    broker.clock.advance(0.1)
    assert not got                     # parked: nothing new anywhere
    call(broker, produce, 8, produce_body("t", batch(2), partition=2))
    assert got and set(answered(got[0])) == {2}
    assert h.handle_response(got[0].error_code, got[0].session_id, [("t", 2)])


def test_session_errors_change_nothing(broker):
    h = FetchSessionHandler()
    session_id = session_fetch(broker, h, wanted_at({0: 0, 1: 0})).session_id
    good = body(h, wanted_at({0: 0, 1: 0, 2: 0}))     # epoch 1, adds partition 2

    def refused(principal: str = "User:ANONYMOUS", **changes) -> int:
        resp = call(broker, fetch, VERSION, {**good, **changes}, principal=principal)
        assert resp.responses == [] and resp.session_id == 0
        return resp.error_code

    assert refused(session_epoch=2) == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert refused(session_id=session_id + 1) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert refused(replica_id=2) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND      # not the session's fetcher
    assert refused(principal="User:mallory") == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    session = broker.ctx.fetch_sessions.sessions[session_id]
    assert session.epoch == 1 and list(session.partitions) == [("t", 0), ("t", 1)]
    # the fetcher's own request still works, at the epoch it expected
    resp = call(broker, fetch, VERSION, good)
    assert resp.error_code == 0 and set(answered(resp)) == {2} and session.epoch == 2


def test_final_and_initial_epochs_close_the_session_named(broker):
    first = session_fetch(broker, FetchSessionHandler(), wanted_at({0: 0})).session_id

    def full(session_id: int, epoch: int) -> dict:
        return {**body(FetchSessionHandler(), wanted_at({0: 0, 1: 0})), "session_id": session_id,
                "session_epoch": epoch}

    # epoch 0 naming the session: a full fetch that replaces it
    resp = call(broker, fetch, VERSION, full(first, 0))
    assert resp.session_id not in (0, first) and set(answered(resp)) == {0, 1}
    assert set(broker.ctx.fetch_sessions.sessions) == {resp.session_id}
    # epoch -1 naming it: closed, and answered sessionless in full
    resp = call(broker, fetch, VERSION, full(resp.session_id, -1))
    assert resp.error_code == 0 and resp.session_id == 0 and set(answered(resp)) == {0, 1}
    assert broker.ctx.fetch_sessions.sessions == {}


def test_no_slots_means_no_sessions(broker):
    broker.ctx.fetch_sessions.max_slots = 0
    h = FetchSessionHandler()
    resp = session_fetch(broker, h, wanted_at({0: 0, 1: 0}))
    assert resp.session_id == 0 and set(answered(resp)) == {0, 1}
    # the fetcher keeps fetching in full
    assert body(h, wanted_at({0: 0, 1: 0}))["session_epoch"] == 0
    assert broker.ctx.fetch_sessions.sessions == {}


def _results(n: int) -> list:
    nothing = {"error_code": 0, "high_watermark": 0, "last_stable_offset": 0, "log_start_offset": 0, "records": b""}
    return [(FetchPartition("t", p, 0, 100), nothing) for p in range(n)]


def test_eviction_takes_stale_sessions_first_then_the_smallest_consumer_session():
    cache = FetchSessionCache(max_slots=2, eviction_ms=1000)
    big = cache.open((-1, "User:a"), _results(5), now_ms=0)
    small = cache.open((-1, "User:b"), _results(2), now_ms=500)
    assert big and small
    # a consumer session evicts only a smaller consumer session
    assert cache.open((-1, "User:c"), _results(2), now_ms=600) is None
    follower = cache.open((2, "User:broker"), _results(1), now_ms=700)
    assert follower and set(cache.sessions) == {big.id, follower.id} and cache.evictions == 1
    # a follower session is never evicted while fresh, not even by another follower's
    assert cache.open((3, "User:broker"), _results(9), now_ms=800) is not None   # evicts the consumer
    assert cache.open((-1, "User:d"), _results(50), now_ms=900) is None
    assert cache.open((4, "User:broker"), _results(9), now_ms=900) is None
    # once unused for eviction_ms, the least recently used goes first
    late = cache.open((-1, "User:d"), _results(1), now_ms=1701 + 100)
    assert late is not None and follower.id not in cache.sessions and cache.evictions == 3


def test_handler_requests_and_resets():
    h = FetchSessionHandler()
    full = h.build(wanted_at({0: 5, 1: 7}))
    assert (full["session_id"], full["session_epoch"]) == (0, 0) and len(full["topics"][0]["partitions"]) == 2
    assert h.handle_response(0, 77, [("t", 0), ("t", 1)]) and (h.session_id, h.epoch) == (77, 1)
    inc = h.build(wanted_at({0: 6, 1: 7, 2: 0}))
    assert (inc["session_id"], inc["session_epoch"]) == (77, 1)
    assert [p["partition"] for p in inc["topics"][0]["partitions"]] == [0, 2]
    assert h.handle_response(0, 77, [("t", 2)]) and h.epoch == 2
    # an answer naming a partition outside the session drops it
    h.build(wanted_at({0: 6, 1: 7}))
    assert not h.handle_response(0, 77, [("t", 2)])
    assert (h.session_id, h.epoch, h.sent) == (0, 0, {})
    assert h.build(wanted_at({0: 6}))["session_epoch"] == 0
    # so does an error
    assert h.handle_response(0, 78, [("t", 0)]) and h.session_id == 78
    h.build(wanted_at({0: 6}))
    assert not h.handle_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    assert h.session_id == 0
    assert next_epoch(INT32_MAX) == 1 and next_epoch(0) == 1 and next_epoch(41) == 42
