"""BrokerClient against a tiny Twisted server on a real loopback socket (private reactor thread)."""
from __future__ import annotations

import queue
import random
import threading

import pytest
from twisted.internet import defer, protocol
from twisted.internet.selectreactor import SelectReactor
from twisted.protocols.basic import Int32StringReceiver

from odradek.broker.network.broker_client import (BrokerClient, ClientClosedError, DisconnectedError,
                                                  RequestTimedOutError, UnreachableError)
from odradek.broker.network.socket_reader import DirectReadClient
from odradek.protocol import header
from odradek.protocol.apis import fetch, produce, update_metadata
from odradek.zk.ensemble import free_ports

V = update_metadata.MAX_VERSION


class ReactorThread:
    """A non-global reactor running in a daemon thread; ``call`` runs fn on it and waits."""

    def __init__(self):
        self.reactor = SelectReactor()
        self.thread = threading.Thread(target=self.reactor.run, kwargs={"installSignalHandlers": False},
                                       daemon=True)
        self.thread.start()

    def call(self, fn, *args, timeout: float = 10.0):
        out: queue.Queue = queue.Queue()

        def run():
            d = defer.maybeDeferred(fn, *args)
            d.addBoth(out.put)
        self.reactor.callFromThread(run)
        res = out.get(timeout=timeout)
        if hasattr(res, "raiseException"):
            res.raiseException()
        return res

    def stop(self):
        self.reactor.callFromThread(self.reactor.stop)
        self.thread.join(10)


class Server(Int32StringReceiver):
    MAX_LENGTH = 16 << 20

    def stringReceived(self, frame):
        hdr, _ = header.decode_request_header(frame)
        self.factory.seen.append(hdr)
        self.factory.frames.append(frame)
        mode = self.factory.mode
        if mode == "close":
            self.transport.loseConnection()
        elif mode == "silent":
            pass
        elif mode == "fetch":   # a follower's fetch: answered with records many reads long
            self.sendString(header.encode_response(fetch, hdr.api_version, hdr.correlation_id, {
                "responses": [{"topic": "t", "partition_responses": [
                    {"partition": 0, "error_code": 0, "high_watermark": 1, "record_set": big_records(hdr.correlation_id)}]}]}))
        elif hdr.api_key == produce.API_KEY:   # answered with how many requests have come
            self.sendString(header.encode_response(produce, hdr.api_version, hdr.correlation_id, {
                "responses": [{"name": "t", "partition_responses": [
                    {"index": 0, "error_code": len(self.factory.seen), "base_offset": 0}]}]}))
        else:
            cid = hdr.correlation_id + (1 if mode == "badcid" else 0)
            self.sendString(header.encode_response(update_metadata, hdr.api_version, cid,
                                                   {"error_code": len(self.factory.seen)}))


class ServerFactory(protocol.ServerFactory):
    protocol = Server

    def __init__(self, mode="echo"):
        self.mode = mode
        self.seen = []
        self.frames = []


@pytest.fixture
def rt():
    r = ReactorThread()
    yield r
    r.stop()


def listen(rt, factory, port=0):
    return rt.call(lambda: rt.reactor.listenTCP(port, factory, interface="127.0.0.1"))


def send_many(rt, client, n):
    return rt.call(lambda: defer.gatherResults(
        [client.send(update_metadata, V, {"controller_id": 1, "controller_epoch": 1}) for _ in range(n)],
        consumeErrors=True))


def test_requests_and_responses_in_order(rt):
    f = ServerFactory()
    port = listen(rt, f).getHost().port
    client = rt.call(BrokerClient, rt.reactor, "127.0.0.1", port, "test-client")
    res = send_many(rt, client, 5)
    assert [r.error_code for r in res] == [1, 2, 3, 4, 5]
    assert [h.correlation_id for h in f.seen] == [0, 1, 2, 3, 4]
    assert {h.client_id for h in f.seen} == {"test-client"}
    assert {h.api_key for h in f.seen} == {update_metadata.API_KEY}
    rt.call(client.close)


def big_records(seed: int) -> bytes:
    return random.Random(seed).randbytes(3 << 20)


