"""Faults injected with Docker while an acks=all producer on the host keeps writing.

- ``docker kill`` of a partition leader: a new leader is elected, producing resumes, no
  acknowledged record is lost; ``docker start`` brings the broker back into the ISR.
- ``docker network disconnect`` of a leader for longer than the ZooKeeper session timeout
  (6 s here): the isolated old leader acknowledges no acks=all write, a new leader serves the
  host's producer; after ``docker network connect`` the old leader truncates what it alone
  had (checked in its log files) and catches up; no acknowledged record is lost.

Topics: 1 partition, replication factor 3, min.insync.replicas=2. Each test heals the
cluster before it returns.
"""
from __future__ import annotations

import json
import sys

import pytest

from compose_cluster import (ISOLATED_PRODUCE, BackgroundProducer, ComposeCluster, read_partition,
                             stored_records, wait_until)

ELECTION_TIMEOUT = 90       # session timeout (6 s) + controller election + LeaderAndIsr, with margin
REJOIN_TIMEOUT = 180


def _create(cluster: ComposeCluster, topic: str) -> dict:
    from odradek.client import NewTopic
    admin = cluster.admin()
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3,
                                      topic_configs={"min.insync.replicas": "2"})])
    finally:
        admin.close()
    (part,) = cluster.wait_in_sync(topic)
    return part


def _new_leader(cluster: ComposeCluster, topic: str, old: int, bootstrap: str) -> dict:
    def check():
        p = cluster.partition(topic, bootstrap=bootstrap)
        return p if p["leader"] not in (-1, old) else None
    return wait_until(check, ELECTION_TIMEOUT, f"a leader of {topic} other than {old}")


def _assert_nothing_acked_lost(records: dict[int, str], producer: BackgroundProducer) -> None:
    """Every acknowledged record is at the offset its acknowledgement gave. (Retries may have
    written a record twice, and reordered records: only the acknowledged offset counts.)"""
    lost = {v: (o, records.get(o)) for v, o in producer.acked.items() if records.get(o) != v}
    assert not lost, (f"{len(lost)} of {len(producer.acked)} acknowledged records lost "
                      f"(value: (acknowledged offset, what is there)), e.g. {sorted(lost.items())[:5]}")


def test_kill_leader(healthy_cluster: ComposeCluster) -> None:
    cluster = healthy_cluster
    topic = "docker-kill-leader"
    leader = _create(cluster, topic)["leader"]
    others = ",".join(f"localhost:{p}" for b, p in cluster.ports.items() if b != leader)
    producer = BackgroundProducer(cluster.bootstrap, topic, "kill")
    try:
        wait_until(lambda: producer.acked_count() >= 200, 60, "200 acknowledged records before the kill")
        cluster.docker("kill", cluster.broker(leader))
        killed_at = producer.acked_count()
        new = _new_leader(cluster, topic, leader, others)
        assert new["leader"] in cluster.ports and leader not in new["isr"], new
        resumed_from = producer.acked_count()
        wait_until(lambda: producer.acked_count() >= resumed_from + 200, 60,
                   "200 more acknowledged records under the new leader")
    finally:
        producer.stop()
    sys.stderr.write(f"\n[kill] leader {leader} killed after {killed_at} acks; new leader {new['leader']}; "
                     f"{len(producer.acked)} acked, {len(producer.failed)} failed\n")
    _assert_nothing_acked_lost(read_partition(others, topic), producer)

    cluster.docker("start", cluster.broker(leader))
    cluster.wait_healthy([f"broker-{leader}"])
    part = cluster.wait_in_sync(topic, timeout=REJOIN_TIMEOUT)[0]
    assert leader in part["isr"]
    _assert_nothing_acked_lost(read_partition(cluster.bootstrap, topic), producer)


def _aliases(cluster: ComposeCluster, container: str) -> list[str]:
    nets = json.loads(cluster.docker("inspect", "-f", "{{json .NetworkSettings.Networks}}", container).stdout)
    return [a for a in (nets[cluster.network].get("Aliases") or []) if a != container[:12]]


def test_network_partition_of_leader(healthy_cluster: ComposeCluster) -> None:
    cluster = healthy_cluster
    topic = "docker-partition-leader"
    leader = _create(cluster, topic)["leader"]
    container = cluster.broker(leader)
    aliases = _aliases(cluster, container)
    others = ",".join(f"localhost:{p}" for b, p in cluster.ports.items() if b != leader)
    producer = BackgroundProducer(cluster.bootstrap, topic, "partition")
    connected = True
    try:
        wait_until(lambda: producer.acked_count() >= 200, 60, "200 acknowledged records before the partition")
        cluster.docker("network", "disconnect", cluster.network, container)
        connected = False
        new = _new_leader(cluster, topic, leader, others)
        resumed_from = producer.acked_count()
        wait_until(lambda: producer.acked_count() >= resumed_from + 200, 60,
                   "200 more acknowledged records under the new leader")

        # The isolated old leader, from inside its container, through its own listener.
        proc = cluster.exec_python(f"broker-{leader}", ISOLATED_PRODUCE % {"port": cluster.ports[leader],
                                                                            "topic": topic})
        assert proc.returncode == 0, proc.stderr
        isolated = json.loads(proc.stdout.strip().splitlines()[-1])
        sys.stderr.write(f"\n[partition] leader {leader} isolated; new leader {new['leader']}; "
                         f"isolated writes: {isolated}\n")
        assert isolated["all"][0] == "error", f"the isolated leader acknowledged an acks=all write: {isolated}"

        args = ["network", "connect"] + [f"--alias={a}" for a in aliases] + [cluster.network, container]
        cluster.docker(*args)
        connected = True
        # The old leader answers from a stale view until it has a new ZooKeeper session and the
        # controller's LeaderAndIsr/UpdateMetadata: wait for both before trusting any metadata.
        wait_until(lambda: cluster.broker_count(others) == 3, REJOIN_TIMEOUT,
                   f"broker {leader} registered again")
        own = f"localhost:{cluster.ports[leader]}"
        wait_until(lambda: cluster.partition(topic, bootstrap=own)["leader"] not in (-1, leader),
                   REJOIN_TIMEOUT, f"broker {leader} to learn it is no longer the leader")
        wait_until(lambda: producer.acked_count() >= resumed_from + 400, 60,
                   "producing goes on after the partition heals")
    finally:
        try:
            producer.stop()
        finally:
            if not connected:
                cluster.docker("network", "connect", *[f"--alias={a}" for a in aliases], cluster.network,
                               container, check=False)

    part = cluster.wait_in_sync(topic, timeout=REJOIN_TIMEOUT)[0]
    assert leader in part["isr"]
    records = read_partition(cluster.bootstrap, topic)
    _assert_nothing_acked_lost(records, producer)
    assert not [v for v in records.values() if v.startswith("isolated-")], \
        "a write only the isolated leader took is in the partition"

    # The old leader truncated what only it had and caught up: its log is the leader's log.
    end = max(records) + 1
    stored = wait_until(lambda: (s := stored_records(cluster, leader, topic)) and max(s) + 1 >= end and s,
                        REJOIN_TIMEOUT, f"broker {leader}'s log to reach offset {end}")
    diverging = {o: (v, records.get(o)) for o, v in stored.items() if o in records and records[o] != v}
    assert not diverging, f"broker {leader} kept records the leader does not have: {sorted(diverging.items())[:5]}"
    assert max(stored) + 1 == end, f"broker {leader}'s log ends at {max(stored) + 1}, the leader's at {end}"
    assert not [v for v in stored.values() if v.startswith("isolated-")]
