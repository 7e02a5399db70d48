"""KafkaZkClient.retry: connection loss is retried once reconnected, never across a session loss."""
from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooState
from kazoo.exceptions import ConnectionLoss, NoNodeError, OperationTimeoutError, SessionExpiredError
from twisted.internet import defer

from odradek.broker.controller.backend import ThreadedZkBackend
from odradek.broker.controller.context import ControllerContext
from odradek.zk.session import KafkaZkClient


class FakeKazoo:
    def __init__(self):
        self.connected = False
        self.client_id = (1, b"")

    def add_listener(self, fn):
        pass


@pytest.fixture
def zkc():
    c = KafkaZkClient("127.0.0.1:1")      # never started: the kazoo client is replaced
    c.kazoo = FakeKazoo()
    return c


def flaky(failures, exc=ConnectionLoss, on_fail=None):
    calls = []

    def fn(x):
        calls.append(x)
        if len(calls) <= failures:
            if on_fail:
                on_fail()
            raise exc()
        return x * 2
    return fn, calls


def reconnect_soon(zkc, state=KazooState.CONNECTED):
    def go():
        zkc.kazoo.connected = True
        zkc._state_listener(state)
    threading.Timer(0.05, go).start()


def test_retries_after_reconnection(zkc):
    fn, calls = flaky(2, on_fail=lambda: (setattr(zkc.kazoo, "connected", False),
                                          zkc._state_listener(KazooState.SUSPENDED), reconnect_soon(zkc)))
    assert zkc.retry(fn, 21) == 42 and calls == [21, 21, 21]


def test_operation_timeout_is_retried_too(zkc):
    zkc.kazoo.connected = True
    fn, calls = flaky(1, OperationTimeoutError)
    assert zkc.retry(fn, 1) == 2 and len(calls) == 2


def test_other_errors_are_not_retried(zkc):
    zkc.kazoo.connected = True
    fn, calls = flaky(1, NoNodeError)
    with pytest.raises(NoNodeError):
        zkc.retry(fn, 1)
    fn, calls = flaky(1, SessionExpiredError)
    with pytest.raises(SessionExpiredError):
        zkc.retry(fn, 1)
    assert len(calls) == 1


def test_no_retry_on_a_new_session(zkc):
    def lose_session():
        zkc.kazoo.connected = False
        zkc._state_listener(KazooState.LOST)
        reconnect_soon(zkc)
    fn, calls = flaky(1, on_fail=lose_session)
    with pytest.raises(SessionExpiredError):
        zkc.retry(fn, 1)
    assert len(calls) == 1


def test_closing_stops_retrying(zkc):
    def close():
        zkc._closing = True
    fn, calls = flaky(5, on_fail=close)
    with pytest.raises(ConnectionLoss):
        zkc.retry(fn, 1)
    assert len(calls) == 1


def test_backend_calls_go_through_retry(zkc, monkeypatch):
    """ThreadedZkBackend wraps every KafkaZkClient call in retry (run inline here)."""
    seen = []
    monkeypatch.setattr("odradek.broker.controller.backend.threads.deferToThreadPool",
                        lambda reactor, pool, f, *a, **kw: defer.maybeDeferred(f, *a, **kw))
    zkc.kazoo.connected = True
    fn, calls = flaky(1)
    monkeypatch.setattr(zkc, "get_all_topics", lambda watch=None: (seen.append(watch), fn(3))[1])

    class R:
        def getThreadPool(self):
            return None
    backend = ThreadedZkBackend(zkc, ControllerContext(), None, R())
    out = []
    defer.Deferred.fromCoroutine(backend.get_all_topics()).addCallback(out.append)
    assert out == [6] and len(calls) == 2
