"""Transaction API handlers over a real LogManager, ReplicaManager and
TransactionCoordinatorService on a ``task.Clock``: the codec, version mapping of
PRODUCER_FENCED, FindCoordinator for transactional ids, markers through the
WriteTxnMarkers handler (a loopback channel client), and loading ``__transaction_state``
from a real log."""
from __future__ import annotations

import pytest
from twisted.internet import defer

from odradek.broker.apis import (add_offsets_to_txn, add_partitions_to_txn, end_txn, find_coordinator,
                                 init_producer_id, write_txn_markers)
from odradek.broker.apis.context import RequestContext
from odradek.broker.group.offsets import partition_for
from odradek.broker.txn import TRANSACTION_STATE_TOPIC
from odradek.broker.txn.metadata import TxnState
from odradek.broker.txn.service import TransactionCoordinatorService
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.record_batch import iter_headers

from broker_fixtures import Broker, call, call_deferred

TXN_PARTITIONS = 2


class FakePids:
    def __init__(self):
        self.next = 4000

    async def generate(self) -> int:
        self.next += 1
        return self.next


class LoopbackClient:
    """A BrokerClient stand-in that hands WriteTxnMarkers to the broker's own handler."""

    broker: "TxnBroker"

    def __init__(self, reactor, host, port, client_id, request_timeout_ms=30000, fail_when_unreachable=False):
        self.sent = 0

    def send(self, api, version, body) -> defer.Deferred:
        assert api is write_txn_markers.API
        self.sent += 1
        return call_deferred(LoopbackClient.broker, write_txn_markers, version, body)

    def close(self) -> None:
        pass


class TxnBroker(Broker):
    def __init__(self, tmp_path, **overrides):
        overrides = {"transaction.state.log.num.partitions": TXN_PARTITIONS,
                     "offsets.topic.num.partitions": 3, **overrides}
        super().__init__(tmp_path, **overrides)
        LoopbackClient.broker = self
        self.service = self.new_service()

    def new_service(self) -> TransactionCoordinatorService:
        service = TransactionCoordinatorService(self.config, self.rm, self.cache, self.clock, FakePids(), 1,
                                                client_factory=LoopbackClient)
        self.ctx.txn_coordinator = service.coordinator
        service.startup()
        return service

    def setup_topics(self, leader_epoch: int = 0) -> None:
        self.set_metadata({TRANSACTION_STATE_TOPIC: {p: (1, [1], [1]) for p in range(TXN_PARTITIONS)},
                           "t": {0: (1, [1], [1]), 1: (1, [1], [1])},
                           "__consumer_offsets": {p: (1, [1], [1]) for p in range(3)}},
                          leader_epoch=leader_epoch)
        from odradek.broker.metadata_cache import PartitionMetadata
        states = [PartitionMetadata(t, p, 1, 1, leader_epoch, [1], 0, [1])
                  for t, n in ((TRANSACTION_STATE_TOPIC, TXN_PARTITIONS), ("t", 2), ("__consumer_offsets", 3))
                  for p in range(n)]
        top, errors = self.rm.become_leader_or_follower(1, states)
        assert int(top) == 0 and all(int(c) == 0 for c in errors.values()), errors
        self.service.on_leadership_change(
            [p for p in self.rm.partitions.values() if p.topic == TRANSACTION_STATE_TOPIC], [])
        self.settle()

    def settle(self) -> None:
        for _ in range(50):
            self.clock.advance(0)

    def close(self) -> None:
        self.service.shutdown()
        super().close()


@pytest.fixture
def broker(tmp_path):
    b = TxnBroker(tmp_path)
    b.setup_topics()
    yield b
    b.close()


def run(broker: TxnBroker, handler, version: int, body: dict):
    d = call_deferred(broker, handler, version, body)
    broker.settle()
    box: list = []
    d.addBoth(box.append)
    assert box, "no answer"
    if hasattr(box[0], "raiseException"):
        box[0].raiseException()
    return box[0]


def init(broker, version=4, txn_id="tx", timeout=60000, pid=-1, epoch=-1):
    body = {"transactional_id": txn_id, "transaction_timeout_ms": timeout}
    if version >= 3:
        body.update(producer_id=pid, producer_epoch=epoch)
    return run(broker, init_producer_id, version, body)


