"""Consumer groups of our Consumer against real brokers: rebalances, commits, the consumer-groups CLI."""
from __future__ import annotations

import time

import pytest

from odradek.client import AdminClient, Consumer, Producer, TopicPartition
from odradek.client import consumer_groups_cli
from odradek.testing import create_topic


pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def bootstrap(cluster_factory):
    c = cluster_factory(brokers=3, overrides={"group.initial.rebalance.delay.ms": 0,
                                              "offsets.topic.replication.factor": 3,
                                              "offsets.topic.num.partitions": 6})
    return c.bootstrap_servers


def produce(bootstrap, topic, n, partitions):
    p = Producer(bootstrap_servers=bootstrap, acks="all")
    for i in range(n):
        p.send(topic, f"v{i}".encode(), partition=i % partitions)
    p.flush()
    p.close()


def consumer(bootstrap, group, **kw):
    kw.setdefault("auto_offset_reset", "earliest")
    kw.setdefault("heartbeat_interval_ms", 300)
    kw.setdefault("session_timeout_ms", 10000)
    return Consumer(bootstrap_servers=bootstrap, group_id=group, **kw)


def poll_until(consumers, cond, timeout=60.0, sink=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            for recs in c.poll(50).values():
                if sink is not None:
                    sink.extend(recs)
        if cond():
            return
    raise AssertionError("not reached; assignments: " + str([sorted(c.assignment()) for c in consumers]))


def generations_agree(cs):
    return len({c._coordinator.generation.generation_id for c in cs}) == 1 and all(
        c._coordinator.stable() for c in cs)


def test_three_then_four_members_then_close(bootstrap):
    create_topic(bootstrap, "orders", 6, 2)
    produce(bootstrap, "orders", 60, 6)
    cs = [consumer(bootstrap, "billing") for _ in range(3)]
    for c in cs:
        c.subscribe(["orders"])
    seen = []
    poll_until(cs, lambda: generations_agree(cs) and all(len(c.assignment()) == 2 for c in cs), sink=seen)
    assert set().union(*(c.assignment() for c in cs)) == {TopicPartition("orders", p) for p in range(6)}
    poll_until(cs, lambda: len(seen) >= 60, sink=seen)
    assert sorted(r.value for r in seen) == sorted(f"v{i}".encode() for i in range(60))

    fourth = consumer(bootstrap, "billing")
    fourth.subscribe(["orders"])
    everyone = cs + [fourth]
    poll_until(everyone, lambda: generations_agree(everyone)
               and sorted(len(c.assignment()) for c in everyone) == [1, 1, 2, 2])

    leaving = cs[0].assignment()
    cs[0].close()
    rest = cs[1:] + [fourth]
    poll_until(rest, lambda: generations_agree(rest) and sorted(len(c.assignment()) for c in rest) == [2, 2, 2])
    assert leaving <= set().union(*(c.assignment() for c in rest))
    for c in rest:
        c.close()
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        offsets = admin.list_consumer_group_offsets("billing")
        assert sum(om.offset for om in offsets.values()) == 60


def test_commit_then_restart_resumes(bootstrap):
    create_topic(bootstrap, "events", 2, 2)
    produce(bootstrap, "events", 20, 2)
    c = consumer(bootstrap, "resume", enable_auto_commit=False)
    c.subscribe(["events"])
    got = []
    poll_until([c], lambda: len(got) >= 20, sink=got)
    c.commit({TopicPartition("events", 0): 4, TopicPartition("events", 1): 7})
    assert c.committed(TopicPartition("events", 1)) == 7
    c.close()

    c2 = consumer(bootstrap, "resume", enable_auto_commit=False)
    c2.subscribe(["events"])
    got2 = []
    poll_until([c2], lambda: len(got2) >= 20 - 4 - 7, sink=got2)
    first = {}
    for r in got2:
        first.setdefault(r.partition, r.offset)
    assert first == {0: 4, 1: 7}
    c2.close(autocommit=False)


def test_consumer_groups_cli_describe_reset_delete(bootstrap, capsys):
    create_topic(bootstrap, "clicks", 3, 2)
    produce(bootstrap, "clicks", 30, 3)
    c = consumer(bootstrap, "cli-group", client_id="cli-client")
    c.subscribe(["clicks"])
    got = []
    poll_until([c], lambda: len(got) >= 30, sink=got)
    c.commit()
    capsys.readouterr()

    assert consumer_groups_cli.main(["--bootstrap-server", bootstrap, "--list"]) == 0
    assert "cli-group" in capsys.readouterr().out.split()

    assert consumer_groups_cli.main(["--bootstrap-server", bootstrap, "--describe", "--group", "cli-group"]) == 0
    out = capsys.readouterr().out
    lines = [ln.split() for ln in out.strip().splitlines()]
    assert lines[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                        "HOST", "CLIENT-ID"]
    assert sorted((r[1], r[2], r[3], r[4], r[5], r[8]) for r in lines[1:]) == [
        ("clicks", str(p), "10", "10", "0", "cli-client") for p in range(3)]

    # resetting an active group is refused
    assert consumer_groups_cli.main(["--bootstrap-server", bootstrap, "--reset-offsets", "--group", "cli-group",
                                     "--topic", "clicks", "--to-earliest", "--execute"]) == 1
    assert "inactive" in capsys.readouterr().err
    # so is deleting the offsets of a topic a member consumes (OffsetDelete: GROUP_SUBSCRIBED_TO_TOPIC)
    assert consumer_groups_cli.main(["--bootstrap-server", bootstrap, "--delete-offsets", "--group", "cli-group",
                                     "--topic", "clicks"]) == 0
    captured = capsys.readouterr()
    assert captured.err.strip() == "Error: Encounter some partition level error, see the follow-up details:"
    assert [ln.split(None, 2) for ln in captured.out.strip().splitlines()[1:]] == [
        ["clicks", str(p), "Error: The consumer group is actively subscribed to the topic."] for p in range(3)]
    c.close()

    assert consumer_groups_cli.main(["--bootstrap-server", bootstrap, "--describe", "--group", "cli-group"]) == 0
    captured = capsys.readouterr()
    assert "Consumer group 'cli-group' has no active members." in captured.err
    assert captured.out.count("clicks") == 3

    assert consumer_groups_cli.main(["--bootstrap-server", bootstrap, "--reset-offsets", "--group", "cli-group",
                                     "--topic", "clicks:0,2", "--to-offset", "3", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.split()[:4] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        assert admin.list_consumer_group_offsets("cli-group")[TopicPartition("clicks", 0)].offset == 10
    assert consumer_groups_cli.main(["--bootstrap-server", bootstrap, "--reset-offsets", "--group", "cli-group",
                                     "--all-topics", "--to-earliest", "--execute"]) == 0
    rows = [ln.split() for ln in capsys.readouterr().out.strip().splitlines()[1:]]
    assert rows == [["cli-group", "clicks", str(p), "0"] for p in range(3)]
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        assert {om.offset for om in admin.list_consumer_group_offsets("cli-group").values()} == {0}

    c2 = consumer(bootstrap, "cli-group")
    c2.subscribe(["clicks"])
    again = []
    poll_until([c2], lambda: len(again) >= 30, sink=again)  # re-reads everything after the reset
    c2.close()

    assert consumer_groups_cli.main(["--bootstrap-server", bootstrap, "--delete-offsets", "--group", "cli-group",
                                     "--topic", "clicks:1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0] == "Request succeed for deleting offsets with topic clicks group cli-group"
    assert [ln.split() for ln in out[2:]] == [["TOPIC", "PARTITION", "STATUS"], ["clicks", "1", "Successful"]]
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        assert sorted(tp.partition for tp in admin.list_consumer_group_offsets("cli-group")) == [0, 2]
    assert consumer_groups_cli.main(["--bootstrap-server", bootstrap, "--delete-offsets", "--group", "nobody",
                                     "--topic", "clicks"]) == 1
    assert capsys.readouterr().err.strip() == "Error: 'nobody' does not exist."

    assert consumer_groups_cli.main(["--bootstrap-server", bootstrap, "--delete", "--group", "cli-group"]) == 0
    assert "was successful" in capsys.readouterr().out
    assert consumer_groups_cli.main(["--bootstrap-server", bootstrap, "--delete", "--group", "cli-group"]) == 1
    assert capsys.readouterr().err.startswith("Error: ")
