"""The replica fetcher against a real in-memory leader (handlers through the codec) on
task.Clock, and the leader's ISR tasks with fake ZooKeeper writers."""
from __future__ import annotations

import contextlib
import logging
import os

import pytest
from twisted.internet import defer

from odradek.broker.apis import fetch, list_offsets, offset_for_leader_epoch, produce
from odradek.broker.metadata_cache import PartitionMetadata
from odradek.broker.replication.replica_fetcher import FetchStatus, ReplicaFetcherManager
from odradek.protocol.apis import fetch as fetch_api
from odradek.protocol.apis import list_offsets as list_offsets_api
from odradek.protocol.apis import offset_for_leader_epoch as epoch_api
from odradek.protocol.errors import ErrorCode

from broker_fixtures import Broker, batch, call, call_deferred, fetch_body, produce_body

HANDLERS = {fetch_api: fetch, epoch_api: offset_for_leader_epoch, list_offsets_api: list_offsets}


class LoopbackClient:
    """BrokerClient stand-in: runs the request through the leader's handlers and codec."""

    def __init__(self, target: Broker):
        self.target = target
        self.sent: list = []
        self.closed = False
        self.down = False

    def send(self, api, version, body):
        self.sent.append((api.NAME if hasattr(api, "NAME") else api, body))
        if self.closed or self.down:
            return defer.fail(ConnectionError("down"))
        return call_deferred(self.target, HANDLERS[api], version, body)

    def close(self):
        self.closed = True


def _fired(d):
    box = []
    d.addBoth(box.append)
    return box


def advance(brokers, seconds, step=0.05):
    for _ in range(int(seconds / step)):
        for b in brokers:
            b.clock.advance(step)


def state(leader, epoch, isr, replicas=(1, 2), zk_version=0, topic="t"):
    return PartitionMetadata(topic, 0, 1, leader, epoch, list(isr), zk_version, list(replicas))


@contextlib.contextmanager
def fetching(leader: Broker, follower: Broker):
    """Broker 2 (``follower``) fetches from broker 1 (``leader``) through loopback clients; both
    brokers are closed on the way out. Yields the follower's fetcher manager and its clients."""
    clients: dict = {}

    def factory(leader_id, host, port, fid):
        clients[leader_id] = LoopbackClient({1: leader, 2: follower}[leader_id])
        return clients[leader_id]
    mgr = ReplicaFetcherManager(2, follower.config, follower.rm, follower.clock, client_factory=factory)
    follower.rm.leader_endpoints[1] = ("127.0.0.1", 1)
    try:
        yield mgr, clients
    finally:
        mgr.shutdown()
        follower.close()
        leader.close()


@pytest.fixture
def pair(tmp_path):
    leader = Broker(tmp_path, 1, replica_fetch_wait_max_ms=200, replica_fetch_backoff_ms=100)
    follower = Broker(tmp_path, 2, replica_fetch_wait_max_ms=200, replica_fetch_backoff_ms=100)
    with fetching(leader, follower) as (mgr, clients):
        yield leader, follower, mgr, clients


def log_bytes(broker, topic="t"):
    d = broker.log_manager.get_log((topic, 0)).dir
    return b"".join(open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d)) if n.endswith(".log"))


def test_follower_replicates_and_acks_all_completes(pair):
    leader, follower, mgr, clients = pair
    leader.lead("t", replicas=[1, 2], isr=[1, 2])
    follower.rm.become_leader_or_follower(1, [state(1, 0, [1, 2])])
    box = _fired(call_deferred(leader, produce, 8, produce_body("t", batch(5), acks=-1, timeout_ms=5000)))
    advance([leader, follower], 1.0)
    r = box[0].responses[0].partition_responses[0]
    assert (r.error_code, r.base_offset) == (0, 0)
    fp = follower.rm.get_partition(("t", 0))
    assert fp.log_end_offset == 5 and leader.rm.get_partition(("t", 0)).high_watermark == 5
    advance([leader, follower], 0.5)
    assert fp.high_watermark == 5                     # learned from the next fetch response
    assert log_bytes(leader) == log_bytes(follower)
    # the follower's fetches carried its id and the current leader epoch
    fetches = [b for n, b in clients[1].sent if n == fetch_api.NAME]
    named = [p for b in fetches for t in b["topics"] for p in t["partitions"]]
    assert fetches and all(b["replica_id"] == 2 for b in fetches)
    assert named and all(p["current_leader_epoch"] == 0 for p in named)