def add(broker, pid, epoch, topics=(("t", [0, 1]),), version=3, txn_id="tx"):
    return run(broker, add_partitions_to_txn, version, {
        "transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
        "topics": [{"name": n, "partitions": ps} for n, ps in topics]})


def end(broker, pid, epoch, commit, version=3, txn_id="tx"):
    return run(broker, end_txn, version, {"transactional_id": txn_id, "producer_id": pid,
                                          "producer_epoch": epoch, "committed": commit})


def control_batches(broker, tp) -> list:
    log_ = broker.rm.get_partition(tp).log
    blob = log_.read(0, 1 << 20, None, True)
    data = getattr(blob, "records", blob)
    return [h for _, h in iter_headers(bytes(data)) if h.is_control]


def test_commit_end_to_end_writes_markers_and_complete(broker):
    r = init(broker)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 4001, 0)
    resp = add(broker, r.producer_id, r.producer_epoch)
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.results]) for t in resp.results] == \
        [("t", [(0, 0), (1, 0)])]
    assert end(broker, r.producer_id, r.producer_epoch, True).error_code == 0
    broker.settle()
    md = broker.service.coordinator.manager.get("tx")[2]
    assert md.state is TxnState.COMPLETE_COMMIT and not md.pending
    for p in (0, 1):
        [marker] = control_batches(broker, ("t", p))
        assert (marker.producer_id, marker.producer_epoch) == (r.producer_id, r.producer_epoch)
    # a retried commit is fine, an abort of it is not
    assert end(broker, r.producer_id, r.producer_epoch, True).error_code == 0
    assert end(broker, r.producer_id, r.producer_epoch, False).error_code == E.INVALID_TXN_STATE


def test_add_offsets_adds_the_groups_offsets_partition(broker):
    r = init(broker)
    resp = run(broker, add_offsets_to_txn, 3, {"transactional_id": "tx", "producer_id": r.producer_id,
                                              "producer_epoch": r.producer_epoch, "group_id": "grp"})
    assert resp.error_code == 0
    md = broker.service.coordinator.manager.get("tx")[2]
    assert md.partitions == {("__consumer_offsets", partition_for("grp", 3))}


def test_unknown_topics_fail_the_whole_add(broker):
    r = init(broker)
    resp = add(broker, r.producer_id, r.producer_epoch, topics=(("t", [0]), ("nope", [0])))
    codes = {(t.name, p.partition_index): p.error_code for t in resp.results for p in t.results}
    assert codes == {("t", 0): E.OPERATION_NOT_ATTEMPTED, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert broker.service.coordinator.manager.get("tx")[2].state is TxnState.EMPTY


@pytest.mark.parametrize("version,expected", [(0, E.INVALID_PRODUCER_EPOCH), (1, E.INVALID_PRODUCER_EPOCH),
                                              (2, E.PRODUCER_FENCED), (3, E.PRODUCER_FENCED)])
def test_producer_fenced_by_request_version(broker, version, expected):
    r = init(broker)
    init(broker)                                 # a second producer bumps the epoch
    assert end(broker, r.producer_id, r.producer_epoch, True, version=version).error_code == expected
    assert add(broker, r.producer_id, r.producer_epoch, version=version).results[0].results[0].error_code \
        == expected
    resp = run(broker, add_offsets_to_txn, version, {"transactional_id": "tx", "producer_id": r.producer_id,
                                                    "producer_epoch": r.producer_epoch, "group_id": "g"})
    assert resp.error_code == expected


@pytest.mark.parametrize("version,expected", [(3, E.INVALID_PRODUCER_EPOCH), (4, E.PRODUCER_FENCED)])
def test_init_producer_id_fenced_by_version(broker, version, expected):
    r = init(broker)
    init(broker)
    init(broker)      # the last epoch is forgotten by a plain InitProducerId
    assert init(broker, version, pid=r.producer_id + 1, epoch=0).error_code == expected


def test_init_with_an_open_transaction_aborts_it_then_answers(broker):
    r = init(broker)
    add(broker, r.producer_id, r.producer_epoch)
    assert init(broker).error_code == E.CONCURRENT_TRANSACTIONS
    broker.settle()
    for p in (0, 1):
        [marker] = control_batches(broker, ("t", p))
        assert marker.producer_epoch == r.producer_epoch + 1
    again = init(broker)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, r.producer_id, 2)
    assert end(broker, r.producer_id, r.producer_epoch, True).error_code == E.PRODUCER_FENCED


