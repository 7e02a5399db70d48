"""``odradek ui`` as its own process for the web view's tests.

Invariant: ``ui_process`` ends the process it started, by PID, also when the test fails, and
prints the tail of its log then; it yields only once the server answers HTTP.
"""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from odradek.testing import wait_until
from odradek.zk.ensemble import stop_process
from odradek_test_support import free_port


@contextmanager
def ui_process(zookeeper: str, bootstrap: str, log: Path, *extra: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """(the page's URL, the process) of ``odradek ui`` on a free port, reading every 0.3 s."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "odradek.zk.cli", "ui", "--zookeeper", zookeeper,
                                 "--bootstrap-server", bootstrap, "--port", str(port), "--interval", "0.3", *extra],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until(lambda: urllib.request.urlopen(url, timeout=2).status == 200, 30, "the ui server answering",
                   retry_on=(OSError,))
        yield url, proc
    finally:
        stop_process(proc)
        print(log.read_text(errors="replace")[-3000:])


def snapshot(url: str) -> dict:
    """The JSON the page renders."""
    with urllib.request.urlopen(url + "api/snapshot", timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("application/json")
        return json.loads(resp.read())