def test_follower_fetches_in_an_incremental_session(pair):
    leader, follower, mgr, clients = pair
    for topic in ("t", "u"):
        leader.lead(topic, replicas=[1, 2], isr=[1, 2])
        call(leader, produce, 8, produce_body(topic, batch(2), acks=1))
    follower.rm.become_leader_or_follower(1, [state(1, 0, [1, 2], topic=t) for t in ("t", "u")])
    advance([leader, follower], 1.0)
    assert {tp: follower.rm.get_partition(tp).high_watermark for tp in (("t", 0), ("u", 0))} == \
        {("t", 0): 2, ("u", 0): 2}
    (session,) = leader.ctx.fetch_sessions.sessions.values()
    assert session.owner == (2, "User:ANONYMOUS") and set(session.partitions) == {("t", 0), ("u", 0)}

    def fetches_from(n):
        return [b for name, b in clients[1].sent[n:] if name == fetch_api.NAME]

    # idle: the fetches name nothing, and the leader still records the follower as caught up
    n = len(clients[1].sent)
    advance([leader, follower], 1.0)
    idle = fetches_from(n)
    assert idle and all(b["topics"] == [] and b["session_epoch"] > 0 for b in idle)
    caught_up = leader.rm.get_partition(("t", 0)).remote[2].last_caught_up_time_ms
    assert caught_up >= leader.rm.now_ms() - 500

    # new data on u: it alone comes back, and the next fetch names u alone at its new offset
    n = len(clients[1].sent)
    call(leader, produce, 8, produce_body("u", batch(3), acks=1))
    advance([leader, follower], 0.5)
    assert follower.rm.get_partition(("u", 0)).log_end_offset == 5
    assert log_bytes(leader, "u") == log_bytes(follower, "u")
    named = [(t["topic"], p["fetch_offset"]) for b in fetches_from(n) for t in b["topics"] for p in t["partitions"]]
    assert named == [("u", 5)]

    # the leader lost the session (a restart): one refused fetch, then a full one
    leader.ctx.fetch_sessions.sessions.clear()
    n = len(clients[1].sent)
    advance([leader, follower], 1.0)
    after = fetches_from(n)
    full = next(b for b in after if b["session_epoch"] == 0)
    assert {t["topic"] for t in full["topics"]} == {"t", "u"}
    assert len(leader.ctx.fetch_sessions.sessions) == 1

    # the follower now leads t: the next fetch forgets it
    n = len(clients[1].sent)
    follower.rm.become_leader_or_follower(1, [state(2, 1, [2, 1], topic="t")])
    advance([leader, follower], 0.5)
    assert fetches_from(n)[0]["forgotten_topics_data"] == [{"topic": "t", "partitions": [0]}]
    (session,) = leader.ctx.fetch_sessions.sessions.values()
    assert set(session.partitions) == {("u", 0)}


def test_a_broker_shutting_down_does_not_fetch_the_leaderships_it_hands_over(pair):
    """Its controlled shutdown makes it a follower of what it led: fetching would only put it
    back into those ISRs. What it already follows keeps being fetched until StopReplica."""
    leader, follower, mgr, clients = pair
    leader.lead("t", replicas=[1, 2], isr=[1], leader_epoch=1)
    leader.lead("u", replicas=[1, 2], isr=[1, 2])
    follower.rm.become_leader_or_follower(1, [state(1, 0, [1, 2], topic="u")])
    follower.lead("t", replicas=[2, 1], isr=[2, 1])
    mgr.leaving = True
    follower.rm.become_leader_or_follower(1, [state(1, 1, [1], topic="t")])   # led by 1 now, ISR without 2
    advance([leader, follower], 1.0)
    asked = {t.get("topic", t.get("name")) for _, b in clients[1].sent for t in b["topics"]}
    assert asked == {"u"}
    assert follower.rm.get_partition(("t", 0)).leader_id == 1