def test_invalid_timeout_and_empty_id(broker):
    assert init(broker, timeout=900_001).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert init(broker, txn_id="").error_code == E.INVALID_REQUEST


def test_find_coordinator_for_transactional_ids(broker):
    resp = call(broker, find_coordinator, 2, {"key": "tx", "key_type": 1})
    assert (resp.error_code, resp.node_id, resp.port) == (0, 1, 9091)


class FakeAdmin:
    def __init__(self):
        self.calls = []

    def create_topic(self, *args):
        self.calls.append(args)
        return {}


def test_find_coordinator_creates_the_transaction_topic(tmp_path):
    b = Broker(tmp_path, transaction_state_log_replication_factor=1)
    try:
        b.ctx.admin = FakeAdmin()
        b.set_metadata({"t": {0: (1, [1], [1])}})
        resp = call(b, find_coordinator, 1, {"key": "tx", "key_type": 1})
        assert resp.error_code == E.COORDINATOR_NOT_AVAILABLE
        [(name, partitions, rf, configs)] = b.ctx.admin.calls
        assert (name, partitions, rf) == ("__transaction_state", 50, 1)
        assert configs == {"cleanup.policy": "compact", "segment.bytes": "104857600",
                           "compression.type": "uncompressed", "min.insync.replicas": "2",
                           "unclean.leader.election.enable": "false"}
        b.ctx.admin.calls.clear()
        b2 = Broker(tmp_path / "b2")          # replication factor 3 with one live broker: not created
        b2.ctx.admin = FakeAdmin()
        b2.set_metadata({"t": {0: (1, [1], [1])}})
        assert call(b2, find_coordinator, 1, {"key": "tx", "key_type": 1}).error_code == \
            E.COORDINATOR_NOT_AVAILABLE
        assert b2.ctx.admin.calls == []
        b2.close()
    finally:
        b.close()


def test_loading_the_log_resumes_a_prepared_commit(tmp_path):
    b = TxnBroker(tmp_path)
    try:
        b.setup_topics()
        r = init(b)
        add(b, r.producer_id, r.producer_epoch)
        # keep the markers from going out: PrepareCommit is durable, Complete is not
        b.service.channel.send = lambda job: None
        assert end(b, r.producer_id, r.producer_epoch, True).error_code == 0
        p = partition_for("tx", TXN_PARTITIONS)
        b.service.shutdown()
        b.service = b.new_service()                 # a new coordinator on the same logs
        b.setup_topics(leader_epoch=1)              # becomes leader again at epoch 1
        md = b.service.coordinator.manager.get("tx")[2]
        assert md.state is TxnState.COMPLETE_COMMIT
        assert b.service.coordinator.manager.coordinator_epoch(p) == 1
        for part in (0, 1):
            [marker] = control_batches(b, ("t", part))
            assert marker.producer_id == r.producer_id
        assert end(b, r.producer_id, r.producer_epoch, True).error_code == 0
    finally:
        b.close()


def test_resigning_answers_not_coordinator(broker):
    init(broker)
    p = partition_for("tx", TXN_PARTITIONS)
    broker.service.on_stop_replicas([(TRANSACTION_STATE_TOPIC, p)])
    assert init(broker).error_code == E.NOT_COORDINATOR


def test_handlers_before_the_coordinator_started(tmp_path):
    b = Broker(tmp_path)
    try:
        rc = RequestContext(22, 4, 1, "c")
        req = init_producer_id.API.Request.decode(init_producer_id.API.Request.encode(
            {"transactional_id": "tx", "transaction_timeout_ms": 1000}, 4), 4)
        assert init_producer_id.handle(b.ctx, rc, req)["error_code"] == E.COORDINATOR_NOT_AVAILABLE
        assert call(b, end_txn, 3, {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                                    "committed": True}).error_code == E.COORDINATOR_NOT_AVAILABLE
    finally:
        b.close()
