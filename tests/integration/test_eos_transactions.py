"""Transactions with third-party clients against a real cluster (3-node ZooKeeper ensemble,
3 broker processes, every topic RF 3 with min.insync.replicas=2).

a. Consume-transform-produce: a loop process (eos_txn_loop.py) reads numbered input with
   isolation.level=read_committed, writes value*2 keyed by the input position, and commits
   its consumer offsets in the same transaction (send_offsets_to_transaction). It is
   kill -9'd at seeded random points and restarted with the same transactional.id and group
   until the group's committed offsets reach the end of the input; a read_committed reader
   of the output then sees every input record transformed exactly once, in input order.
b. Commit, abort, commit: read_committed readers (confluent-kafka, kafka-python, aiokafka)
   see the first and third transaction in order and nothing of the second;
   read_uncommitted readers see all three. A transaction left open past its
   transaction.timeout.ms is aborted by the coordinator, which fences its producer.
c. Zombie fencing: a second producer with the same transactional.id fences the first; the
   first one's further produce and commit fail with the client's fencing error, and its
   open transaction is aborted (in the log, invisible to read_committed).
d. Coordinator failover: the broker leading the transaction's __transaction_state
   partition is kill -9'd after commit_transaction returned (the transaction stays fully
   visible, the producer commits another one through the new coordinator), or with a
   transaction open, before or during commit_transaction (the transaction ends up fully
   visible or fully invisible to read_committed, never partially). kafka-python 3.0.12
   drops its queued EndTxn/AddPartitionsToTxn when the cached coordinator refuses
   connections, so commit_transaction never returns: with it the test does what an
   application's watchdog would, a new producer with the same transactional.id takes over.
e. Coordinator and output leader at once: the output topic is created with the coordinator as
   partition 0's preferred leader, and that broker is kill -9'd inside (or just after) a
   consume-transform-produce commit. The new coordinator sends the markers to the new leaders:
   the producer's next transaction commits within FAILOVER_BOUND_S of the kill (far below
   transaction.timeout.ms), and read_committed readers see every acknowledged committed record.

Every record under test is followed by a non-transactional END record per partition;
readers stop at it, so a read_committed reader reaching it proves the last stable offset
moved past every transaction before it. Randomness is seeded (EOS_TEST_SEED to replay);
the seed is printed and part of every failure message.
"""
from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter

import pytest

from eos_support import (EOS_OVERRIDES, Loops, create_topic, find_coordinator, full_isr, read_until_end,
                         txn_coordinator, txn_coordinator_everywhere, wait_until, write_end_markers)
from groups_support import committed, produce, wait_for_coordinator
from odradek_test_support import _failed, synced

TXN_CLIENTS = ["confluent-kafka", "kafka-python"]
SEED = int(os.environ.get("EOS_TEST_SEED", random.SystemRandom().randrange(1 << 31)))


# ------------------------------------------------------------------ cluster shared by this module

@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    from odradek.testing import ObservedCluster
    c = ObservedCluster(tmp_path_factory.mktemp("eos-txn-cluster"), zookeepers=3, brokers=3,
                        overrides=EOS_OVERRIDES)
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def cluster(shared_cluster, request):
    """The module's cluster; a failing test gets the tail of every broker log in its report."""
    from odradek.zk.ensemble import log_tail
    print(f"\nEOS_TEST_SEED={SEED}")
    yield shared_cluster
    if _failed(request):
        for broker in shared_cluster.brokers.values():
            print(f"\n--- tail of {broker.log_path}:\n{log_tail(broker.log_path, 80)}")


@pytest.fixture
def loops(tmp_path):
    m = Loops(tmp_path)
    try:
        yield m
    finally:
        m.stop_all()


def all_replicas_in_sync(cluster) -> bool:
    """Every partition of every topic (internal ones too) has its full replica set in the ISR."""
    import json
    for topic in cluster.zk.get_children("/brokers/topics"):
        data, _ = cluster.zk.get(f"/brokers/topics/{topic}")
        for p, replicas in json.loads(data)["partitions"].items():
            try:
                isr = cluster.isr(topic, int(p))
            except Exception:  # noqa: BLE001 - state not written yet
                return False
            if sorted(isr) != sorted(replicas):
                return False
    return True