def test_returning_old_leader_truncates_divergent_tail(pair):
    leader, follower, mgr, clients = pair
    tp = ("t", 0)
    # epoch 0: broker 1 leads, 3 records replicated to broker 2
    leader.lead("t", replicas=[1, 2], isr=[1, 2])
    follower.rm.become_leader_or_follower(1, [state(1, 0, [1, 2])])
    call(leader, produce, 8, produce_body("t", batch(3), acks=1))
    advance([leader, follower], 0.5)
    assert follower.rm.get_partition(tp).log_end_offset == 3
    # epoch 1: broker 2 leads and writes 2 records nobody replicates
    follower.rm.become_leader_or_follower(1, [state(2, 1, [2])])
    assert mgr.fetching() == {}
    call(follower, produce, 8, produce_body("t", batch(2, value=b"lost"), acks=1))
    assert follower.rm.get_partition(tp).log_end_offset == 5
    # epoch 2: broker 1 leads again (it never saw epoch 1) and writes 4 records
    leader.rm.become_leader_or_follower(1, [state(1, 2, [1])])
    call(leader, produce, 8, produce_body("t", batch(4, value=b"new"), acks=1))
    # broker 2 returns as a follower: drops 3..4 and fetches the leader's 3..6
    follower.rm.become_leader_or_follower(1, [state(1, 2, [1, 2])])
    advance([leader, follower], 1.0)
    fp = follower.rm.get_partition(tp)
    assert fp.log_end_offset == 7
    assert log_bytes(leader) == log_bytes(follower)
    asked = [b for n, b in clients[1].sent if n == epoch_api.NAME]
    assert asked[-1]["topics"][0]["partitions"][0]["leader_epoch"] == 1
    assert [(e.epoch, e.start_offset) for e in fp.log.leader_epoch_cache.entries] == [(0, 0), (2, 3)]


def test_follower_without_epochs_truncates_to_hw(pair):
    leader, follower, mgr, clients = pair
    tp = ("t", 0)
    leader.lead("t", replicas=[1, 2], isr=[1, 2])
    # broker 2 has a log with 4 records but no epoch cache (e.g. older data) and HW 2
    log_ = follower.log_manager.get_or_create_log(tp, follower.rm.log_config("t"))
    log_.append_as_leader(batch(4), -1)
    follower.rm._checkpoint_hws[tp] = 2
    call(leader, produce, 8, produce_body("t", batch(2, value=b"x"), acks=1))
    call(leader, produce, 8, produce_body("t", batch(3, value=b"y"), acks=1))
    follower.rm.become_leader_or_follower(1, [state(1, 0, [1, 2])])
    advance([leader, follower], 1.0)
    assert follower.rm.get_partition(tp).log_end_offset == 5
    assert not [b for n, b in clients[1].sent if n == epoch_api.NAME]


def test_out_of_range_leader_log_start_moved(pair):
    leader, follower, mgr, clients = pair
    tp = ("t", 0)
    leader.lead("t", replicas=[1, 2], isr=[1])
    for _ in range(3):
        call(leader, produce, 8, produce_body("t", batch(2), acks=1))
    lp = leader.rm.get_partition(tp)
    lp.log.roll()
    lp.log.maybe_increment_log_start_offset(4)
    lp.log.delete_old_segments()
    assert lp.log.log_start_offset == 4
    follower.rm.become_leader_or_follower(1, [state(1, 0, [1])])
    advance([leader, follower], 1.0)
    fp = follower.rm.get_partition(tp)
    assert (fp.log.log_start_offset, fp.log_end_offset) == (4, 6)


def test_fenced_and_connection_errors(pair):
    leader, follower, mgr, clients = pair
    tp = ("t", 0)
    leader.lead("t", replicas=[1, 2], isr=[1, 2], leader_epoch=3)
    follower.rm.become_leader_or_follower(1, [state(1, 1, [1, 2])])   # stale epoch 1 < 3
    advance([leader, follower], 0.5)
    assert mgr.fetching() == {}                    # fenced: removed until the next LeaderAndIsr
    follower.rm.become_leader_or_follower(1, [state(1, 3, [1, 2])])
    clients[1].down = True
    advance([leader, follower], 0.5)
    fetcher = next(iter(mgr.fetchers.values()))[1]
    st = fetcher.partitions[tp]     # no epochs: truncated to its HW locally, then fetch failures
    assert st.status is FetchStatus.FETCHING and st.delayed_until > follower.clock.seconds()
    n = len(clients[1].sent)
    advance([leader, follower], 0.5)
    assert 2 <= len(clients[1].sent) - n <= 8      # retried with backoff, not a busy loop
    clients[1].down = False
    call(leader, produce, 8, produce_body("t", batch(2), acks=1))
    advance([leader, follower], 1.0)
    assert follower.rm.get_partition(tp).log_end_offset == 2
    # becoming leader removes it from the fetcher; the idle fetcher is shut down
    follower.rm.become_leader_or_follower(1, [state(2, 4, [2, 1])])
    assert mgr.fetching() == {} and mgr.fetchers == {} and clients[1].closed
    # StopReplica removes it as well
    follower.rm.become_leader_or_follower(1, [state(1, 5, [1, 2])])
    assert mgr.fetching() == {tp: 1}
    follower.rm.stop_replicas(1, [(tp, False, 6)])
    assert mgr.fetching() == {}


