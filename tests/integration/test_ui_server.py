"""``odradek ui`` with nothing to look at: no ZooKeeper and no broker answering. The server
must come up, serve the page and its assets, show every failed source on the snapshot and keep
collecting; it serves reads only.

Invariant: the UI process is ended by PID in the fixture's teardown; waits poll a condition.
"""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from odradek.testing import wait_until
from odradek.zk.ensemble import stop_process
from odradek_test_support import free_port


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    zk_port, broker_port, port = free_port(), free_port(), free_port()
    log = tmp_path_factory.mktemp("ui") / "ui.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "odradek.zk.cli", "ui", "--zookeeper", f"127.0.0.1:{zk_port}",
                                 "--bootstrap-server", f"127.0.0.1:{broker_port}", "--port", str(port),
                                 "--interval", "0.2"], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until(lambda: urllib.request.urlopen(url, timeout=2).status == 200, 30, "the ui server answering",
                   retry_on=(OSError,))
        yield url, proc
    finally:
        stop_process(proc)
        print(log.read_text(errors="replace")[-3000:])


def _snapshot(url: str) -> dict:
    with urllib.request.urlopen(url + "api/snapshot", timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("application/json")
        return json.loads(resp.read())


def test_the_page_and_its_assets_are_served_locally(ui):
    url, _ = ui
    page = urllib.request.urlopen(url, timeout=5).read().decode()
    assert '<script src="app.js">' in page and '<link rel="stylesheet" href="style.css">' in page
    for asset, kind in (("app.js", "javascript"), ("style.css", "text/css")):
        with urllib.request.urlopen(url + asset, timeout=5) as resp:
            assert kind in resp.headers["Content-Type"] and resp.read()


def test_every_failed_source_is_shown_and_collection_goes_on(ui):
    url, proc = ui
    snap = wait_until(lambda: (s := _snapshot(url))["cycle"] >= 1 and s, 60, "a first collection cycle")
    sources = {e["source"] for e in snap["errors"]}
    assert {"zookeeper", "broker metadata"} <= sources, snap["errors"]
    assert snap["zookeeper"]["members"] == [{"address": snap["zookeeper"]["connect"], "mode": None, "ok": False}]
    assert snap["brokers"] == [] and snap["topics"] == []
    wait_until(lambda: _snapshot(url)["cycle"] >= snap["cycle"] + 2, 60, "more collection cycles")
    assert proc.poll() is None


def test_it_serves_reads_only(ui):
    url, _ = ui
    request = urllib.request.Request(url + "api/snapshot", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(request, timeout=5)
    assert exc.value.code == 405