# ------------------------------------------------------------------ transactional producers
# Both adapters: init(), begin(), send(topic, value, partition), flush(), send_offsets(topic, offsets, group),
# commit(), abort(), close().

class ConfluentTxn:
    client = "confluent-kafka"

    def __init__(self, bootstrap: str, transactional_id: str, timeout_ms: int = 60000):
        import confluent_kafka as ck
        self.ck = ck
        self.bootstrap = bootstrap
        self.errors: list = []
        self.p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                              "transaction.timeout.ms": timeout_ms, "linger.ms": 5, "request.timeout.ms": 10000,
                              "retry.backoff.ms": 100})

    def init(self) -> None:
        self.p.init_transactions(120)

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(self, topic: str, value: bytes, partition: int) -> None:
        self.p.produce(topic, value, partition=partition,
                       on_delivery=lambda err, msg: err is not None and self.errors.append(err))
        self.p.poll(0)

    def flush(self) -> None:
        left = self.p.flush(60)
        assert left == 0 and not self.errors, f"confluent-kafka: {left} undelivered, errors {self.errors[:3]}"

    def send_offsets(self, topic: str, offsets: dict[int, int], group: str) -> None:
        """The group's next offsets of ``topic`` as part of the transaction (send_offsets_to_transaction)."""
        member = self.ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": group})
        try:
            self.p.send_offsets_to_transaction([self.ck.TopicPartition(topic, p, o) for p, o in offsets.items()],
                                               member.consumer_group_metadata(), 60)
        finally:
            member.close()

    def commit(self) -> None:
        self.p.commit_transaction(120)

    def abort(self) -> None:
        self.p.abort_transaction(120)

    def close(self) -> None:
        self.p.flush(5)

    def is_fenced(self, exc: BaseException) -> bool:
        err = exc.args[0] if isinstance(exc, self.ck.KafkaException) and exc.args else None
        return err is not None and err.code() in (self.ck.KafkaError._FENCED, self.ck.KafkaError.PRODUCER_FENCED,
                                                  self.ck.KafkaError.INVALID_PRODUCER_EPOCH)


class KafkaPythonTxn:
    client = "kafka-python"

    def __init__(self, bootstrap: str, transactional_id: str, timeout_ms: int = 60000):
        from kafka import KafkaProducer
        self.futures: list = []
        self.p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                               enable_idempotence=True, acks="all", transaction_timeout_ms=timeout_ms, linger_ms=5,
                               request_timeout_ms=10000, retry_backoff_ms=100, max_block_ms=120000)

    def init(self) -> None:
        self.p.init_transactions()

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(self, topic: str, value: bytes, partition: int) -> None:
        self.futures.append(self.p.send(topic, value=value, partition=partition))

    def flush(self) -> None:
        self.p.flush(60)
        futures, self.futures = self.futures, []
        for f in futures:
            f.get(timeout=60)

    def send_offsets(self, topic: str, offsets: dict[int, int], group: str) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata
        self.p.send_offsets_to_transaction({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                                            for p, o in offsets.items()}, group)

    def commit(self) -> None:
        self.p.commit_transaction()

    def abort(self) -> None:
        self.p.abort_transaction()

    def close(self) -> None:
        import kafka.errors as Errors
        try:
            self.p.close(10)
        except Errors.KafkaTimeoutError:  # a producer stuck on a dead coordinator (see _commit_or_recover)
            pass

    def is_fenced(self, exc: BaseException) -> bool:
        import kafka.errors as Errors
        return isinstance(exc, (Errors.ProducerFencedError, Errors.InvalidProducerEpochError))


TXN_PRODUCERS = {"confluent-kafka": ConfluentTxn, "kafka-python": KafkaPythonTxn}


def values_of(seen: dict) -> dict[int, list[bytes]]:
    return {p: [v for _, _, v in recs] for p, recs in seen.items()}


# ------------------------------------------------------------------ a. consume-transform-produce

N = 300
IN_PARTITIONS = 3
KILLS = 4