# ------------------------------------------------------------ leader ISR tasks

class FakeZk:
    def __init__(self):
        self.version = 0
        self.writes: list = []
        self.notifications: list = []
        self.mismatch = False

    def write(self, states):
        out = {}
        for tp, st in states.items():
            self.writes.append((tp, list(st.isr), st.zk_version, st.leader_epoch))
            if self.mismatch or st.zk_version != self.version:
                out[tp] = None
            else:
                self.version += 1
                out[tp] = self.version
        return defer.succeed(out)

    def notify(self, tps):
        self.notifications.append(list(tps))
        return defer.succeed("/isr_change_notification/isr_change_0000000000")


@pytest.fixture
def lone_leader(tmp_path):
    b = Broker(tmp_path, 1, replica_lag_time_max_ms=1000, replica_fetch_wait_max_ms=200, min_insync_replicas=2)
    zk = FakeZk()
    b.rm.isr_writer, b.rm.isr_notifier = zk.write, zk.notify
    b.rm.shutdown()          # restart the tasks on the fixture's clock
    b.rm.startup()
    b.clock.advance(1)
    yield b, zk
    b.close()


def test_shrink_completes_parked_produce_then_expand_and_propagate(lone_leader):
    b, zk = lone_leader
    tp = ("t", 0)
    b.lead("t", replicas=[1, 2], isr=[1, 2])
    box = _fired(call_deferred(b, produce, 8, produce_body("t", batch(3), acks=-1, timeout_ms=10000)))
    b.clock.advance(1.0)
    assert box == [] and zk.writes == []            # not lagging for longer than 1000 ms yet
    b.clock.advance(0.6)
    assert zk.writes == [(tp, [1], 0, 0)]
    assert b.rm.get_partition(tp).isr == [1]
    r = box[0].responses[0].partition_responses[0]
    assert r.error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert b.rm.get_partition(tp).high_watermark == 3
    r = call(b, produce, 8, produce_body("t", batch(1), acks=-1)).responses[0].partition_responses[0]
    assert r.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    r = call(b, produce, 8, produce_body("t", batch(1), acks=1)).responses[0].partition_responses[0]
    assert (r.error_code, r.base_offset) == (0, 3)
    # the follower catches up: ISR expands (written by the leader), HW follows it
    call(b, fetch, 11, fetch_body("t", offset=2, replica_id=2))
    assert len(zk.writes) == 1
    call(b, fetch, 11, fetch_body("t", offset=4, replica_id=2))
    assert zk.writes[-1] == (tp, [1, 2], 1, 0) and b.rm.get_partition(tp).isr == [1, 2]
    # one notification, once 5 s passed without changes (checked every 2.5 s)
    assert zk.notifications == []
    b.clock.advance(2.5)
    assert zk.notifications == []
    b.clock.advance(5.0)
    assert zk.notifications == [[tp]]
    b.clock.advance(10)
    assert zk.notifications == [[tp]]


def test_shrink_skipped_on_zk_version_mismatch(lone_leader):
    b, zk = lone_leader
    tp = ("t", 0)
    zk.mismatch = True
    b.lead("t", replicas=[1, 2], isr=[1, 2])
    call(b, produce, 8, produce_body("t", batch(3), acks=1))
    b.clock.advance(2.0)
    p = b.rm.get_partition(tp)
    assert zk.writes and p.isr == [1, 2] and p.pending_isr is None
    b.clock.advance(10)
    assert zk.notifications == []


def test_hw_checkpoint_is_the_real_hw(lone_leader, tmp_path):
    b, zk = lone_leader
    b.lead("t", replicas=[1, 2], isr=[1, 2])
    call(b, produce, 8, produce_body("t", batch(3), acks=1))
    call(b, fetch, 11, fetch_body("t", offset=2, replica_id=2))
    b.rm.checkpoint_high_watermarks()
    assert b.log_manager.read_high_watermarks()[("t", 0)] == 2


