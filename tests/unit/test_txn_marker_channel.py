"""TxnMarkerChannel on a ``task.Clock`` with scripted broker clients: grouping by leader,
retries with a fresh leader lookup, waiting for a leader, deleted topics, fenced markers."""
from __future__ import annotations

from twisted.internet import defer, task

from odradek.broker.metadata_cache import BrokerMetadata, MetadataCache, PartitionMetadata
from odradek.broker.network.broker_client import ClientClosedError, DisconnectedError
from odradek.broker.txn import MarkerJob
from odradek.broker.txn.marker_channel import TxnMarkerChannel
from odradek.protocol.apis import write_txn_markers as API
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.header import decode_request, encode_request, encode_response, decode_response


class Coordinator:
    def __init__(self):
        self.written: list = []
        self.dropped: list = []
        self.abandoned: list = []

    def is_job_live(self, job: MarkerJob) -> bool:
        return not job.cancelled

    def marker_written(self, job, tp) -> bool:
        self.written.append(tp)
        job.pending.discard(tp)
        return True

    def marker_partition_dropped(self, job, tp) -> bool:
        self.dropped.append(tp)
        job.pending.discard(tp)
        return True

    def abandon_markers(self, job) -> None:
        self.abandoned.append(job)
        job.cancelled = True


class Brokers:
    """Scripted clients: ``answers[broker]`` is a list of per-partition error maps or exceptions."""

    def __init__(self):
        self.requests: list[tuple[int, dict]] = []
        self.answers: dict[int, list] = {}
        self.by_port = {9091: 1, 9092: 2}

    def factory(self, reactor, host, port, client_id, request_timeout_ms=30000, fail_when_unreachable=False):
        broker = self.by_port[port]
        outer = self
        assert fail_when_unreachable, "markers must not wait in a client for a broker that is down"

        class Client:
            hung: list[defer.Deferred] = []

            def send(self, api, version, body):
                # through the real codec, as the network would
                _, req = decode_request(encode_request(api, version, 1, "c", body))
                outer.requests.append((broker, req))
                script = outer.answers.get(broker, [])
                answer = script.pop(0) if script else {}
                if answer == "hang":   # a broker that stopped answering (SIGKILL mid-request)
                    d: defer.Deferred = defer.Deferred()
                    self.hung.append(d)
                    return d
                if isinstance(answer, Exception):
                    return defer.fail(answer)
                resp = {"markers": [{"producer_id": m.producer_id, "topics": [
                    {"name": t.name, "partitions": [
                        {"partition_index": i, "error_code": int(answer.get((t.name, i), E.NONE))}
                        for i in t.partition_indexes]} for t in m.topics]} for m in req.markers]}
                _, body = decode_response(api, version, encode_response(api, version, 1, resp))
                return defer.succeed(body)

            def close(self):
                for d in self.hung:
                    d.errback(ClientClosedError("closed"))
                self.hung.clear()
        return Client()


def setup(leaders: dict[tuple[str, int], int], alive=(1, 2)):
    clock = task.Clock()
    cache = MetadataCache(1)
    set_leaders(cache, leaders, alive)
    brokers = Brokers()
    coord = Coordinator()
    channel = TxnMarkerChannel(clock, 1, cache, "PLAINTEXT", coord, client_factory=brokers.factory,
                               retry_backoff_ms=100)
    return clock, cache, brokers, coord, channel


def set_leaders(cache, leaders, alive=(1, 2)):
    states = [PartitionMetadata(t, p, 1, leader, 0, [leader], 0, [1, 2]) for (t, p), leader in leaders.items()]
    cache.update(1, 1, [BrokerMetadata(b, {"PLAINTEXT": ("127.0.0.1", 9090 + b)}) for b in alive], states)


def job(*tps, pid=7, epoch=3, commit=True) -> MarkerJob:
    return MarkerJob("tx", 0, 5, pid, epoch, commit, set(tps))