@pytest.mark.parametrize("client", TXN_CLIENTS)
def test_consume_transform_produce_is_exactly_once_across_kill_9(cluster, loops, client):
    rng = random.Random(f"{SEED}-{client}")
    tag = client.replace("-", "")
    in_topic, out_topic, group, txn_id = f"ctp-in-{tag}", f"ctp-out-{tag}", f"ctp-{tag}", f"ctp-{tag}-txn"
    create_topic(cluster, in_topic, IN_PARTITIONS)
    create_topic(cluster, out_topic, IN_PARTITIONS)
    produce(cluster, in_topic, [str(i) for i in range(N)], partitions=IN_PARTITIONS)  # i -> partition i % 3
    wait_for_coordinator(cluster, group)
    end = {p: N // IN_PARTITIONS for p in range(IN_PARTITIONS)}
    commit_every, delay_ms = rng.randint(3, 9), rng.choice([5, 10, 20])
    args = [cluster.bootstrap_servers, in_topic, out_topic, group, txn_id, "--commit-every", str(commit_every),
            "--delay-ms", str(delay_ms)]
    ctx = f"(client {client}, EOS_TEST_SEED={SEED}, commit every {commit_every}, {delay_ms} ms per record)"

    def finished() -> bool:
        return committed(cluster, group, in_topic, IN_PARTITIONS) == end

    try:
        kill_points = []
        for _ in range(KILLS):
            loop = loops.start(client, args)
            target = rng.randint(1, 60)
            wait_until(lambda: len(loop.events("rec")) >= target or not loop.alive or finished(), 120,
                       f"{loop.name} producing {target} records {ctx}")
            assert loop.alive, f"{loop.name} exited by itself {ctx}:\n{loop.tail()}"
            loop.kill()
            kill_points.append(len(loop.events("rec")))
        final = loops.start(client, args)
        wait_until(lambda: finished() or not final.alive, 300,
                   f"the group's committed offsets to reach the end of the input {ctx}")
        assert final.alive, f"{final.name} exited by itself {ctx}:\n{final.tail()}"
        final.kill(sig=15)
        assert final.proc.returncode == 0, f"{final.name} ended with {final.proc.returncode} {ctx}:\n{final.tail()}"
    except BaseException:
        print(loops.dump())
        raise

    write_end_markers(cluster.bootstrap_servers, out_topic, IN_PARTITIONS)
    expected = {p: [(f"{p}:{o}".encode(), str(2 * (o * IN_PARTITIONS + p)).encode()) for o in range(end[p])]
                for p in range(IN_PARTITIONS)}
    for reader in ("confluent-kafka", "kafka-python"):
        seen = read_until_end(reader, cluster.bootstrap_servers, out_topic, IN_PARTITIONS, "read_committed")
        for p in range(IN_PARTITIONS):
            got = [(k, v) for _, k, v in seen[p]]
            counts = Counter(k for k, _ in got)
            duplicated = sorted(k.decode() for k, c in counts.items() if c > 1)
            missing = sorted((k.decode() for k, _ in expected[p] if k not in counts), key=lambda s: int(s.split(":")[1]))
            assert not duplicated, f"{reader}: partition {p}: input records transformed twice: {duplicated[:20]} {ctx}"
            assert not missing, f"{reader}: partition {p}: input records never transformed: {missing[:20]} {ctx}"
            assert got == expected[p], f"{reader}: partition {p}: wrong values or order, first difference at " \
                f"{next(i for i, (g, e) in enumerate(zip(got, expected[p])) if g != e)} {ctx}"
    everything = read_until_end("confluent-kafka", cluster.bootstrap_servers, out_topic, IN_PARTITIONS,
                                "read_uncommitted")
    aborted = sum(len(v) for v in everything.values()) - N
    print(f"\n{client}: {N} records exactly once after kill -9 at {kill_points} records produced; "
          f"{aborted} records of aborted transactions in the log {ctx}")


# ------------------------------------------------------------------ b. commit, abort, commit

@pytest.mark.parametrize("client", TXN_CLIENTS)
def test_aborted_transaction_is_invisible_to_read_committed(cluster, client):
    topic = f"txn-abort-{client.replace('-', '')}"
    create_topic(cluster, topic, 1)
    producer = TXN_PRODUCERS[client](cluster.bootstrap_servers, f"abort-{client}")
    txns = {n: [b"txn%d-%d" % (n, i) for i in range(5)] for n in (1, 2, 3)}
    try:
        producer.init()
        for n, values in txns.items():
            producer.begin()
            for v in values:
                producer.send(topic, v, 0)
            producer.flush()
            producer.commit() if n != 2 else producer.abort()
    finally:
        producer.close()
    write_end_markers(cluster.bootstrap_servers, topic, 1)
    for reader in ("confluent-kafka", "kafka-python", "aiokafka"):
        got = values_of(read_until_end(reader, cluster.bootstrap_servers, topic, 1, "read_committed"))[0]
        assert got == txns[1] + txns[3], f"{reader} read_committed saw {got}, expected transactions 1 and 3 only"
        got = values_of(read_until_end(reader, cluster.bootstrap_servers, topic, 1, "read_uncommitted"))[0]
        assert got == txns[1] + txns[2] + txns[3], f"{reader} read_uncommitted saw {got}, expected all three"


def test_open_transaction_is_aborted_after_its_timeout(cluster):
    """A transaction left open past transaction.timeout.ms is aborted by the coordinator, which
    bumps the epoch: the producer is fenced and its records never reach read_committed readers."""
    from confluent_kafka import KafkaException, Producer
    topic, bootstrap = "txn-timeout", cluster.bootstrap_servers
    create_topic(cluster, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "timeout-confluent",
                         "transaction.timeout.ms": 4000, "message.timeout.ms": 4000, "linger.ms": 5})
    values = [b"open-%d" % i for i in range(15)]
    producer.init_transactions(60)
    producer.begin_transaction()
    for v in values:
        producer.produce(topic, value=v, partition=0)
    assert producer.flush(60) == 0
    # the end marker sits behind the open transaction: a read_committed reader reaches it only
    # once the coordinator aborted the transaction (and the abort marker moved the LSO)
    write_end_markers(bootstrap, topic, 1)
    assert values_of(read_until_end("confluent-kafka", bootstrap, topic, 1, "read_committed"))[0] == []
    assert values_of(read_until_end("confluent-kafka", bootstrap, topic, 1, "read_uncommitted"))[0] == values
    with pytest.raises(KafkaException):
        producer.commit_transaction(30)   # fenced by the coordinator's epoch bump


