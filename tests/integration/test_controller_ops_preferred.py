"""Preferred replica election (the ``odradek leader-election`` CLI) and the auto leader
rebalance, against real ZooKeeper and real broker processes.

Only leadership and metadata are checked, never data replication. A restarted
broker is outside the ISR until its leader's replication brings it back; where a
test needs it back in, ``rejoin_isr`` performs the classic leader-side ISR
expansion write by hand (conditional setData of the state znode plus an
/isr_change_notification node, exactly what the leader itself would write).
The helpers here are shared by the other test_controller_ops_* modules.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from kazoo.exceptions import BadVersionError
from odradek_test_support import synced

from odradek.protocol.apis import metadata
from odradek.protocol.header import decode_response, encode_request
from odradek.zk import znodes as zn
from odradek.testing import wait_until as wait_for

ODRADEK = os.path.join(os.path.dirname(sys.executable), "odradek")
# Followers need not fetch here: keep leaders from shrinking the ISR during a test.
STABLE = {"replica.lag.time.max.ms": "600000", "controlled.shutdown.retry.backoff.ms": "500"}


# ---------------------------------------------------------------- helpers (shared)

def odradek(cluster, *args, timeout: float = 90.0) -> subprocess.CompletedProcess:
    env = {**os.environ, "ODRADEK_ZOOKEEPER": cluster.zookeeper_connect}
    return subprocess.run([ODRADEK, *args], capture_output=True, text=True, env=env, timeout=timeout)


def ok(cluster, *args) -> str:
    r = odradek(cluster, *args)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout


def one_line_error(r: subprocess.CompletedProcess, fragment: str) -> str:
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("Error: ") and fragment in lines[0], lines[0]
    return lines[0]


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("closed")
        buf += chunk
    return buf


def metadata_of(cluster, broker_id: int, topics: list[str] | None = None):
    """A broker's Metadata v1 answer (None if it cannot answer)."""
    host, port = cluster.broker_address(broker_id).rsplit(":", 1)
    body = {"topics": None if topics is None else [{"name": t} for t in topics]}
    try:
        with socket.create_connection((host, int(port)), timeout=5.0) as sock:
            frame = encode_request(metadata, 1, 1, "controller-ops-test", body)
            sock.sendall(len(frame).to_bytes(4, "big") + frame)
            size = int.from_bytes(_recv(sock, 4), "big")
            _, resp = decode_response(metadata, 1, _recv(sock, size))
            return resp
    except (OSError, ValueError):
        return None


def metadata_leaders(cluster, broker_id: int, topic: str) -> dict[int, int]:
    """{partition: leader} as ``broker_id``'s metadata cache answers ({} if unknown).

    Asks for ALL topics: naming one would auto-create it (auto.create.topics.enable)."""
    resp = metadata_of(cluster, broker_id)
    if resp is None:
        return {}
    for t in resp.topics:
        if t.name == topic and t.error_code == 0:
            return {p.partition_index: p.leader_id for p in t.partitions}
    return {}


def wait_all_brokers_known(cluster, ids=None) -> None:
    ids = set(ids or cluster.brokers)
    for b in ids:
        wait_for(lambda b=b: (m := metadata_of(cluster, b)) is not None
                 and {x.node_id for x in m.brokers} == ids, what=f"broker {b} to know brokers {sorted(ids)}")


def state(zk, topic: str, p: int) -> dict | None:
    try:
        return json.loads(zk.get(zn.TopicPartitionStateZNode.path(topic, p))[0])
    except Exception:
        return None


def states(zk, topic: str, n: int) -> dict[int, dict | None]:
    return {p: state(zk, topic, p) for p in range(n)}


def create_topic(cluster, topic: str, assignment: list[list[int]]) -> None:
    spec = ",".join(":".join(map(str, r)) for r in assignment)
    ok(cluster, "topics", "--create", "--topic", topic, "--replica-assignment", spec)
    wait_for(lambda: all((s := state(cluster.zk, topic, p)) and s["leader"] == r[0]
                         for p, r in enumerate(assignment)), what=f"{topic} leaders")
    for b in cluster.brokers:
        if cluster.broker_pids[b]:
            wait_for(lambda b=b: metadata_leaders(cluster, b, topic) == {p: r[0] for p, r in enumerate(assignment)},
                     what=f"broker {b} to serve {topic}")