def test_isr_changes_of_many_partitions_log_one_info_line_per_batch(lone_leader, caplog):
    b, zk = lone_leader
    versions: dict = {}

    batches: list[int] = []

    def write(states):   # a zkVersion per partition
        batches.append(len(states))
        for tp, st in states.items():
            assert st.zk_version == versions.get(tp, 0)
            versions[tp] = st.zk_version + 1
        return defer.succeed({tp: versions[tp] for tp in states})
    b.rm.isr_writer = write
    b.lead("t", partitions=20, replicas=[1, 2], isr=[1, 2])
    with caplog.at_level(logging.INFO, logger="odradek.broker.replication"):
        b.clock.advance(1.6)                        # the follower never fetched: 20 shrinks, one run
        assert all(p.isr == [1] for p in b.rm.partitions.values())
        body = fetch_body("t", replica_id=2)
        body["topics"][0]["partitions"] = [dict(body["topics"][0]["partitions"][0], partition=p) for p in range(20)]
        call(b, fetch, 11, body)                    # caught up on all 20: 20 expansions, one fetch
        assert all(p.isr == [1, 2] for p in b.rm.partitions.values()) and set(versions.values()) == {2}
        assert batches == [20, 20]                  # the shrinks in one ZooKeeper batch, the expansions in another
        b.clock.advance(7.5)
        assert len(zk.notifications) == 1 and len(zk.notifications[0]) == 20
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("odradek.broker.replication")]
    assert lines == ["shrinking the ISR of 20 partitions: t-0 to [1] (out of sync: [2]), t-1 to [1] (out of sync: "
                     "[2]), t-2 to [1] (out of sync: [2]) and 17 more",
                     "expanding the ISR of 20 partitions with replica 2 (t-0, t-1, t-2 and 17 more)",
                     "ISR changed for 20 partitions: writing an ISR change notification (t-0, t-1, t-2 and 17 more)"]


def test_the_coordinators_hear_only_of_new_leaderships_and_leader_changes(tmp_path):
    """As Kafka's onLeadershipChange: an ISR shrink's LeaderAndIsr (new leader epoch, same
    leader) must not make the group or transaction coordinator reload a partition it owns."""
    from broker_fixtures import Broker

    from odradek.broker.metadata_cache import PartitionMetadata
    b = Broker(tmp_path, broker_id=1)
    heard: list[tuple[list, list]] = []
    b.rm.on_leadership_change = lambda leaders, followers: heard.append(
        ([p.partition for p in leaders], [p.partition for p in followers]))
    try:
        b.set_metadata({"__consumer_offsets": {0: (1, [1, 2, 3], [1, 2, 3]), 1: (2, [1, 2, 3], [1, 2, 3])}},
                       brokers=(1, 2, 3))

        def lai(partition: int, leader: int, epoch: int, isr: list[int]) -> PartitionMetadata:
            return PartitionMetadata("__consumer_offsets", partition, 1, leader, epoch, isr, epoch, [1, 2, 3])
        b.rm.become_leader_or_follower(1, [lai(0, 1, 1, [1, 2, 3]), lai(1, 2, 1, [1, 2, 3])])
        assert heard.pop() == ([0], [1])
        b.rm.become_leader_or_follower(1, [lai(0, 1, 2, [1, 3]), lai(1, 2, 2, [1, 2])])   # ISR shrinks
        # no leader reload; a follower's new epoch is passed on as Kafka's makeFollower does (a no-op
        # for a coordinator that does not own the partition)
        assert heard.pop() == ([], [1])
        b.rm.become_leader_or_follower(1, [lai(1, 1, 3, [1, 2])])   # leads 1 now
        assert heard.pop() == ([1], [])
        b.rm.become_leader_or_follower(1, [lai(0, 3, 3, [3])])      # 0 moved away
        assert heard.pop() == ([], [0])
    finally:
        b.close()


def test_failed_isr_batch_leaves_every_isr_as_it_was(lone_leader, caplog):
    b, zk = lone_leader
    b.rm.isr_writer = lambda states: defer.fail(RuntimeError("connection loss"))
    b.lead("t", partitions=3, replicas=[1, 2], isr=[1, 2])
    with caplog.at_level(logging.WARNING, logger="odradek.broker.replication"):
        b.clock.advance(1.6)                        # three shrinks, one batch, which fails
    assert all(p.isr == [1, 2] and p.pending_isr is None for p in b.rm.partitions.values())
    assert [r.getMessage() for r in caplog.records if "partitions failed" in r.getMessage()] == \
        ["updating the ISR of 3 partitions failed: t-0: connection loss, t-1: connection loss, "
         "t-2: connection loss"]