# ------------------------------------------------------------------ c. zombie fencing

@pytest.mark.parametrize("client", TXN_CLIENTS)
def test_zombie_producer_is_fenced_and_its_transaction_aborted(cluster, client):
    topic = f"txn-fence-{client.replace('-', '')}"
    partitions = 2
    create_topic(cluster, topic, partitions)
    make = TXN_PRODUCERS[client]
    txn_id = f"fence-{client}"
    zombie_values = [b"zombie-%d" % i for i in range(4)]
    late = b"zombie-late"
    new_values = [b"new-%d" % i for i in range(4)]
    p1 = make(cluster.bootstrap_servers, txn_id)
    p2 = make(cluster.bootstrap_servers, txn_id)
    try:
        p1.init()
        p1.begin()
        for i, v in enumerate(zombie_values):
            p1.send(topic, v, i % partitions)
        p1.flush()  # the zombie's records are in the log, its transaction open

        p2.init()  # fences p1 and aborts its open transaction
        p2.begin()
        for i, v in enumerate(new_values):
            p2.send(topic, v, i % partitions)
        p2.flush()
        p2.commit()

        failures = []
        try:
            p1.send(topic, late, 0)
            p1.flush()
        except Exception as exc:  # noqa: BLE001 - what the client raised is checked below
            failures.append(exc)
        try:
            p1.commit()
        except Exception as exc:  # noqa: BLE001 - checked below
            failures.append(exc)
        else:
            raise AssertionError(f"{client}: the fenced producer's commit_transaction succeeded "
                                 f"(its produce raised {failures!r})")
        assert any(p1.is_fenced(e) for e in failures), \
            f"{client}: the zombie's produce/commit failed, but not with a fencing error: {failures!r}"
        print(f"\n{client}: the fenced producer's produce/commit raised {failures!r}")
    finally:
        p1.close()
        p2.close()

    write_end_markers(cluster.bootstrap_servers, topic, partitions)
    committed_view = values_of(read_until_end("confluent-kafka", cluster.bootstrap_servers, topic, partitions,
                                              "read_committed"))
    assert sorted(v for vs in committed_view.values() for v in vs) == sorted(new_values), \
        f"{client}: read_committed saw {committed_view}: expected only the new producer's records"
    log = values_of(read_until_end("confluent-kafka", cluster.bootstrap_servers, topic, partitions,
                                   "read_uncommitted"))
    in_log = [v for vs in log.values() for v in vs]
    assert set(zombie_values) <= set(in_log), f"{client}: the zombie's records are not in the log: {log}"
    assert late not in in_log, f"{client}: a write of the fenced producer reached the log: {log}"


