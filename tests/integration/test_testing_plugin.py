"""The odradek pytest plugin, used as an outsider would: pytest runs a test file that only asks
for its fixtures (loaded by the ``pytest11`` entry point), in a subprocess, on real clusters.

Two clusters in all: the shared ``kafka_cluster`` (3 brokers, 1 ZooKeeper node) takes every
broker fault in sequence — each inner test checks what a user would (leaders, ISR, controller,
registrations, clients still producing) and leaves its fault for the next test's repair where
that is the point — and one ``kafka_cluster_factory`` cluster (2 brokers, 3 ZooKeeper nodes,
tmpfs log dirs) takes the ZooKeeper and disk faults. A third, 1-broker cluster is started by a
pytest run that is then SIGKILLed, to show the next session ending its processes, and a
``pytest -n 2`` run (pytest-xdist) starts one 1-broker cluster per worker.
"""
from __future__ import annotations

import textwrap

pytest_plugins = ["pytester"]

INNER = textwrap.dedent('''
    import pytest
    from odradek.client import Consumer, Producer, TopicPartition
    from odradek.testing import DeliveryLedger, assert_no_loss, wait_until

    pytestmark = [pytest.mark.kafka_topic(partitions=3),
                  pytest.mark.kafka_cluster(brokers=3, zookeepers=1, properties={"min.insync.replicas": 2})]

    def produce(producer, topic, n, ledger=None, tag="v"):
        ledger = ledger or DeliveryLedger()
        for i in range(n):
            ledger.track(producer.send(topic, f"{tag}{i}".encode(), key=str(i).encode()),
                         value=f"{tag}{i}", key=str(i))
        producer.flush(60)
        return ledger

    def consume_all(bootstrap, topic, n):
        got = []
        with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, p) for p in range(3)])
            wait_until(lambda: got.extend(r for recs in c.poll(500).values() for r in recs) or len(got) >= n,
                       60, f"{n} records")
        return got

    def test_roundtrip(kafka_producer, kafka_consumer, kafka_topic):   # docs/testing.md's five lines
        kafka_producer.send(kafka_topic, b"hello").get(30)
        assert next(kafka_consumer).value == b"hello"

    def test_fixtures(kafka_cluster, kafka_bootstrap, kafka_topic, kafka_producer, kafka_consumer, kafka_admin,
                      tmp_path_factory):
        assert kafka_bootstrap == kafka_cluster.bootstrap_servers and len(kafka_bootstrap.split(",")) == 3
        assert kafka_topic in kafka_admin.list_topics()
        [entries] = kafka_admin.describe_configs([("broker", "1")]).values()
        assert {e.name: e.value for e in entries}["min.insync.replicas"] == "2"   # the marker's properties
        assert [kafka_cluster.isr(kafka_topic, p) for p in range(3)] == [[1, 2, 3]] * 3
        ledger = produce(kafka_producer, kafka_topic, 30)
        got = []
        wait_until(lambda: got.extend(r for recs in kafka_consumer.poll(500).values() for r in recs)
                   or len(got) >= 30, 60, "30 records")
        assert_no_loss(ledger, got)
        assert kafka_cluster.under_replicated() == []
        assert kafka_cluster.data_dir.is_relative_to(tmp_path_factory.getbasetemp())

    def test_kill_and_restart(kafka_cluster, kafka_topic, kafka_producer):
        leader = kafka_cluster.leader(kafka_topic, 0)
        kafka_cluster.kill(leader)
        assert kafka_cluster.leader(kafka_topic, 0) not in (None, leader)
        assert leader not in kafka_cluster.live_brokers()
        assert (kafka_topic, 0) in kafka_cluster.under_replicated()
        ledger = produce(kafka_producer, kafka_topic, 20)
        kafka_cluster.restart(leader)
        assert leader in kafka_cluster.live_brokers()
        assert kafka_cluster.wait_for_isr(kafka_topic, 0) == [1, 2, 3]
        assert_no_loss(ledger, consume_all(kafka_cluster.bootstrap_servers, kafka_topic, 20))

    def test_kill_controller_left_dead(kafka_cluster):
        old = kafka_cluster.kill_controller()
        assert kafka_cluster.controller() not in (None, old)
        assert kafka_cluster.broker_pids[old] is None   # left for the next test's repair

    def test_repaired_then_pause_resume(kafka_cluster, kafka_topic):
        assert kafka_cluster.live_brokers() == {1, 2, 3}
        kafka_cluster.wait_for_isr(kafka_topic, 1)
        leader = kafka_cluster.leader(kafka_topic, 1)
        kafka_cluster.pause(leader)
        assert leader not in kafka_cluster.live_brokers()
        assert kafka_cluster.leader(kafka_topic, 1) != leader
        kafka_cluster.resume(leader)
        assert leader in kafka_cluster.live_brokers()
        kafka_cluster.wait_for_isr(kafka_topic, 1)

    def test_isolate_and_heal(kafka_cluster, kafka_topic):
        kafka_cluster.wait_for_isr(kafka_topic, 2)
        leader = kafka_cluster.leader(kafka_topic, 2)
        kafka_cluster.isolate(leader)
        assert leader not in kafka_cluster.live_brokers()
        assert leader not in kafka_cluster.isr(kafka_topic, 2)
        # clients still reach the isolated broker, which answers with its stale view (as a Kafka
        # broker would): a producer bootstrapped from the others writes to the new leaders
        others = ",".join(kafka_cluster.broker_address(b) for b in kafka_cluster.live_brokers())
        with Producer(bootstrap_servers=others, acks="all") as producer:
            ledger = produce(producer, kafka_topic, 20, tag="iso")
        assert not ledger.failed
        kafka_cluster.heal(leader)
        kafka_cluster.wait_for_isr(kafka_topic, 2)
        assert_no_loss(ledger, [r for r in consume_all(kafka_cluster.bootstrap_servers, kafka_topic, 20)
                                if r.value.startswith(b"iso")])

    def test_expire_session_and_delay(kafka_cluster, kafka_topic, kafka_producer):
        broker = 2
        before = kafka_cluster.zk.exists(f"/brokers/ids/{broker}").ephemeralOwner
        kafka_cluster.expire_session(broker)
        assert kafka_cluster.zk.exists(f"/brokers/ids/{broker}").ephemeralOwner != before
        kafka_cluster.network_delay(50)
        ledger = produce(kafka_producer, kafka_topic, 10, tag="slow")   # replication through the delay
        assert len(ledger) == 10
        kafka_cluster.network_delay(0)

    def test_zookeeper_and_disk_faults(kafka_cluster_factory, tmp_path_factory):
        from odradek.testing import create_topic
        cluster = kafka_cluster_factory(brokers=2, zookeepers=3, disk="16m")
        assert cluster.data_dir.is_relative_to(tmp_path_factory.getbasetemp())
        cluster.kill_zookeeper(1)
        create_topic(cluster.bootstrap_servers, "after-zk-kill", 2, 2)   # the quorum of 2 serves
        cluster.restart_zookeeper(1)
        cluster.full_disk(2)
        with Producer(bootstrap_servers=cluster.bootstrap_servers, acks="all") as p:
            for i in range(50):
                p.send("after-zk-kill", b"x" * 1000, partition=i % 2)
            p.flush(60)
        cluster.wait_gone(2)   # its only log dir failed: it shut down
        assert cluster.live_brokers() == {1}
        cluster.free_disk(2)
        cluster.restart(2)
        assert cluster.live_brokers() == {1, 2}
''')


