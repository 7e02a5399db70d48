"""Small helpers shared by the Spark tests (topics, producing, reading back with the plain Consumer)."""
from __future__ import annotations

import os
import signal
import time

from odradek.client import Consumer, TopicPartition


def read_all(bootstrap: str, topic: str, timeout: float = 30.0) -> list:
    """Every record of ``topic`` up to its current end offsets, via the plain Consumer."""
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        parts = sorted(c.partitions_for_topic(topic) or [])
        tps = [TopicPartition(topic, p) for p in parts]
        c.assign(tps)
        ends = c.end_offsets(tps)
        out = []
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(f"could not read {topic} to its end in {timeout} s")
            for recs in c.poll(timeout_ms=500).values():
                out.extend(r for r in recs if r.offset < ends[TopicPartition(r.topic, r.partition)])
        return out


def scratch_env(tmp_path) -> dict[str, str]:
    """The environment of a Spark driver the test will kill -9: Spark's scratch space (its
    ``spark-*`` and ``blockmgr-*`` dirs, which only a clean JVM exit deletes) and the JVM's temp
    files go under the test's ``tmp_path``, not /tmp."""
    local, java_tmp = tmp_path / "spark-local", tmp_path / "java-tmp"
    local.mkdir(exist_ok=True)
    java_tmp.mkdir(exist_ok=True)
    return {**os.environ, "SPARK_LOCAL_DIRS": str(local), "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={java_tmp}"}


def kill_process_tree(pid: int) -> None:
    """SIGKILL the process group of ``pid`` and those of its descendants, together.

    PySpark's worker daemon puts itself and its Python workers in a process group of their own:
    killing only the query's group would leave the workers running and committing their task.
    """
    parents: dict[int, int] = {}
    groups: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # exited meanwhile
            parents[int(entry)], groups[int(entry)] = int(fields[1]), int(fields[2])
    tree, todo = {pid}, [pid]
    while todo:
        parent = todo.pop()
        children = [p for p, pp in parents.items() if pp == parent and p not in tree]
        tree.update(children)
        todo.extend(children)
    for group in sorted({groups[p] for p in tree if p in groups} | {pid}):
        if group in tree:  # a group led by one of ours
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
