"""The demo pipeline: exact window counts, a hard kill of the query and restart, a broker killed mid-stream."""
from __future__ import annotations

import os
import subprocess
import sys

from odradek.client import AdminClient
from odradek.pipeline.jobs import page_views as pv
from odradek.testing import create_topic
from odradek.testing import wait_until as wait_for
from spark_helpers import kill_process_tree, scratch_env

T0 = 1_700_000_000_000 - 1_700_000_000_000 % 60_000  # a minute boundary


def _topics(bootstrap: str, partitions: int = 3, rf: int = 1) -> None:
    create_topic(bootstrap, pv.SOURCE_TOPIC, partitions, replication_factor=rf)
    create_topic(bootstrap, pv.SINK_TOPIC, 2, replication_factor=rf, configs={"cleanup.policy": "compact"})


def _counts(bootstrap: str) -> dict:
    view = pv.CountsView(bootstrap)
    try:
        while view.poll(1000):
            pass
        return view.counts()
    finally:
        view.close()


def test_window_counts_are_exact_with_available_now(spark, cluster_factory, tmp_path):
    bootstrap = cluster_factory(brokers=1).bootstrap_servers
    _topics(bootstrap)
    events = pv.random_events(2000, T0 + 15_000, 5 * 60_000, seed=7)  # spans 6 one-minute windows
    pv.produce(bootstrap, events)
    q = pv.start_query(spark, pv.JobConfig(bootstrap, str(tmp_path / "ckpt"), trigger="available-now",
                                           watermark="10 minutes"))
    q.awaitTermination(180)
    assert q.exception() is None
    expected = pv.expected_counts(events)
    assert len({w for _, w in expected}) == 6
    assert _counts(bootstrap) == expected


def test_killed_query_restarts_from_checkpoint_without_loss(spark, cluster_factory, tmp_path):
    bootstrap = cluster_factory(brokers=1).bootstrap_servers
    _topics(bootstrap)
    events = pv.random_events(3000, T0, 4 * 60_000, seed=11)
    pv.produce(bootstrap, events)
    checkpoint = tmp_path / "ckpt"
    # the job in its own process (its own JVM), small micro-batches, killed -9 mid-stream
    cmd = [sys.executable, "-m", "odradek.pipeline.cli", "run", "--bootstrap-server", bootstrap,
           "--checkpoint", str(checkpoint), "--master", "local[2]", "--trigger", "500 milliseconds",
           "--max-offsets-per-trigger", "150", "--watermark", "1 hour"]
    log = open(tmp_path / "job.log", "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env=scratch_env(tmp_path))
    try:
        commits = checkpoint / "commits"
        wait_for(lambda: commits.is_dir() and len([f for f in os.listdir(commits) if f.isdigit()]) >= 2,
                 240, "two committed micro-batches")
        assert proc.poll() is None
    finally:
        kill_process_tree(proc.pid)  # the driver, its JVM and its Python workers
        proc.wait()
        log.close()
    partial = _counts(bootstrap)
    expected = pv.expected_counts(events)
    assert sum(partial.values()) < len(events)  # it really was killed mid-stream
    # restart from the checkpoint in this process and run to the end of the input
    q = pv.start_query(spark, pv.JobConfig(bootstrap, str(checkpoint), trigger="available-now",
                                           watermark="1 hour", max_offsets_per_trigger=1000))
    q.awaitTermination(180)
    assert q.exception() is None
    assert _counts(bootstrap) == expected  # latest per key: every event counted exactly once


def test_query_survives_input_leader_kill(spark, cluster_factory, tmp_path):
    """RF 3: kill -9 the leader of an input partition mid-stream; a follower takes over,
    the query keeps running and counts every event, the ones produced after the kill too."""
    cluster = cluster_factory(brokers=3)
    bootstrap = cluster.bootstrap_servers
    _topics(bootstrap, rf=3)
    first = pv.random_events(1500, T0, 3 * 60_000, seed=3)
    pv.produce(bootstrap, first)
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        leader = admin.describe_topics([pv.SOURCE_TOPIC])[0]["partitions"][0]["leader"]
    q = pv.start_query(spark, pv.JobConfig(bootstrap, str(tmp_path / "ckpt"), trigger="500 milliseconds",
                                           watermark="1 hour", max_offsets_per_trigger=200))
    try:
        wait_for(lambda: q.lastProgress and q.lastProgress["batchId"] >= 1, 120, "two micro-batches")
        cluster.kill_broker(leader)
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            wait_for(lambda: admin.describe_topics([pv.SOURCE_TOPIC])[0]["partitions"][0]["leader"]
                     not in (-1, leader), 60, "a new leader for partition 0")
        second = pv.random_events(500, T0 + 3 * 60_000, 60_000, seed=4)
        pv.produce(bootstrap, second)  # while the old leader is still down
        expected = pv.expected_counts(first + second)
        wait_for(lambda: _counts(bootstrap) == expected or q.exception(), 150, "every event counted")
        assert q.exception() is None
        assert _counts(bootstrap) == expected
    finally:
        q.stop()
