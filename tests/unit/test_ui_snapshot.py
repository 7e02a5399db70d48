"""odradek ui's sans-IO parts: the snapshot the page renders, the Prometheus parse and the
throughput rates, the ZooKeeper connect-string and srvr reading, and the page's static files
being shipped as package data.
"""
from __future__ import annotations

import json
from pathlib import Path

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from odradek.client.ui.collector import ensemble_members, http_get, server_mode
from odradek.client.ui.metrics import RateSeries, broker_totals, parse_samples
from odradek.client.ui.snapshot import GroupRead, PartitionRead, RawReads, build

SAMPLE = """# HELP kafka_server_brokertopicmetrics_messagesin_total Incoming messages
# TYPE kafka_server_brokertopicmetrics_messagesin_total counter
kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 120.0
kafka_server_brokertopicmetrics_messagesin_total{topic="pay\\"ments"} 30.0
kafka_server_brokertopicmetrics_messagesin_created{topic="orders"} 1.7e9
kafka_server_brokertopicmetrics_bytesin_total{topic="orders"} 4096.0
kafka_server_brokertopicmetrics_bytesin_total 5000.0
kafka_server_brokertopicmetrics_bytesout_total{topic="orders"} 8192.0 1700000000000
kafka_network_requestmetrics_requests_total{request="Produce"} 7.0
garbage line without a value
kafka_server_brokertopicmetrics_bytesout_total{topic="x"} NaN
"""


def _raw(**kw) -> RawReads:
    base = dict(
        taken_at=100.0, zookeeper_connect="zk:2181",
        ensemble=[("zk:2181", "leader"), ("zk2:2181", None)],
        brokers={1: "h:9092", 2: "h:9093"}, known_brokers={1: "h:9092", 2: "h:9093", 3: "h:9094"},
        controller=2,
        topics={"orders": {0: PartitionRead([1, 2, 3], 1, [1, 2]), 1: PartitionRead([2, 3, 1], 2, [2, 3, 1]),
                           2: PartitionRead([3], None, [3])},
                "__consumer_offsets": {0: PartitionRead([1], 1, [1])}},
        internal={"__consumer_offsets"},
        sizes={1: {("orders", 0): 100, ("orders", 1): 200}, 2: {("orders", 1): 210}},
        offsets={("orders", 0): (0, 50), ("orders", 1): (5, 40)},
        groups=[GroupRead("g", "Stable", "range", 2,
                          [{"member_id": "m1", "client_id": "c", "host": "/127.0.0.1",
                            "assignment": [("orders", 0)]}], {("orders", 0): 45, ("orders", 1): 40})],
        reassignments={("orders", 1): {"replicas": [2, 3, 1], "adding_replicas": [1], "removing_replicas": [3]}},
    )
    base.update(kw)
    return RawReads(**base)


def test_partitions_flags_sizes_offsets_and_reassignment():
    snap = build(_raw())
    assert [t["name"] for t in snap["topics"]] == ["orders", "__consumer_offsets"]  # internal last
    orders = snap["topics"][0]
    p0, p1, p2 = orders["partitions"]
    assert (p0["under_replicated"], p0["offline"], p0["size"], p0["start_offset"], p0["end_offset"]) == \
        (True, False, 100, 0, 50)
    assert (p1["under_replicated"], p1["size"], p1["reassigning"]) == (False, 210, {"adding": [1], "removing": [3]})
    # leader none (and broker 3 not registered): offline; no offsets read
    assert (p2["offline"], p2["under_replicated"], p2["end_offset"]) == (True, False, None)
    assert (orders["under_replicated"], orders["offline"], orders["size"], orders["messages"]) == (1, 1, 310, 85)
    assert snap["summary"] == {"brokers": 2, "brokers_down": 1, "topics": 2, "partitions": 4,
                               "under_replicated": 1, "offline": 1, "groups": 1, "reassignments": 1}
    assert snap["reassignments"] == [{"topic": "orders", "partition": 1, "replicas": [2, 3, 1],
                                      "adding": [1], "removing": [3]}]
    json.dumps(snap)  # plain JSON


def test_brokers_up_unreachable_gone_and_the_controller():
    snap = build(_raw(unreachable={1: "ConnectionLost: refused"}))
    by_id = {b["id"]: b for b in snap["brokers"]}
    assert [(b["id"], b["status"], b["controller"]) for b in snap["brokers"]] == \
        [(1, "unreachable", False), (2, "up", True), (3, "gone", False)]
    assert by_id[1]["error"] == "ConnectionLost: refused"
    assert (by_id[1]["replicas"], by_id[1]["leaders"], by_id[1]["log_size"]) == (3, 2, 300)
    assert by_id[3]["address"] == "h:9094" and by_id[3]["throughput"]["error"] == "broker not registered"
    assert snap["zookeeper"]["members"] == [{"address": "zk:2181", "mode": "leader", "ok": True},
                                            {"address": "zk2:2181", "mode": None, "ok": False}]


