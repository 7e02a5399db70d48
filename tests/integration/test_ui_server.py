"""``odradek ui`` without a browser: with nothing to look at (no ZooKeeper and no broker answering)
the server comes up, serves the page and its assets, shows every failed source and keeps
collecting, and serves reads only; on a secured cluster (SASL_SSL, an authorizer) it reads
everything as the principal of its ``--command-config``.

Invariant: every UI process and cluster is ended by its fixture, also on failure; waits poll a
condition.
"""
from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from ui_support import snapshot, ui_process

from odradek.testing import wait_until
from odradek.testing.secure_cluster import PLAIN_JAAS, SecuredListeners
from odradek_test_support import free_port


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    with ui_process(f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}",
                    tmp_path_factory.mktemp("ui") / "ui.log") as running:
        yield running


def test_the_page_and_its_assets_are_served_locally(ui):
    url, _ = ui
    page = urllib.request.urlopen(url, timeout=5).read().decode()
    assert '<script src="app.js">' in page and '<link rel="stylesheet" href="style.css">' in page
    for asset, kind in (("app.js", "javascript"), ("style.css", "text/css")):
        with urllib.request.urlopen(url + asset, timeout=5) as resp:
            assert kind in resp.headers["Content-Type"] and resp.read()


def test_every_failed_source_is_shown_and_collection_goes_on(ui):
    url, proc = ui
    snap = wait_until(lambda: (s := snapshot(url))["cycle"] >= 1 and s, 60, "a first collection cycle")
    sources = {e["source"] for e in snap["errors"]}
    assert {"zookeeper", "broker metadata"} <= sources, snap["errors"]
    assert snap["zookeeper"]["members"] == [{"address": snap["zookeeper"]["connect"], "mode": None, "ok": False}]
    assert snap["brokers"] == [] and snap["topics"] == []
    wait_until(lambda: snapshot(url)["cycle"] >= snap["cycle"] + 2, 60, "more collection cycles")
    assert proc.poll() is None


def test_it_serves_reads_only(ui):
    url, _ = ui
    request = urllib.request.Request(url + "api/snapshot", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(request, timeout=5)
    assert exc.value.code == 405


def test_a_secured_cluster_read_with_the_command_config(tmp_path):
    from odradek.zk.admin import AdminZkClient
    from odradek.zk.cluster import LocalCluster
    secured = SecuredListeners.make(tmp_path, [1], protocols=("SASL_SSL",))
    overrides = {**secured.overrides, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                 "super.users": "User:admin", "offsets.topic.replication.factor": "1"}
    with LocalCluster(tmp_path / "cluster", zookeepers=1, brokers=1, overrides=overrides,
                      extra_listeners=secured.extra_listeners) as cluster:
        AdminZkClient(cluster.zk).create_topic("secret-orders", 2, 1)  # through ZooKeeper, as kafka-topics.sh
        config = tmp_path / "ui.properties"
        config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                          f"ssl.truststore.location={secured.tls.ca}\n"
                          f"sasl.jaas.config={PLAIN_JAAS.split(' user_')[0]};\n")
        with ui_process(cluster.zookeeper_connect, secured.bootstrap("SASL_SSL"), tmp_path / "ui.log",
                        "--command-config", str(config)) as (url, _):
            snap = wait_until(lambda: (s := snapshot(url))["cycle"] >= 2 and not s["errors"] and s, 60,
                              "a collection cycle without errors")
            assert [(b["id"], b["status"]) for b in snap["brokers"]] == [(1, "up")]
            [topic] = [t for t in snap["topics"] if t["name"] == "secret-orders"]
            assert [p["end_offset"] for p in topic["partitions"]] == [0, 0]   # ListOffsets answered
            assert all(p["size"] == 0 for p in topic["partitions"])           # DescribeLogDirs answered