# ------------------------------------------------------------------ d. coordinator failover

def _kill_coordinator(cluster, txn_id: str) -> int:
    victim = wait_until(lambda: txn_coordinator(cluster, txn_id), 60, f"a coordinator for {txn_id}")
    cluster.kill_broker(victim)
    return victim


def _restart(cluster, victim: int) -> None:
    if cluster.brokers[victim].pid is None:
        cluster.start_broker(victim)
    wait_until(lambda: all_replicas_in_sync(cluster), 180, f"broker {victim} back in every ISR")


@pytest.mark.parametrize("client", TXN_CLIENTS)
def test_committed_transaction_survives_coordinator_kill(cluster, client):
    topic, partitions = f"txn-coord-{client.replace('-', '')}", 3
    txn_id = f"coord-committed-{client}"
    create_topic(cluster, topic, partitions)
    make = TXN_PRODUCERS[client]
    producer = make(cluster.bootstrap_servers, txn_id)
    first = [b"first-%d" % i for i in range(9)]
    second = [b"second-%d" % i for i in range(9)]
    victim = None
    try:
        producer.init()
        producer.begin()
        for i, v in enumerate(first):
            producer.send(topic, v, i % partitions)
        producer.flush()
        producer.commit()
        victim = _kill_coordinator(cluster, txn_id)
        wait_until(lambda: txn_coordinator_everywhere(cluster, txn_id) not in (None, victim), 90,
                   f"a new coordinator for {txn_id} after kill -9 of broker {victim}")
        if client == "kafka-python":
            # kafka-python 3.0.12 drops its queued AddPartitionsToTxn/EndTxn when the cached coordinator
            # refuses connections (the request is never re-sent after the new FindCoordinator answer);
            # a new producer instance with the same transactional.id finds the new coordinator
            producer.close()
            producer = make(cluster.bootstrap_servers, txn_id)
            producer.init()
        producer.begin()  # the next transaction goes through the new coordinator
        for i, v in enumerate(second):
            producer.send(topic, v, i % partitions)
        producer.flush()
        producer.commit()
    finally:
        producer.close()
        if victim is not None:
            _restart(cluster, victim)
    write_end_markers(cluster.bootstrap_servers, topic, partitions)
    for reader in ("confluent-kafka", "kafka-python"):
        got = values_of(read_until_end(reader, cluster.bootstrap_servers, topic, partitions, "read_committed"))
        for p in range(partitions):
            want = first[p::partitions] + second[p::partitions]
            assert got[p] == want, (f"{reader}: partition {p} read_committed saw {got[p]}, expected {want} "
                                    f"(coordinator broker {victim} killed after the first commit returned)")


@pytest.mark.parametrize("kill_point", ["before_commit", "during_commit"])
@pytest.mark.parametrize("client", TXN_CLIENTS)
def test_coordinator_kill_mid_transaction_is_all_or_nothing(cluster, client, kill_point):
    rng = random.Random(f"{SEED}-{client}-{kill_point}")
    topic, partitions = f"txn-mid-{client.replace('-', '')}-{kill_point.split('_')[0]}", 3
    txn_id = f"coord-mid-{client}-{kill_point}"
    create_topic(cluster, topic, partitions)
    make = TXN_PRODUCERS[client]
    values = [b"mid-%d" % i for i in range(12)]
    outcome: dict[str, object] = {}
    victim = None
    producer = make(cluster.bootstrap_servers, txn_id, timeout_ms=20000)
    try:
        producer.init()
        producer.begin()
        for i, v in enumerate(values):
            producer.send(topic, v, i % partitions)
        producer.flush()  # the records are in the log, the transaction open
        coordinator = wait_until(lambda: txn_coordinator(cluster, txn_id), 60, f"a coordinator for {txn_id}")
        committer = threading.Thread(target=_commit_or_recover, args=(producer, make, cluster, txn_id, outcome),
                                     daemon=True)
        if kill_point == "before_commit":
            cluster.kill_broker(coordinator)
            victim = coordinator
            committer.start()
        else:
            committer.start()
            time.sleep(rng.uniform(0.0, 0.05))  # a random kill point inside commit_transaction, not a wait
            cluster.kill_broker(coordinator)
            victim = coordinator
        committer.join(240)
        assert not committer.is_alive(), (f"{client}: commit_transaction (or the abort/recovery after it) did not "
                                          f"return within 240 s after coordinator broker {victim} was killed "
                                          f"{kill_point}; outcome so far {outcome}")
    finally:
        producer.close()
        if victim is not None:
            _restart(cluster, victim)
    write_end_markers(cluster.bootstrap_servers, topic, partitions)
    got = values_of(read_until_end("confluent-kafka", cluster.bootstrap_servers, topic, partitions, "read_committed"))
    visible = sorted((v for vs in got.values() for v in vs), key=values.index)
    ctx = f"({client}, coordinator broker {victim} killed {kill_point}, commit outcome {outcome}, EOS_TEST_SEED={SEED})"
    assert visible in ([], values), f"a partially visible transaction: read_committed saw {visible} {ctx}"
    if outcome.get("committed"):
        assert visible == values, f"commit_transaction returned but read_committed saw {visible} {ctx}"
    for p in range(partitions):
        assert got[p] in ([], values[p::partitions]), f"partition {p}: {got[p]} {ctx}"
    print(f"\n{client} {kill_point}: transaction {'visible' if visible else 'invisible'} {ctx}")


