"""``odradek perf scale`` at a tiny scale: every figure measured, nothing left running.

It starts its own cluster (3 brokers, 1 ZooKeeper) and must stop it by PID even after it has
SIGTERMed, restarted and kill -9'd brokers. No speed is asserted: only that each figure exists and
is positive, and that every process it reported is gone afterwards.
"""
import json
import os
import subprocess
import sys

from odradek.zk.perf_scale import FIGURES
from odradek.zk.scale_probe import pid_alive

ODRADEK = os.path.join(os.path.dirname(sys.executable), "odradek")


def test_perf_scale_measures_every_figure_and_stops_its_cluster(tmp_path):
    proc = subprocess.run([ODRADEK, "perf", "scale", "--partitions", "30", "--topics", "3", "--batch", "2",
                           "--json", "--data-dir", str(tmp_path), "--timeout", "180"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert (result["partitions"], result["topics"], result["replication_factor"], result["brokers"]) == (30, 3, 3, 3)
    missing = [key for key, _, _ in FIGURES if not (isinstance(result.get(key), (int, float)) and result[key] > 0)]
    assert not missing, f"figures not measured: {missing} in {result}"
    assert sorted(result["rss_mib"]) == ["1", "2", "3"] and all(v > 0 for v in result["rss_mib"].values())
    assert result["shutdown_broker_leads"] > 0
    # the progress lines went to stderr, the JSON alone to stdout
    assert "kill -9 of controller" in proc.stderr
    # 1 ZooKeeper + 3 brokers + 2 restarted brokers, all ended
    assert len(set(result["pids"])) == 6
    assert not [pid for pid in result["pids"] if pid_alive(pid)]
    run_dirs = list(tmp_path.iterdir())
    assert len(run_dirs) == 1 and not (run_dirs[0] / "cluster.json").exists()
