"""Controlled shutdown (SIGTERM), topic deletion (also with a replica's broker down) and
``topics --describe --under-replicated-partitions / --unavailable-partitions`` against real
brokers and ZooKeeper. Only leadership, metadata and files are checked, never replication."""
from __future__ import annotations

import signal
from pathlib import Path

from test_controller_ops_preferred import (STABLE, create_topic, metadata_leaders, ok, state, states,
                                           wait_all_brokers_known, wait_for)

from odradek.zk import znodes as zn

ASSIGN = [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 3, 2], [2, 1, 3], [3, 2, 1]]


def partition_dir(c, broker_id: int, topic: str, p: int) -> Path:
    return c.brokers[broker_id].dir / "logs" / f"{topic}-{p}"


def sigterm_and_check(c, victim: int, topic: str, live: set[int]) -> None:
    log = c.brokers[victim].log_path
    before = log.read_text(errors="replace") if log.exists() else ""
    c.kill_broker(victim, signal.SIGTERM, timeout=60)
    assert c.broker_pids[victim] is None
    text = log.read_text(errors="replace")[len(before):]
    assert "controlled shutdown succeeded" in text, text[-3000:]
    # Leadership left before the exit; after it, no state znode names the stopped broker as
    # leader, every partition has a live leader, and the stopped broker left every ISR.
    after = states(c.zk, topic, len(ASSIGN))
    for p, s in after.items():
        assert s["leader"] != victim and s["leader"] in live, (p, s)
    wait_for(lambda: all(victim not in s["isr"] for s in states(c.zk, topic, len(ASSIGN)).values()),
             what=f"broker {victim} to leave every ISR")
    for b in live:
        wait_for(lambda b=b: (m := metadata_leaders(c, b, topic)).keys() == set(range(len(ASSIGN)))
                 and set(m.values()) <= live, what=f"broker {b} to serve {topic} without {victim}")


def test_sigterm_moves_every_leadership_away_first(cluster_factory):
    c = cluster_factory(brokers=3, overrides={"auto.leader.rebalance.enable": "false", **STABLE})
    wait_all_brokers_known(c)
    create_topic(c, "cs", ASSIGN)
    ctl = c.controller()
    follower = next(b for b in (1, 2, 3) if b != ctl)
    sigterm_and_check(c, follower, "cs", {1, 2, 3} - {follower})     # asks the controller remotely
    ctl = wait_for(c.controller, what="a controller")
    sigterm_and_check(c, ctl, "cs", {1, 2, 3} - {follower, ctl})    # the controller moves its own
    last = ({1, 2, 3} - {follower, ctl}).pop()
    assert all(s["leader"] == last for s in states(c.zk, "cs", len(ASSIGN)).values())
    # The last live broker has nobody to hand its leaderships to: it does not ask (Kafka would
    # retry controlled.shutdown.max.retries times, 5 s apart) and still shuts down cleanly.
    log = c.brokers[last].log_path
    before = log.read_text(errors="replace")
    c.kill_broker(last, signal.SIGTERM, timeout=60)
    text = log.read_text(errors="replace")[len(before):]
    assert "controlled shutdown skipped: no other live broker" in text, text[-3000:]
    assert f"broker {last} shut down" in text, text[-3000:]
    assert (c.brokers[last].dir / "logs" / ".kafka_cleanshutdown").exists()


def test_sigterm_does_not_retry_for_partitions_with_no_other_live_replica(cluster_factory):
    """The partitions a broker still leads after its controlled shutdown have no other replica
    alive: it stops without retrying (Kafka retries controlled.shutdown.max.retries times, 5 s
    apart, though nobody could take them over)."""
    c = cluster_factory(brokers=3, overrides={"auto.leader.rebalance.enable": "false", **STABLE})
    wait_all_brokers_known(c)
    ctl = c.controller()
    a, b = sorted({1, 2, 3} - {ctl})
    create_topic(c, "pair", [[a, b], [b, a]])
    wait_for(lambda: all(len(s["isr"]) == 2 for s in states(c.zk, "pair", 2).values()), what="full ISRs")
    c.kill_broker(a, signal.SIGTERM, timeout=60)
    assert all(s["leader"] == b for s in states(c.zk, "pair", 2).values())   # a handed them over
    log = c.brokers[b].log_path
    before = log.read_text(errors="replace")
    c.kill_broker(b, signal.SIGTERM, timeout=60)
    text = log.read_text(errors="replace")[len(before):]
    assert text.count("controlled shutdown: 2 partitions still led here") == 1, text[-3000:]
    assert "no other replica of those partitions is alive; stopping without retrying" in text, text[-3000:]
    assert f"broker {b} shut down" in text, text[-3000:]
    assert (c.brokers[b].dir / "logs" / ".kafka_cleanshutdown").exists()