def _commit_or_recover(producer, make, cluster, txn_id: str, outcome: dict) -> None:
    """commit_transaction; if it fails, abort (or, if the producer is unusable, let a new
    producer with the same transactional id finish it off), as an application would."""
    done: dict[str, object] = {}

    def commit() -> None:
        try:
            producer.commit()
            done["ok"] = True
        except Exception as exc:  # noqa: BLE001 - recorded in the outcome
            done["error"] = exc
    # kafka-python 3.0.12's commit_transaction (no timeout argument) never returns when its cached
    # coordinator refuses connections: it drops the EndTxn after looking the coordinator up again.
    # Like an application's watchdog, give up on such a producer and let a new one take over.
    # 45 s is several times what a commit through a failed-over coordinator needs here
    # (zookeeper.session.timeout.ms=6000, then an election and a load of the partition).
    waiter = threading.Thread(target=commit, daemon=True)
    waiter.start()
    waiter.join(45)
    if waiter.is_alive():
        outcome["commit_hung"] = True
    elif done.get("ok"):
        outcome["committed"] = True
        return
    else:
        outcome["commit_error"] = repr(done["error"])
        try:
            producer.abort()
            outcome["aborted"] = True
            return
        except Exception as exc:  # noqa: BLE001 - recorded in the outcome
            outcome["abort_error"] = repr(exc)
    successor = make(cluster.bootstrap_servers, txn_id)
    try:
        successor.init()
        outcome["recovered_by_new_producer"] = True
    except Exception as exc:  # noqa: BLE001 - recorded in the outcome
        outcome["new_producer_error"] = repr(exc)
        raise
    finally:
        successor.close()


# ------------------------------------------------------------------ e. coordinator that also leads the output

FAILOVER_TXN_TIMEOUT_MS = 120000   # transaction.timeout.ms of the producer under test
FAILOVER_BOUND_S = 30.0            # kill -9 -> transaction complete; far below transaction.timeout.ms
LEAD_CASES = [("confluent-kafka", "mid_commit"), ("confluent-kafka", "commit_returned"),
              ("kafka-python", "commit_returned")]


def _create_topic_led_by(cluster, topic: str, leader: int, follower_led: int) -> None:
    """Two partitions, RF 3, min.insync.replicas=2: ``leader`` is partition 0's preferred (so first)
    leader, ``follower_led`` partition 1's; waits for those leaders and a full ISR."""
    from odradek import testing
    rest = [b for b in sorted(cluster.brokers) if b not in (leader, follower_led)]
    assignment = {0: [leader, follower_led, *rest], 1: [follower_led, *rest, leader]}
    testing.create_topic(cluster.bootstrap_servers, topic, configs={"min.insync.replicas": "2"}, assignment=assignment)
    wait_until(lambda: full_isr(cluster, topic, 2) and [cluster.leader(topic, p) for p in (0, 1)]
               == [leader, follower_led], 90, f"{topic}: leaders {leader}, {follower_led} and a full ISR")


