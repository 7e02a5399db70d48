"""LocalCluster and ``odradek cluster up|down|status`` with real ZooKeeper and broker processes."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from odradek.zk.admin import AdminZkClient, open_zk
from odradek.testing import wait_until
from odradek.zk.cluster import ClusterError, LocalCluster, pid_matches, read_state
from odradek.zk.ensemble import free_ports

ODRADEK = os.path.join(os.path.dirname(sys.executable), "odradek")


def test_local_cluster_lifecycle(tmp_path):
    cluster = LocalCluster(tmp_path / "c", zookeepers=1, brokers=3, overrides={"num.partitions": 3})
    with cluster:
        props = (tmp_path / "c" / "broker-2" / "server.properties").read_text()
        assert "broker.id=2" in props and "num.partitions=3" in props
        assert f"zookeeper.connect={cluster.zookeeper_connect}" in props
        assert f"log.dirs={tmp_path / 'c' / 'broker-2' / 'logs'}" in props
        assert len(cluster.bootstrap_servers.split(",")) == 3
        assert all(cluster.broker_pids.values())
        state = read_state(tmp_path / "c")
        assert state["bootstrap_servers"] == cluster.bootstrap_servers
        assert all(pid_matches(b["pid"], b["marker"]) for b in state["brokers"])
        admin = AdminZkClient(cluster.zk)
        assert [b.id for b in admin.live_brokers()] == [1, 2, 3]
        assert admin.controller_id() in (1, 2, 3)

        old_czxid = cluster.zk.exists("/brokers/ids/2").czxid
        cluster.kill_broker(2, signal.SIGTERM)
        assert cluster.broker_pids[2] is None
        cluster.start_broker(2)  # waits for a NEW registration (not the old session's znode)
        assert cluster.zk.exists("/brokers/ids/2").czxid != old_czxid
        pids = [p for p in cluster.broker_pids.values()] + list(cluster.ensemble.pids.values())
    assert not any(pid_matches(p, "") for p in pids)


def test_broker_exit_fails_start_with_log_tail(tmp_path):
    cluster = LocalCluster(tmp_path / "c", zookeepers=1, brokers=1, overrides={"log.segment.bytes": "lots"},
                           startup_timeout=60)
    with pytest.raises(ClusterError) as info:
        cluster.start()
    assert "broker 1 exited (code 1)" in str(info.value) and "log.segment.bytes" in str(info.value)
    assert all(n.pid is None for n in cluster.ensemble.nodes.values())


def _odradek(env, *args, cwd=None):
    return subprocess.run([ODRADEK, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=180)


def test_cluster_up_status_down(tmp_path):
    env = dict(os.environ)
    data = tmp_path / "data"
    state = None
    try:
        ui_port = free_ports(1)[0]
        r = _odradek(env, "cluster", "up", "--data-dir", str(data), "--brokers", "2", "--zookeepers", "3",
                     "--ui-port", str(ui_port))
        assert r.returncode == 0, r.stderr
        state = read_state(data)
        # the web view came up with it, reading this cluster
        assert f"web view:          http://127.0.0.1:{ui_port}/" in r.stdout
        assert state["ui"]["port"] == ui_port and pid_matches(state["ui"]["pid"], state["ui"]["marker"])
        seen = wait_until(lambda: _ui_snapshot(ui_port), 60, "the web view's snapshot", retry_on=(OSError,))
        assert seen["zookeeper"]["connect"] == state["zookeeper_connect"]
        assert f"bootstrap servers: {state['bootstrap_servers']}" in r.stdout
        assert f"zookeeper connect: {state['zookeeper_connect']}" in r.stdout
        # the processes outlived the CLI
        assert all(pid_matches(p["pid"], p["marker"]) for p in state["brokers"] + state["zookeepers"])
        # metrics are on, and each broker's URL is printed and answers
        from odradek.testing import scrape
        for b in state["brokers"]:
            url = f"http://127.0.0.1:{b['metrics_port']}/metrics"
            assert f"metrics broker {b['id']}: {url}" in r.stdout
            assert scrape(url).value("kafka_server_replicamanager_partitioncount") == 0

        r = _odradek(env, "cluster", "up", "--data-dir", str(data))
        assert r.returncode == 1 and "already up" in r.stderr and len(r.stderr.strip().splitlines()) == 1

        zk = open_zk(state["zookeeper_connect"], timeout=30)
        try:
            AdminZkClient(zk).create_topic("t", 3, 2)
        finally:
            zk.stop()
            zk.close()
        r = _odradek(env, "cluster", "status", "--data-dir", str(data))
        assert r.returncode == 0, r.stderr
        assert "live brokers (2):" in r.stdout and "controller: " in r.stdout and "t: 3 partition(s)" in r.stdout
        assert f"web view: pid {state['ui']['pid']} running, http://127.0.0.1:{ui_port}/" in r.stdout
        wait_until(lambda: [b["status"] for b in _ui_snapshot(ui_port)["brokers"]] == ["up", "up"], 30,
                   "both brokers up on the web view")
        assert r.stdout.count("/metrics") == 2

        # topics finds the cluster through its state file (ODRADEK_DATA_DIR / ./data)
        r = _odradek({**env, "ODRADEK_DATA_DIR": str(data)}, "topics", "--list")
        assert r.returncode == 0 and r.stdout == "t\n", r.stderr
        r = _odradek({k: v for k, v in env.items() if k != "ODRADEK_DATA_DIR"}, "topics", "--list", cwd=tmp_path)
        assert r.returncode == 0 and r.stdout == "t\n", r.stderr

        r = _odradek(env, "cluster", "down", "--data-dir", str(data))
        assert r.returncode == 0, r.stderr
        assert "Cluster is down." in r.stdout
        assert not any(pid_matches(p["pid"], p["marker"]) for p in state["brokers"] + state["zookeepers"])
        assert not pid_matches(state["ui"]["pid"], state["ui"]["marker"]) and "Stopping the web view" in r.stdout
        assert read_state(data) is None
    finally:
        if state:  # never leave processes behind, even if an assertion failed
            for p in state["brokers"] + state["zookeepers"] + ([state["ui"]] if "ui" in state else []):
                if pid_matches(p["pid"], p["marker"]):
                    os.kill(p["pid"], signal.SIGKILL)


def _ui_snapshot(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/snapshot", timeout=5) as resp:
        return json.loads(resp.read())


def test_down_refuses_foreign_pids(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (data / "cluster.json").write_text(json.dumps({
            "zookeeper_connect": "127.0.0.1:1", "bootstrap_servers": "127.0.0.1:2",
            "zookeepers": [], "brokers": [{"id": 1, "pid": sleeper.pid, "port": 2,
                                           "marker": str(data / "broker-1" / "server.properties")}]}))
        r = _odradek(dict(os.environ), "cluster", "down", "--data-dir", str(data))
        assert r.returncode == 0 and "not running" in r.stdout
        assert sleeper.poll() is None  # a PID that is not ours was left alone
    finally:
        sleeper.kill()
        sleeper.wait()