def test_topic_deletion_removes_files_and_znodes(cluster_factory):
    c = cluster_factory(brokers=3, overrides={"auto.leader.rebalance.enable": "false", **STABLE})
    wait_all_brokers_known(c)
    create_topic(c, "gone", [[1, 2, 3], [2, 3, 1]])
    dirs = [partition_dir(c, b, "gone", p) for b in (1, 2, 3) for p in (0, 1)]
    wait_for(lambda: all(d.is_dir() for d in dirs), what="partition directories on every replica")
    out = ok(c, "topics", "--delete", "--topic", "gone")
    assert "Topic gone is marked for deletion." in out
    wait_for(lambda: not c.zk.exists(zn.TopicZNode.path("gone")), what="topic znode deleted")
    wait_for(lambda: not c.zk.exists(zn.DeleteTopicsTopicZNode.path("gone")), what="deletion flag removed")
    assert not c.zk.exists(zn.ConfigEntityZNode.path("topics", "gone"))
    wait_for(lambda: not any(d.exists() for d in dirs), what="partition directories removed")
    for b in (1, 2, 3):
        wait_for(lambda b=b: metadata_leaders(c, b, "gone") == {}, what=f"broker {b} to forget the topic")
    assert "gone" not in ok(c, "topics", "--list").split()


def test_topic_deletion_waits_for_a_down_replica(cluster_factory):
    c = cluster_factory(brokers=3, overrides={"auto.leader.rebalance.enable": "false", **STABLE})
    wait_all_brokers_known(c)
    create_topic(c, "later", [[1, 2, 3], [3, 1, 2]])
    dirs = {b: [partition_dir(c, b, "later", p) for p in (0, 1)] for b in (1, 2, 3)}
    wait_for(lambda: all(d.is_dir() for ds in dirs.values() for d in ds), what="partition directories")
    c.kill_broker(3)
    wait_for(lambda: all(3 not in (s or {}).get("isr", [3]) for s in states(c.zk, "later", 2).values()),
             what="broker 3 to leave the ISRs")
    ok(c, "topics", "--delete", "--topic", "later")
    # The live replicas are deleted; the topic stays (marked) while broker 3 is down.
    wait_for(lambda: not any(d.exists() for b in (1, 2) for d in dirs[b]), what="live replicas deleted")
    assert all(d.is_dir() for d in dirs[3])
    assert c.zk.exists(zn.TopicZNode.path("later")) and c.zk.exists(zn.DeleteTopicsTopicZNode.path("later"))
    assert "later - marked for deletion" in ok(c, "topics", "--list")
    # Broker 3 returns (its log loads the old directories): deletion resumes and completes.
    c.start_broker(3)
    wait_for(lambda: not c.zk.exists(zn.TopicZNode.path("later")), what="topic znode deleted")
    wait_for(lambda: not c.zk.exists(zn.DeleteTopicsTopicZNode.path("later")), what="deletion flag removed")
    wait_for(lambda: not any(d.exists() for d in dirs[3]), what="broker 3's replicas deleted")
    assert not c.zk.exists(zn.ConfigEntityZNode.path("topics", "later"))


def test_describe_under_replicated_and_unavailable_with_a_broker_killed(cluster_factory):
    c = cluster_factory(brokers=3, overrides={"auto.leader.rebalance.enable": "false", **STABLE})
    wait_all_brokers_known(c)
    create_topic(c, "urp", [[1, 2, 3], [3, 1, 2]])
    create_topic(c, "solo", [[3], [1]])
    assert ok(c, "topics", "--describe", "--under-replicated-partitions") == ""
    assert ok(c, "topics", "--describe", "--unavailable-partitions") == ""

    c.kill_broker(3)
    wait_for(lambda: all(3 not in state(c.zk, "urp", p)["isr"] for p in (0, 1))
             and state(c.zk, "solo", 0)["leader"] == -1, what="the controller to handle broker 3's death")
    under = ok(c, "topics", "--describe", "--under-replicated-partitions")
    assert under.splitlines() == [
        "\tTopic: urp\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2",
        "\tTopic: urp\tPartition: 1\tLeader: 1\tReplicas: 3,1,2\tIsr: 1,2",
    ]
    unavailable = ok(c, "topics", "--describe", "--unavailable-partitions")
    assert unavailable.splitlines() == ["\tTopic: solo\tPartition: 0\tLeader: none\tReplicas: 3\tIsr: 3"]
    both = ok(c, "topics", "--describe", "--topic", "solo", "--unavailable-partitions",
              "--under-replicated-partitions")
    assert both.splitlines() == ["\tTopic: solo\tPartition: 0\tLeader: none\tReplicas: 3\tIsr: 3"]

    c.start_broker(3)     # the only replica returns: available again
    wait_for(lambda: state(c.zk, "solo", 0)["leader"] == 3, what="solo-0 to get its leader back")
    assert ok(c, "topics", "--describe", "--unavailable-partitions") == ""
