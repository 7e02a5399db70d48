"""``odradek consumer-groups`` and ``console-consumer --group`` against the fake group coordinator."""
from __future__ import annotations

import pytest
from client_group_fake import GroupFakeBroker
from test_client_group import consumer, poll_until, produce

from odradek.client import TopicPartition, console, consumer_groups_cli


@pytest.fixture
def broker():
    b = GroupFakeBroker()
    b.create_topic("t", 3)
    yield b
    b.stop()


def cli(b, *args):
    return consumer_groups_cli.main(["--bootstrap-server", b.bootstrap, *args])


def test_list_describe_reset_delete(broker, capsys):
    produce(broker, 30, partitions=3)
    c = consumer(broker, group="g1", client_id="cid")
    c.subscribe(["t"])
    got = []
    poll_until([c], lambda: len(got) >= 30, sink=got)
    c.commit({TopicPartition("t", 0): 4, TopicPartition("t", 1): 10, TopicPartition("t", 2): 10})
    capsys.readouterr()

    assert cli(broker, "--list") == 0
    assert capsys.readouterr().out.split() == ["g1"]

    assert cli(broker, "--describe", "--group", "g1") == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"]
    rows = [ln.split() for ln in lines[1:]]
    assert [r[:6] for r in rows] == [["g1", "t", "0", "4", "10", "6"], ["g1", "t", "1", "10", "10", "0"],
                                     ["g1", "t", "2", "10", "10", "0"]]
    assert {r[7] for r in rows} == {"/127.0.0.1"} and {r[8] for r in rows} == {"cid"}
    assert lines[0].index("TOPIC") == len("GROUP") + 11  # group column padded to 15

    assert cli(broker, "--describe", "--group", "g1", "--members", "--verbose") == 0
    out = capsys.readouterr().out.split()
    assert out[:6] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    assert out[-2:] == ["3", "t(0,1,2)"]
    assert cli(broker, "--describe", "--group", "g1", "--state") == 0
    out = capsys.readouterr().out
    assert "COORDINATOR (ID)" in out and "Stable" in out and "range" in out

    assert cli(broker, "--reset-offsets", "--group", "g1", "--all-topics", "--to-earliest", "--execute") == 1
    assert capsys.readouterr().err.startswith("Error: Assignments can only be reset if the group 'g1' is inactive")
    c.close(autocommit=False)

    assert cli(broker, "--describe", "--group", "g1") == 0
    captured = capsys.readouterr()
    assert "Consumer group 'g1' has no active members." in captured.err
    assert [ln.split()[6:] for ln in captured.out.strip().splitlines()[1:]] == [["-", "-", "-"]] * 3

    assert cli(broker, "--reset-offsets", "--group", "g1", "--topic", "t:1", "--shift-by", "-3", "--dry-run") == 0
    assert capsys.readouterr().out.split()[4:] == ["g1", "t", "1", "7"]
    assert broker.state.groups["g1"].offsets[("t", 1)] == (10, "")
    assert cli(broker, "--reset-offsets", "--group", "g1", "--topic", "t", "--to-offset", "99", "--execute") == 0
    assert [ln.split()[3] for ln in capsys.readouterr().out.strip().splitlines()[1:]] == ["10"] * 3  # clamped
    assert cli(broker, "--reset-offsets", "--group", "g1", "--all-topics", "--to-earliest", "--execute") == 0
    capsys.readouterr()
    assert {broker.state.groups["g1"].offsets[("t", p)][0] for p in range(3)} == {0}
    # no record at or after the time: the log end (the fake answers every timestamp lookup with the LEO)
    assert cli(broker, "--reset-offsets", "--group", "g1", "--all-topics", "--to-datetime",
               "2100-01-01T00:00:00.000", "--execute") == 0
    capsys.readouterr()
    assert {broker.state.groups["g1"].offsets[("t", p)][0] for p in range(3)} == {10}

    assert cli(broker, "--delete", "--group", "g1") == 0
    assert capsys.readouterr().out.strip() == "Deletion of requested consumer groups ('g1') was successful."
    assert cli(broker, "--delete", "--group", "g1") == 1
    assert "The group id does not exist." in capsys.readouterr().err
    assert cli(broker, "--describe", "--group", "nope") == 1
    assert capsys.readouterr().err.strip() == "Error: Consumer group 'nope' does not exist."


def test_cli_usage_errors(broker, capsys):
    assert cli(broker) == 1
    assert "exactly one action" in capsys.readouterr().err
    assert cli(broker, "--describe") == 1
    assert capsys.readouterr().err.strip() == "Error: --group (or --all-groups) is required"
    assert cli(broker, "--reset-offsets", "--group", "g", "--topic", "t") == 1
    assert "exactly one of" in capsys.readouterr().err


def test_console_consumer_with_group_commits(broker, capsys):
    produce(broker, 9, partitions=3)
    rc = console.consumer_main(["--bootstrap-server", broker.bootstrap, "--topic", "t", "--group", "cg",
                                "--from-beginning", "--max-messages", "9"])
    assert rc == 0
    captured = capsys.readouterr()
    assert sorted(captured.out.split()) == sorted(f"v{i}" for i in range(9))
    assert "Processed a total of 9 messages" in captured.err
    assert {broker.state.groups["cg"].offsets[("t", p)][0] for p in range(3)} == {3}
    # a second run of the same group starts where the first stopped
    produce(broker, 3, partitions=3)
    assert console.consumer_main(["--bootstrap-server", broker.bootstrap, "--topic", "t", "--group", "cg",
                                  "--max-messages", "3"]) == 0
    assert sorted(capsys.readouterr().out.split()) == ["v0", "v1", "v2"]