def _settled_coordinator(cluster, key: str, internal_topic: str, lookup) -> int | None:
    """``key``'s coordinator (``lookup(cluster, key)``) if it is the preferred (first) replica of
    ``key``'s partition of ``internal_topic``, else None: the controller's preferred-leader
    rebalance cannot move such a coordinator while the test runs."""
    import json

    from odradek.broker.group.offsets import partition_for
    coordinator = wait_until(lambda: lookup(cluster, key), 60, f"a coordinator for {key}")
    assignment = json.loads(synced(cluster.zk).get(f"/brokers/topics/{internal_topic}")[0])["partitions"]
    return coordinator if assignment[str(partition_for(key, len(assignment)))][0] == coordinator else None


def _pick_keys(cluster, tag: str) -> tuple[str, str, int]:
    """(transactional id, group id, the transactional id's coordinator): both coordinators settled,
    the group's on another broker. librdkafka's send_offsets_to_transaction blocks for ever, past
    its timeout, once the broker it cached as the group coordinator has left the metadata
    (librdkafka issues 5456 and 5511): the broker the test kills must not coordinate the group."""
    candidates = range(50)
    for n in candidates:
        txn_id = f"lead-{tag}-{n}"
        victim = _settled_coordinator(cluster, txn_id, "__transaction_state", txn_coordinator)
        if victim is not None:
            break
    else:
        raise AssertionError(f"no transactional id lead-{tag}-0..49 has a settled coordinator")
    for n in candidates:
        group = f"lead-{tag}-group-{n}"
        if _settled_coordinator(cluster, group, "__consumer_offsets", find_coordinator) not in (None, victim):
            return txn_id, group, victim
    raise AssertionError(f"no group lead-{tag}-group-0..49 has a settled coordinator other than broker {victim}")


def _commit_as_an_application(producer, deadline: float) -> dict[str, object]:
    """confluent-kafka's commit_transaction, called again while its error is retriable, and
    abort_transaction if the error requires it (librdkafka's documented pattern)."""
    ck = producer.ck
    while True:
        try:
            producer.p.commit_transaction(max(1.0, deadline - time.monotonic()))
            return {"committed": True}
        except ck.KafkaException as exc:
            err = exc.args[0]
            if err.retriable() and time.monotonic() < deadline:
                continue
            if not err.txn_requires_abort():
                return {"commit_error": repr(err)}   # fatal (the issue saw INVALID_TXN_STATE)
            try:
                producer.p.abort_transaction(max(1.0, deadline - time.monotonic()))
                return {"aborted": repr(err)}
            except ck.KafkaException as abort_exc:
                return {"commit_error": repr(err), "abort_error": repr(abort_exc.args[0])}