def test_large_responses_are_received_into_their_frame_and_their_records_lent(rt):
    """A broker's plaintext connection receives a large fetch response straight into the frame's
    buffer (``DirectReadClient``) and decodes its records as a view into it; a view still held is
    never written over by the responses after it."""
    port = listen(rt, ServerFactory("fetch")).getHost().port
    client = rt.call(BrokerClient, rt.reactor, "127.0.0.1", port, "c")
    request = {"replica_id": 1, "max_wait_ms": 0, "min_bytes": 1, "topics": []}
    responses = rt.call(lambda: defer.gatherResults([client.send(fetch, 11, request) for _ in range(4)]))
    assert type(rt.call(lambda: client._proto.transport)) is DirectReadClient
    held = [r.responses[0].partition_responses[0].record_set for r in responses]
    assert [type(v) for v in held] == [memoryview] * 4
    assert [bytes(v) for v in held] == [big_records(cid) for cid in range(4)]
    rt.call(client.close)


def test_requests_larger_than_the_socket_takes_leave_whole_and_in_order(rt):
    """A plaintext connection writes its requests straight to the socket (``SocketWriter``); what
    the socket does not take at once goes out as it drains, each request whole and in order."""
    f = ServerFactory()
    port = listen(rt, f).getHost().port
    client = rt.call(BrokerClient, rt.reactor, "127.0.0.1", port, "c")
    bodies = [{"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": big_records(100 + i)}]}]} for i in range(4)]
    res = rt.call(lambda: defer.gatherResults([client.send(produce, 8, b) for b in bodies]))
    assert [r.responses[0].partition_responses[0].error_code for r in res] == [1, 2, 3, 4]
    assert rt.call(lambda: client._proto.writer) is not None
    for i, frame in enumerate(f.frames):
        hdr, offset = header.decode_request_header(frame)
        assert hdr.correlation_id == i
        req = produce.Request.decode(frame, 8, offset)
        assert bytes(req.topic_data[0].partition_data[0].records) == big_records(100 + i)
    rt.call(client.close)


def test_disconnect_fails_in_flight(rt):
    port = listen(rt, ServerFactory("close")).getHost().port
    client = rt.call(BrokerClient, rt.reactor, "127.0.0.1", port, "c")
    with pytest.raises(DisconnectedError):
        rt.call(client.send, update_metadata, V, {})
    rt.call(client.close)


def test_wrong_correlation_id_drops_connection(rt):
    port = listen(rt, ServerFactory("badcid")).getHost().port
    client = rt.call(BrokerClient, rt.reactor, "127.0.0.1", port, "c")
    with pytest.raises(DisconnectedError):
        rt.call(client.send, update_metadata, V, {})
    rt.call(client.close)


def test_reconnects_with_backoff_until_server_appears(rt):
    port = free_ports(1)[0]
    client = rt.call(BrokerClient, rt.reactor, "127.0.0.1", port, "c")
    pending = rt.call(lambda: client.send(update_metadata, V, {}).addBoth(results.put) and None)
    assert pending is None
    assert not client.connected
    f = ServerFactory()
    listen(rt, f, port)
    res = results.get(timeout=10)
    assert res.error_code == 1
    rt.call(client.close)


results: queue.Queue = queue.Queue()


def test_unreachable_fails_at_once_when_asked(rt):
    """A sender that re-routes (the txn marker channel) hears of a refused connection at once,
    not after request.timeout.ms; a later send tries to connect again."""
    port = free_ports(1)[0]
    client = rt.call(lambda: BrokerClient(rt.reactor, "127.0.0.1", port, "c", request_timeout_ms=60000,
                                          fail_when_unreachable=True))
    with pytest.raises(UnreachableError):
        rt.call(client.send, update_metadata, V, {})
    listen(rt, ServerFactory(), port)
    assert rt.call(client.send, update_metadata, V, {}).error_code == 1
    rt.call(client.close)


def test_timeout_and_close(rt):
    port = listen(rt, ServerFactory("silent")).getHost().port
    client = rt.call(lambda: BrokerClient(rt.reactor, "127.0.0.1", port, "c", request_timeout_ms=200))
    with pytest.raises(RequestTimedOutError):
        rt.call(client.send, update_metadata, V, {})
    box: queue.Queue = queue.Queue()
    rt.call(lambda: client.send(update_metadata, V, {}).addErrback(lambda f: box.put(f.value)) and None)
    rt.call(client.close)
    assert isinstance(box.get(timeout=5), ClientClosedError)
    with pytest.raises(ClientClosedError):
        rt.call(client.send, update_metadata, V, {})
