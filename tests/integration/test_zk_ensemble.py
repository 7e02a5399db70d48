"""The local ZooKeeper ensemble launcher, against real ZooKeeper processes."""
import os
import signal
import socket
import subprocess
import sys

import pytest

from odradek.testing import wait_until
from odradek.zk.admin import open_zk
from odradek.zk.ensemble import ZooKeeperEnsemble, ZooKeeperError, server_mode

# The console script, as users run it (``python -m odradek.zk.cli`` would make cli.py ``__main__``).
ODRADEK = [os.path.join(os.path.dirname(sys.executable), "odradek")]


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_three_nodes_serve_and_survive_one_node_stopped(tmp_path):
    with ZooKeeperEnsemble(tmp_path, size=3) as ens:
        modes = sorted(ens.mode(i) for i in (1, 2, 3))
        assert modes == ["follower", "follower", "leader"]
        cfg = (tmp_path / "zk-2" / "zoo.cfg").read_text()
        assert "clientPortAddress=127.0.0.1" in cfg and "4lw.commands.whitelist=*" in cfg
        assert "admin.enableServer=false" in cfg and cfg.count("server.") == 3
        assert (tmp_path / "zk-2" / "myid").read_text().strip() == "2"
        pids = [p for p in ens.pids.values()]
        assert all(pids)

        zk = open_zk(ens.connect_string, timeout=30)
        try:
            zk.create("/odradek-test", b"before")
            leader = next(i for i in (1, 2, 3) if ens.mode(i) == "leader")
            ens.stop_node(leader)  # the hardest one: forces a new election
            assert ens.pids[leader] is None
            wait_until(lambda: sum(ens.mode(i) == "leader" for i in (1, 2, 3) if i != leader) == 1, 30,
                       "a new leader")
            zk.retry(zk.set, "/odradek-test", b"during")
            ens.start_node(leader, timeout=60)
            assert ens.mode(leader) in ("follower", "leader")
        finally:
            zk.stop()
            zk.close()
        # the restarted node caught up with the write made while it was down
        single = open_zk(ens.node_connect_string(leader), timeout=30)
        try:
            single.sync("/odradek-test")
            assert single.get("/odradek-test")[0] == b"during"
        finally:
            single.stop()
            single.close()
    assert not any(_alive(p) for p in pids)
    assert all(server_mode("127.0.0.1", n.client_port) is None for n in ens.nodes.values())


def test_start_failure_reports_log_and_leaves_no_process(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ens = ZooKeeperEnsemble(tmp_path, size=1, base_port=port)
        with pytest.raises(ZooKeeperError) as info:
            ens.start(timeout=30)
    assert "ZooKeeper node 1" in str(info.value)
    assert ens.nodes[1].proc is not None and ens.nodes[1].proc.poll() is not None


def test_cli_runs_one_node_in_foreground(tmp_path, free_port):
    port = free_port()
    data = tmp_path / "zk"
    proc = subprocess.Popen([*ODRADEK, "zookeeper", "start", "--id", "1",
                             "--data-dir", str(data), "--client-port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: server_mode("127.0.0.1", port) == "standalone", 60, "standalone node")
        assert f"clientPort={port}" in (data / "zoo.cfg").read_text()
        assert proc.poll() is None  # the CLI process became the JVM (exec)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)
    # and from an existing zoo.cfg
    proc = subprocess.Popen([*ODRADEK, "zookeeper", "start", str(data / "zoo.cfg")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: server_mode("127.0.0.1", port) == "standalone", 60, "standalone node from zoo.cfg")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)


def test_cli_bad_arguments_are_one_line(tmp_path):
    r = subprocess.run([*ODRADEK, "zookeeper", "start", str(tmp_path / "nope.cfg")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0 and "no ZooKeeper config" in r.stderr