def test_plugin_fixtures_and_faults(pytester):
    pytester.makepyfile(test_app=INNER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", timeout=900)
    result.assert_outcomes(passed=8)


CRASHING = '''
import json, os, signal

def test_started_then_killed(kafka_cluster_factory):
    cluster = kafka_cluster_factory(brokers=1)
    pids = [*cluster.broker_pids.values(), *cluster.ensemble.pids.values()]
    open(PIDS_FILE, "w").write(json.dumps(pids))
    os.kill(os.getpid(), signal.SIGKILL)   # no teardown, no atexit: as a CI timeout would
'''

NEXT_SESSION = '''
def test_any_cluster_fixture(kafka_cluster_factory):   # the session's cluster pool reaps at its start
    pass
'''


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_run_s_processes_are_ended_by_the_next_session(pytester, tmp_path):
    import json
    import os
    import signal
    pids_file = tmp_path / "pids.json"
    pytester.makepyfile(test_crash=CRASHING.replace("PIDS_FILE", repr(str(pids_file))))
    crashed = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", timeout=300)
    pids = json.loads(pids_file.read_text())
    try:
        assert crashed.ret == -signal.SIGKILL
        assert len(pids) == 2 and all(_running(p) for p in pids)   # orphans: nothing ended them
        pytester.makepyfile(test_crash=NEXT_SESSION)
        pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", timeout=300).assert_outcomes(passed=1)
        assert [p for p in pids if _running(p)] == []
    finally:
        for pid in pids:  # only if the reaping failed: the processes this test caused, by PID
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


XDIST_INNER = '''
import json, os
from pathlib import Path
import pytest

pytestmark = pytest.mark.kafka_cluster(brokers=1, zookeepers=1)

@pytest.mark.parametrize("n", range(4))
def test_on_a_worker(n, kafka_cluster, kafka_producer, kafka_topic, tmp_path_factory):
    assert kafka_producer.send(kafka_topic, b"record %d" % n).get(30).offset == 0
    Path(OUT_DIR, f"{n}.json").write_text(json.dumps({
        "worker": os.environ["PYTEST_XDIST_WORKER"], "pid": os.getpid(),
        "bootstrap": kafka_cluster.bootstrap_servers, "zookeeper": kafka_cluster.zookeeper_connect,
        "data_dir": str(kafka_cluster.data_dir), "basetemp": str(tmp_path_factory.getbasetemp()),
        "state": kafka_cluster.state()}))   # the processes the plugin recorded (cluster.json)
'''


def test_xdist_workers_each_get_their_own_cluster(pytester, tmp_path):
    """``pytest -n 2``: each worker starts its own cluster (1 broker, 1 ZooKeeper node) under
    its own tmp path, every test passes, and every process the plugin recorded is gone after."""
    import json
    from pathlib import Path

    from odradek.testing.plugin import _runs_root
    from odradek.zk.cluster import live_processes
    out = tmp_path / "records"
    out.mkdir()
    pytester.makepyfile(test_xdist=XDIST_INNER.replace("OUT_DIR", repr(str(out))))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-n", "2", timeout=600)
    result.assert_outcomes(passed=4)
    records = [json.loads(f.read_text()) for f in sorted(out.glob("*.json"))]
    by_worker: dict[str, list[dict]] = {}
    for record in records:
        by_worker.setdefault(record["worker"], []).append(record)
    assert sorted(by_worker) == ["gw0", "gw1"]
    clusters = {w: {(r["bootstrap"], r["zookeeper"], r["data_dir"]) for r in rs} for w, rs in by_worker.items()}
    assert all(len(c) == 1 for c in clusters.values())   # one cluster per worker, shared by its tests
    [(bootstrap0, zk0, dir0)], [(bootstrap1, zk1, dir1)] = clusters["gw0"], clusters["gw1"]
    assert bootstrap0 != bootstrap1 and zk0 != zk1 and dir0 != dir1
    for worker, [record, *_] in by_worker.items():
        assert Path(record["data_dir"]).is_relative_to(record["basetemp"]) and f"-{worker}" in record["data_dir"]
    leftovers = [p for r in records for p in live_processes(r["state"])]
    assert leftovers == []   # every broker and ZooKeeper node the plugin recorded was ended
    registry = _runs_root(Path(records[0]["basetemp"])) / "odradek-cluster-owners"
    workers = {r["pid"] for r in records}
    assert [e for e in registry.glob("*.json") if json.loads(e.read_text())["owner_pid"] in workers] == []