@pytest.mark.parametrize(("client", "kill_point"), LEAD_CASES)
def test_commit_completes_when_coordinator_and_output_leader_is_killed(cluster, client, kill_point):
    """Issue 15: the broker kill -9'd is both the transaction coordinator and partition 0's leader,
    with a consume-transform-produce commit (output records + the group's offsets) in progress.
    The new coordinator must send its markers to the partitions' new leaders: the transaction
    completes (visible to read_committed, or cleanly aborted) within seconds of the election,
    nothing acknowledged is lost, and the producer's next transaction commits."""
    rng = random.Random(f"{SEED}-{client}-{kill_point}-lead")
    tag = f"{client.replace('-', '')}-{kill_point.split('_')[0]}"
    in_topic, out_topic = f"txn-lead-in-{tag}", f"txn-lead-out-{tag}"
    bootstrap = cluster.bootstrap_servers
    txn_id, group, victim = _pick_keys(cluster, tag)
    _create_topic_led_by(cluster, out_topic, victim, next(b for b in sorted(cluster.brokers) if b != victim))
    create_topic(cluster, in_topic, 1)
    inputs = [str(i) for i in range(18)]
    produce(cluster, in_topic, inputs)
    # three transactions of six input records each: a warm-up (times a commit), the one the kill
    # hits, and the next one (through the new coordinator); record i goes to partition i % 2
    txns = [[(i, b"%d" % (2 * i)) for i in range(n, n + 6)] for n in (0, 6, 12)]
    make = TXN_PRODUCERS[client]
    producer = make(bootstrap, txn_id, timeout_ms=FAILOVER_TXN_TIMEOUT_MS)
    outcome: dict[str, object] = {}
    timings: dict[str, float] = {}
    killed = False
    ctx = f"({client}, {kill_point}, coordinator and partition-0 leader broker {victim}, EOS_TEST_SEED={SEED})"

    def run_transaction(n: int) -> None:
        producer.begin()
        for i, value in txns[n]:
            producer.send(out_topic, value, i % 2)
        producer.flush()   # every record acknowledged
        producer.send_offsets(in_topic, {0: txns[n][-1][0] + 1}, group)

    try:
        producer.init()
        run_transaction(0)
        started = time.monotonic()
        producer.commit()
        commit_s = time.monotonic() - started
        assert txn_coordinator(cluster, txn_id) == victim, f"the coordinator moved before the kill {ctx}"
        run_transaction(1)
        if kill_point == "commit_returned":  # PrepareCommit is durable, the markers are on their way
            producer.commit()
            outcome["committed"] = True
            cluster.kill_broker(victim)
            killed_at = time.monotonic()
        else:
            deadline = time.monotonic() + FAILOVER_BOUND_S + 30
            committer = threading.Thread(target=lambda: outcome.update(_commit_as_an_application(producer, deadline)),
                                         daemon=True)
            committer.start()
            time.sleep(rng.uniform(0.0, 1.5 * commit_s))  # a random point inside commit_transaction, not a wait
            cluster.kill_broker(victim)
            killed_at = time.monotonic()
        killed = True
        wait_until(lambda: cluster.leader(out_topic, 0) not in (victim, None), FAILOVER_BOUND_S,
                   f"a new leader for {out_topic}-0 {ctx}")
        timings["election"] = time.monotonic() - killed_at
        if kill_point == "mid_commit":
            committer.join(max(0.0, deadline - time.monotonic()))
            assert not committer.is_alive(), f"commit_transaction still running {FAILOVER_BOUND_S + 30} s on {ctx}"
            timings["commit_returned"] = time.monotonic() - killed_at
            assert "commit_error" not in outcome, f"the transaction failed instead of completing: {outcome} {ctx}"
        if client == "kafka-python":
            # kafka-python drops requests queued for a coordinator that refuses connections (see
            # test_committed_transaction_survives_coordinator_kill): a new producer takes over; its
            # init_transactions returns once the interrupted commit is complete. Its FindCoordinator
            # goes to any broker: wait until none names the killed one any more.
            wait_until(lambda: txn_coordinator_everywhere(cluster, txn_id) not in (None, victim), FAILOVER_BOUND_S,
                       f"every broker to name a new coordinator for {txn_id} {ctx}")
            producer.close()
            producer = make(bootstrap, txn_id, timeout_ms=FAILOVER_TXN_TIMEOUT_MS)
            producer.init()
        # the next transaction commits only once the coordinator completed this one (until then
        # it answers CONCURRENT_TRANSACTIONS): its commit returning is the completion time
        run_transaction(2)
        producer.commit()
        timings["complete"] = time.monotonic() - killed_at
    finally:
        producer.close()
        if killed:
            _restart(cluster, victim)

    resumed = any(f"resuming commit of {txn_id} after loading" in b.log_path.read_text(errors="replace")
                  for i, b in cluster.brokers.items() if i != victim)
    ctx = f"{ctx} outcome {outcome}, kill -> election {timings['election']:.1f} s, " \
          f"kill -> complete {timings['complete']:.1f} s, new coordinator resumed the commit: {resumed}"
    assert timings["complete"] < FAILOVER_BOUND_S, f"the transaction completed too late {ctx}"
    visible = [txns[0], txns[1], txns[2]] if outcome.get("committed") else [txns[0], txns[2]]
    want = {p: [v for t in visible for i, v in t if i % 2 == p] for p in (0, 1)}
    write_end_markers(bootstrap, out_topic, 2)
    for reader in ("confluent-kafka", "kafka-python"):
        got = values_of(read_until_end(reader, bootstrap, out_topic, 2, "read_committed"))
        assert got == want, f"{reader}: read_committed saw {got}, expected {want} {ctx}"
    offsets = wait_until(lambda: committed(cluster, group, in_topic, 1), 30, f"{group}'s offsets {ctx}")
    assert offsets == {0: 18}, f"{group}'s committed offsets are {offsets} {ctx}"
    print(f"\n{ctx}")
