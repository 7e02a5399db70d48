"""``OwnerRegistry``: which pytest process owns which cluster, so a killed run's processes die too.

Invariant: a cluster's data dir is registered (an entry file naming the owning pid and the
dir) before any of its processes starts, and the entry is removed once the cluster was
stopped. An entry whose owner is no longer alive belongs to a run that died (SIGKILL, a CI
timeout): ``reap()`` stops the processes its ``cluster.json`` records — each verified by its
command line before it is signalled (``odradek.zk.cluster.live_processes``), never by name —
and removes the entry. Entries of live owners (other runs, other xdist workers) are left alone.
"""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class OwnerRegistry:
    """Entries under ``directory`` (shared by every run of the same user's pytest tmp root)."""

    def __init__(self, directory: Path):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def register(self, data_dir: Path) -> Path:
        entry = self.directory / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
        entry.write_text(json.dumps({"owner_pid": os.getpid(), "data_dir": str(data_dir)}) + "\n")
        return entry

    def release(self, entry: Path) -> None:
        entry.unlink(missing_ok=True)

    def reap(self) -> list[str]:
        """Stop the processes of every cluster whose owner died; the data dirs reaped."""
        from odradek.zk.cluster import live_processes, read_state, stop_recorded
        reaped = []
        for entry in sorted(self.directory.glob("*.json")):
            try:
                info = json.loads(entry.read_text())
                pid, data_dir = int(info["owner_pid"]), info["data_dir"]
            except (OSError, ValueError, KeyError):
                continue
            if pid == os.getpid() or _alive(pid):
                continue
            state = read_state(data_dir)
            if state:
                procs = live_processes(state)
                for kind in ("broker", "zookeeper"):  # brokers first: their shutdown needs ZooKeeper
                    stop_recorded([p for p in procs if p[0] == kind])
                reaped.append(data_dir)
            entry.unlink(missing_ok=True)
        return reaped