def rejoin_isr(zk, topic: str, p: int, broker_id: int) -> None:
    """The leader's classic ISR expansion (state znode + /isr_change_notification), by hand."""
    path = zn.TopicPartitionStateZNode.path(topic, p)
    while True:
        data, stat = zk.get(path)
        st = json.loads(data)
        if broker_id in st["isr"]:
            return
        st["isr"] = st["isr"] + [broker_id]
        try:
            zk.set(path, json.dumps(st).encode(), version=stat.version)
            break
        except BadVersionError:
            continue
    zk.create(zn.IsrChangeNotificationSequenceZNode.path,
              zn.IsrChangeNotificationSequenceZNode.encode([(topic, p)]), sequence=True, makepath=True)


ASSIGN = [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 3, 2]]   # broker 1 is preferred for p0 and p3


def bounce_broker_1(c, topic: str) -> None:
    """Kill broker 1, wait until it leads nothing and left every ISR, restart it, bring it back in."""
    c.kill_broker(1)
    wait_for(lambda: all((s := state(c.zk, topic, p)) and s["leader"] not in (1, -1) and 1 not in s["isr"]
                         for p in range(len(ASSIGN))), what="leadership to leave broker 1")
    c.start_broker(1)
    wait_all_brokers_known(c)
    wait_for(lambda: metadata_leaders(c, 1, topic).keys() == set(range(len(ASSIGN))),
             what="restarted broker to know the topic")
    for p in range(len(ASSIGN)):
        rejoin_isr(c.zk, topic, p, 1)
    wait_for(lambda: all(1 in state(c.zk, topic, p)["isr"] for p in range(len(ASSIGN))), what="ISR rejoin")


# ---------------------------------------------------------------- tests

def test_preferred_election_cli_restores_leadership_after_restart(cluster_factory):
    c = cluster_factory(brokers=3, overrides={"auto.leader.rebalance.enable": "false", **STABLE})
    wait_all_brokers_known(c)
    create_topic(c, "pref", ASSIGN)
    bounce_broker_1(c, "pref")
    assert {p: state(c.zk, "pref", p)["leader"] for p in (0, 3)} == {0: 2, 3: 3}   # not preferred

    # through a broker (ElectLeaders on the controller) for one partition, through ZooKeeper for the rest
    out = ok(c, "leader-election", "--bootstrap-server", c.bootstrap_servers, "--election-type", "PREFERRED",
             "--topic", "pref", "--partition", "0")
    assert out == "Successfully completed leader election (PREFERRED) for partitions pref-0\n"
    assert state(c.zk, "pref", 0)["leader"] == 1
    out = ok(c, "leader-election", "--preferred", "--all-topic-partitions")
    assert "Successfully completed leader election (PREFERRED) for partitions pref-3\n" in out
    assert "Valid replica already elected for partitions pref-0, pref-1, pref-2\n" in out
    assert not c.zk.exists(zn.PreferredReplicaElectionZNode.path)
    after = states(c.zk, "pref", 4)
    assert [after[p]["leader"] for p in range(4)] == [1, 2, 3, 1]
    assert after[0]["leader_epoch"] >= 2 and sorted(after[0]["isr"]) == [1, 2, 3]
    for b in (1, 2, 3):
        wait_for(lambda b=b: metadata_leaders(c, b, "pref") == {0: 1, 1: 2, 2: 3, 3: 1},
                 what=f"broker {b} metadata after the election")

    # Already preferred: nothing to do; exit 0.
    out = ok(c, "leader-election", "--election-type", "preferred", "--topic", "pref", "--partition", "0")
    assert out == "Valid replica already elected for partitions pref-0\n"


