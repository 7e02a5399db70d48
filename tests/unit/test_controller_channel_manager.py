"""The controller's channel to a broker: requests pipelined in queue order, answers handed on in
that order, and after a network failure every unanswered request sent again, in order, on a new
client (nothing of the old client written afterwards)."""
from __future__ import annotations

from twisted.internet import defer
from twisted.internet.task import Clock

from odradek.broker.controller.channel_manager import ControllerChannelManager
from odradek.broker.controller.request_batch import LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, OutRequest
from odradek.broker.network.broker_client import ClientClosedError, DisconnectedError
from odradek.zk.znodes import BrokerInfo, Endpoint


class FakeClient:
    """A BrokerClient stand-in: what was sent, each with the Deferred the test fires."""

    def __init__(self, reactor, host, port, client_id, request_timeout_ms=30000):
        self.sent: list[tuple[str, defer.Deferred]] = []
        self.closed = False

    def send(self, api, version, body):
        d: defer.Deferred = defer.Deferred()
        self.sent.append((body["name"], d))
        return d

    def close(self):
        self.closed = True
        for _, d in self.sent:
            if not d.called:
                d.errback(ClientClosedError("client closed"))

    def names(self) -> list[str]:
        return [name for name, _ in self.sent]


def setup():
    clock, clients, answered = Clock(), [], []

    def factory(*args, **kwargs):
        clients.append(FakeClient(*args, **kwargs))
        return clients[-1]
    channels = ControllerChannelManager(clock, 1, on_response=lambda req, body: answered.append(req.body["name"]),
                                        client_factory=factory, retry_backoff_s=0.1)
    channels.add_broker(BrokerInfo(2, [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]))
    return channels, clock, clients, answered


def request(name: str, api: str = LEADER_AND_ISR) -> OutRequest:
    return OutRequest(2, api, 0, {"name": name})


def test_requests_leave_at_once_in_order_and_answers_are_handed_on_in_order():
    channels, clock, [client], answered = setup()
    channels.send([request("lai"), request("um", UPDATE_METADATA), request("stop", STOP_REPLICA)])
    assert client.names() == ["lai", "um", "stop"]          # none waits for an answer
    for _, d in client.sent:
        d.callback({"error_code": 0})
    assert answered == ["lai", "um", "stop"] and channels.pending(2) == 0
    channels.send([request("next")])                         # a new pump for a later batch
    client.sent[-1][1].callback({})
    assert answered[-1] == "next"


def test_a_network_failure_sends_every_unanswered_request_again_in_order():
    channels, clock, clients, answered = setup()
    first = clients[0]
    channels.send([request("a"), request("b"), request("c")])
    first.sent[0][1].callback({})
    first.sent[1][1].errback(DisconnectedError("connection lost"))
    assert first.closed                                    # c, still in it, is never written by it
    channels.send([request("d")])                          # queued during the backoff: held back
    assert first.names() == ["a", "b", "c"] and len(clients) == 1
    clock.advance(0.1)
    second = clients[1]
    assert second.names() == ["b", "c", "d"]
    for _, d in second.sent:
        d.callback({})
    assert answered == ["a", "b", "c", "d"] and channels.pending(2) == 0


def test_a_broker_removed_during_the_backoff_gets_nothing_more():
    channels, clock, clients, answered = setup()
    channels.send([request("a"), request("b")])
    clients[0].sent[0][1].errback(DisconnectedError("connection lost"))
    channels.remove_broker(2)
    clock.advance(1.0)
    assert len(clients) == 1 and answered == [] and channels.pending(2) == 0


def test_a_request_failed_by_no_network_fault_is_dropped_and_the_rest_go_on():
    channels, clock, [client], answered = setup()
    channels.send([request("bad"), request("good")])
    client.sent[0][1].errback(ValueError("cannot encode"))
    client.sent[1][1].callback({})
    assert answered == ["good"] and channels.pending(2) == 0 and len(client.sent) == 2