def test_group_lag_per_partition_and_in_total():
    [g] = build(_raw())["groups"]
    assert g["partitions"] == [
        {"topic": "orders", "partition": 0, "committed": 45, "end_offset": 50, "lag": 5, "owner": "m1"},
        {"topic": "orders", "partition": 1, "committed": 40, "end_offset": 40, "lag": 0, "owner": None}]
    assert g["total_lag"] == 5 and g["members"][0]["assignment"] == ["orders-0"]


def test_failed_sources_give_an_empty_page_with_the_errors_never_an_exception():
    snap = build(RawReads(taken_at=1.0, zookeeper_connect="zk:1",
                          errors={"zookeeper": "not connected", "broker metadata": "timed out"}))
    assert snap["brokers"] == snap["topics"] == snap["groups"] == snap["reassignments"] == []
    assert snap["errors"] == [{"source": "broker metadata", "message": "timed out"},
                              {"source": "zookeeper", "message": "not connected"}]
    json.dumps(snap)


def test_prometheus_text_parsed_with_labels_escapes_and_bad_lines_skipped():
    samples = parse_samples(SAMPLE)
    assert ("kafka_server_brokertopicmetrics_messagesin_total", {"topic": 'pay"ments'}, 30.0) in samples
    assert ("kafka_network_requestmetrics_requests_total", {"request": "Produce"}, 7.0) in samples
    assert not any(name == "garbage" for name, _, _ in samples)
    # the all-topics sample wins where served; else the sum over topics; _created ignored; NaN skipped
    assert broker_totals(SAMPLE) == {"messages_in": 150.0, "bytes_in": 5000.0, "bytes_out": 8192.0}
    assert broker_totals("") == {}


def test_rates_from_counters_and_a_restarted_broker_starting_anew():
    series = RateSeries(points=3)
    series.feed(10.0, {"messages_in": 100.0})
    assert series.as_json() == {}
    series.feed(12.0, {"messages_in": 300.0})
    series.feed(13.0, {"messages_in": 350.0})
    assert series.as_json() == {"messages_in": [100.0, 50.0]}
    series.feed(14.0, {"messages_in": 5.0})  # counter went back: a restart
    assert series.as_json() == {"messages_in": []}
    for t in range(15, 20):
        series.feed(float(t), {"messages_in": 5.0 + (t - 14) * 2})
    assert series.as_json() == {"messages_in": [2.0, 2.0, 2.0]}  # only the last points kept


def test_zookeeper_connect_string_and_srvr_reply():
    assert ensemble_members("a:2181,b:2182/kafka") == [("a", 2181), ("b", 2182)]
    assert ensemble_members("c") == [("c", 2181)]
    assert server_mode("Zookeeper version: 3.8\nLatency min/avg/max: 0/0/0\nMode: follower\n") == "follower"
    assert server_mode("srvr is not executed because it is not in the whitelist.\n") == "unknown"
    assert server_mode("") is None


def test_the_page_and_its_assets_are_package_data():
    root = Path(__file__).resolve().parents[2]
    static = root / "client" / "ui" / "static"
    assert {"index.html", "app.js", "style.css"} <= {p.name for p in static.iterdir()}
    setup = (root / "setup.cfg").read_text()
    assert "odradek.client.ui = static/*.html, static/*.js, static/*.css" in setup
    page = (static / "index.html").read_text()
    assert "http" not in page.replace('name="viewport"', "")  # nothing from another host: no CDN


def test_a_metrics_endpoint_scraped_over_http_gives_rates():
    """The scrape as the collector does it (HTTP GET of /metrics), against a served sample whose
    counters grow by 40 messages between scrapes."""
    served = [0]

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            served[0] += 1
            body = SAMPLE.replace('{topic="orders"} 120.0', f'{{topic="orders"}} {120.0 + 40 * served[0]}').encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        series = RateSeries()
        series.feed(1.0, broker_totals(http_get(url)))
        series.feed(3.0, broker_totals(http_get(url)))
        assert series.as_json()["messages_in"] == [20.0]  # 40 messages in 2 s
        assert series.as_json()["bytes_in"] == [0.0]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