def test_preferred_election_cli_errors(cluster_factory, tmp_path):
    c = cluster_factory(brokers=3, overrides={"auto.leader.rebalance.enable": "false", **STABLE})
    wait_all_brokers_known(c)
    create_topic(c, "perr", [[2, 1, 3]])
    one_line_error(odradek(c, "leader-election", "--all-topic-partitions"), "election-type")
    one_line_error(odradek(c, "leader-election", "--preferred"), "One and only one")
    one_line_error(odradek(c, "leader-election", "--preferred", "--topic", "perr"), "[partition]")
    one_line_error(odradek(c, "leader-election", "--election-type", "unclean", "--all-topic-partitions"),
                   "give --bootstrap-server")
    r = odradek(c, "leader-election", "--preferred", "--topic", "perr", "--partition", "7")
    one_line_error(r, "1 replica(s) could not be elected")
    assert "Error completing leader election (PREFERRED) for partition: perr-7" in r.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    one_line_error(odradek(c, "leader-election", "--preferred", "--path-to-json-file", str(bad)),
                   "not a valid partition list")

    # The preferred replica is down: the controller cannot elect it; the tool says why, exit 1.
    c.kill_broker(2)
    wait_for(lambda: state(c.zk, "perr", 0)["leader"] == 1, what="leader to move to 1")
    good = tmp_path / "parts.json"
    good.write_text(json.dumps({"partitions": [{"topic": "perr", "partition": 0}]}))
    r = odradek(c, "leader-election", "--preferred", "--path-to-json-file", str(good))
    one_line_error(r, "1 replica(s) could not be elected")
    assert "perr-0: preferred replica 2 is not alive" in r.stdout
    assert not c.zk.exists(zn.PreferredReplicaElectionZNode.path)
    # the same through a broker: Kafka's exception names; an unclean election is not needed (1 leads)
    admin = ("leader-election", "--bootstrap-server", c.bootstrap_servers, "--path-to-json-file", str(good))
    r = odradek(c, *admin, "--election-type", "preferred")
    one_line_error(r, "1 replica(s) could not be elected")
    assert "Error completing leader election (PREFERRED) for partition: perr-0: " \
        "PreferredLeaderNotAvailableException: " in r.stdout
    assert ok(c, *admin, "--election-type", "unclean") == "Valid replica already elected for partitions perr-0\n"



def test_preferred_election_cli_in_progress_and_no_controller(zk, odradek_env):
    """Without any controller (bare chroot): a pending znode is refused; our own write times out."""
    zk.create(zn.TopicZNode.path("t"), zn.TopicZNode.encode({0: [1, 2]}), makepath=True)
    zk.create(zn.TopicPartitionStateZNode.path("t", 0), zn.TopicPartitionStateZNode.encode(
        zn.LeaderIsrAndControllerEpoch(2, 1, [2, 1], 1, 0)), makepath=True)
    zk.create(zn.PreferredReplicaElectionZNode.path, zn.PreferredReplicaElectionZNode.encode([("t", 0)]),
              makepath=True)
    run = lambda *a: subprocess.run([ODRADEK, "leader-election", *a], capture_output=True, text=True,  # noqa: E731
                                    env=odradek_env, timeout=60)
    one_line_error(run("--preferred", "--all-topic-partitions"),
                   "Preferred replica leader election currently in progress for t-0")
    zk.delete(zn.PreferredReplicaElectionZNode.path)
    one_line_error(run("--preferred", "--topic", "t", "--partition", "0", "--timeout", "1"), "timed out")
    assert zn.PreferredReplicaElectionZNode.decode(
        synced(zk).get(zn.PreferredReplicaElectionZNode.path)[0]) == [("t", 0)]   # the CLI's write


def test_auto_leader_rebalance_moves_leaders_back(cluster_factory):
    c = cluster_factory(brokers=3, overrides={"leader.imbalance.check.interval.seconds": "1", **STABLE})
    wait_all_brokers_known(c)
    create_topic(c, "auto", ASSIGN)
    bounce_broker_1(c, "auto")
    # No CLI, no znode: the periodic check sees broker 1 at 100 % imbalance and elects it again.
    wait_for(lambda: [state(c.zk, "auto", p)["leader"] for p in range(4)] == [1, 2, 3, 1], timeout=60,
             what="auto rebalance to restore the preferred leaders")
    for b in (1, 2, 3):
        wait_for(lambda b=b: metadata_leaders(c, b, "auto") == {0: 1, 1: 2, 2: 3, 3: 1},
                 what=f"broker {b} metadata after the rebalance")
