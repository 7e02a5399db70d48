"""``odradek reassign-partitions`` with ``log_dirs``: parsing, starting the moves, --verify's lines."""
from __future__ import annotations

import json

import pytest

from odradek.zk import reassign_partitions_cli as cli
from odradek.zk.cli import CommandError


class FakeBackend:
    """The cluster as the tool sees it: partitions on brokers, replicas in dirs."""

    def __init__(self) -> None:
        self.assignment = {"t": {0: [1], 1: [2]}}
        self.dirs: dict[tuple[str, int, int], tuple[str | None, str | None]] = {
            ("t", 0, 1): ("/a", None), ("t", 1, 2): ("/a", None)}
        self.not_yet: dict[tuple[str, int, int], int] = {}   # replica -> answers REPLICA_NOT_AVAILABLE n times
        self.configs: list[tuple[str, str, dict, tuple]] = []
        self.alter_calls = 0

    def brokers(self): return [1, 2]
    def topic_assignments(self, topics): return {t: self.assignment[t] for t in topics}
    def ongoing(self): return {}
    def alter(self, reassignments): return {}
    def set_configs(self, entity_type, name, configs, delete): self.configs.append((entity_type, name, configs, tuple(delete)))
    def close(self): pass

    def alter_log_dirs(self, moves):
        self.alter_calls += 1
        out = {}
        for r, d in moves.items():
            if self.not_yet.get(r, 0) > 0:
                self.not_yet[r] -= 1
                out[r] = "REPLICA_NOT_AVAILABLE"
            elif d.startswith("/bad"):
                out[r] = "LOG_DIR_NOT_FOUND"
            else:
                out[r] = None
        return out

    def replica_log_dirs(self, replicas):
        return {r: self.dirs.get(r, (None, None)) for r in replicas}


def plan(tmp_path, entries) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"version": 1, "partitions": entries}))
    return str(path)


def test_log_dirs_are_parsed_as_kafka_does(tmp_path):
    parts, moves = cli.parse_reassignment_data(plan(tmp_path, [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/b", "any"]},
        {"topic": "t", "partition": 1, "replicas": [2]}]))
    assert parts == {("t", 0): [1, 2], ("t", 1): [2]} and moves == {("t", 0, 1): "/b"}
    with pytest.raises(CommandError, match=r"^Size of replicas list List\(1, 2\) is different from size of log "
                                           r"dirs list List\(/b\) for partition t-0$"):
        cli.parse_reassignment_data(plan(tmp_path, [{"topic": "t", "partition": 0, "replicas": [1, 2],
                                                     "log_dirs": ["/b"]}]))


def test_execute_retries_a_replica_not_there_yet_then_reports_the_moves(tmp_path, capsys):
    b = FakeBackend()
    b.not_yet[("t", 0, 2)] = 2
    path = plan(tmp_path, [{"topic": "t", "partition": 0, "replicas": [2], "log_dirs": ["/b"]},
                           {"topic": "t", "partition": 1, "replicas": [2], "log_dirs": ["/b"]}])
    assert cli.execute(b, path, -1, False, log_dir_throttle=1000) == 0
    out = capsys.readouterr().out.splitlines()
    assert cli.VERIFY_WARNING in out and "The replica-alter-dir throttle limit was set to 1000 B/s" in out
    assert out[-2:] == ["Successfully started log directory move for: 2-t-1",
                        "Successfully started log directory move for: 2-t-0"]
    assert b.configs == [("brokers", "2", {cli.LOG_DIR_RATE_CONFIG: "1000"}, ())]
    assert b.alter_calls == 3


def test_execute_gives_up_with_kafkas_lines(tmp_path):
    b = FakeBackend()
    b.not_yet[("t", 0, 2)] = 10 ** 6
    path = plan(tmp_path, [{"topic": "t", "partition": 0, "replicas": [2], "log_dirs": ["/b"]}])
    with pytest.raises(CommandError, match="^Timed out before log directory move could be started for: 2-t-0$"):
        cli.execute(b, path, -1, False, timeout_ms=300)
    path = plan(tmp_path, [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/bad"]}])
    with pytest.raises(CommandError, match="^Failed to alter dir for 1-t-0: LOG_DIR_NOT_FOUND$"):
        cli.execute(FakeBackend(), path, -1, False)


def test_verify_reports_each_move_and_clears_throttles_only_when_done(tmp_path, capsys):
    b = FakeBackend()
    b.dirs = {("t", 0, 1): ("/a", "/b"), ("t", 1, 2): ("/b", None)}
    path = plan(tmp_path, [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/b"]},
                           {"topic": "t", "partition": 1, "replicas": [2], "log_dirs": ["/b"]}])
    assert cli.verify(b, path, False) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == ["Reassignment of replica 1-t-0 is still in progress.",
                        "Reassignment of replica 2-t-1 completed successfully."]
    assert b.configs == []
    b.dirs = {("t", 0, 1): ("/c", None), ("t", 1, 2): (None, None)}
    assert cli.verify(b, path, False) == 0
    out = capsys.readouterr().out.splitlines()
    assert "Partition t-0 on broker 1 is not being moved from log dir /c to /b." in out
    assert ("Partition t-1 is not found in any live log dir on broker 2. There is likely an offline log "
            "directory on the broker.") in out
    assert ("brokers", "1", {}, cli.RATE_CONFIGS + (cli.LOG_DIR_RATE_CONFIG,)) in b.configs


def test_the_log_dir_throttle_is_only_for_execute():
    args = cli.build_parser().parse_args(["--verify", "--bootstrap-server", "x:1", "--reassignment-json-file", "f",
                                          "--replica-alter-log-dirs-throttle", "5"])
    with pytest.raises(CommandError, match="only used with --execute"):
        cli.check_args(args)