def sent(req) -> set[tuple[str, int]]:
    return {(t.name, i) for m in req.markers for t in m.topics for i in t.partition_indexes}


def test_one_request_per_leader_with_the_marker_fields():
    clock, cache, brokers, coord, channel = setup({("a", 0): 1, ("a", 1): 2, ("b", 0): 1})
    channel.send(job(("a", 0), ("a", 1), ("b", 0)))
    assert sorted(b for b, _ in brokers.requests) == [1, 2]
    by_broker = {b: req for b, req in brokers.requests}
    assert sent(by_broker[1]) == {("a", 0), ("b", 0)} and sent(by_broker[2]) == {("a", 1)}
    [m] = by_broker[1].markers
    assert (m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch) == (7, 3, True, 5)
    assert sorted(coord.written) == [("a", 0), ("a", 1), ("b", 0)]
    assert channel.pending_count() == 0


def test_not_leader_is_retried_at_the_new_leader_after_the_backoff():
    clock, cache, brokers, coord, channel = setup({("a", 0): 1})
    brokers.answers[1] = [{("a", 0): E.NOT_LEADER_OR_FOLLOWER}]
    channel.send(job(("a", 0)))
    assert coord.written == [] and len(brokers.requests) == 1
    set_leaders(cache, {("a", 0): 2})
    clock.advance(0.1)
    assert [b for b, _ in brokers.requests] == [1, 2]
    assert coord.written == [("a", 0)]


def test_network_failure_is_retried():
    clock, cache, brokers, coord, channel = setup({("a", 0): 2})
    brokers.answers[2] = [DisconnectedError("gone")]
    channel.send(job(("a", 0)))
    assert coord.written == []
    clock.advance(0.1)
    assert coord.written == [("a", 0)] and len(brokers.requests) == 2


def test_in_flight_markers_follow_a_leader_that_died():
    """The leader dies with the markers in flight: when the metadata cache drops it and names a
    new leader, the request to the dead broker is given up and the markers go to the new one
    (the coordinator-failover case: no wait for request.timeout.ms)."""
    clock, cache, brokers, coord, channel = setup({("a", 0): 2})
    brokers.answers[2] = ["hang"]
    channel.send(job(("a", 0)))
    assert coord.written == [] and channel.pending_count() == 1
    set_leaders(cache, {("a", 0): 1}, alive=(1,))
    clock.advance(0.1)
    assert [b for b, _ in brokers.requests] == [2, 1]
    assert coord.written == [("a", 0)] and channel.pending_count() == 0


def test_waits_for_a_leader_then_sends():
    clock, cache, brokers, coord, channel = setup({("a", 0): -1})
    channel.send(job(("a", 0)))
    assert brokers.requests == [] and channel.pending_count() == 1
    set_leaders(cache, {("a", 0): 1})          # the metadata update wakes the channel
    assert coord.written == [("a", 0)]


def test_deleted_topic_is_dropped():
    clock, cache, brokers, coord, channel = setup({("a", 0): 1})
    channel.send(job(("a", 0), ("gone", 0)))
    assert coord.dropped == [("gone", 0)] and coord.written == [("a", 0)]


def test_fenced_markers_abandon_the_job():
    clock, cache, brokers, coord, channel = setup({("a", 0): 1, ("a", 1): 1})
    brokers.answers[1] = [{("a", 0): E.INVALID_PRODUCER_EPOCH}]
    j = job(("a", 0), ("a", 1))
    channel.send(j)
    assert coord.abandoned == [j]
    clock.advance(1)
    assert len(brokers.requests) == 1


def test_cancelled_jobs_are_not_sent():
    clock, cache, brokers, coord, channel = setup({("a", 0): 1})
    brokers.answers[1] = [{("a", 0): E.NOT_ENOUGH_REPLICAS}]
    j = job(("a", 0))
    channel.send(j)
    j.cancelled = True
    clock.advance(1)
    assert len(brokers.requests) == 1 and channel.pending_count() == 0
